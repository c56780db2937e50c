"""Timing: interleaved rounds of every column, the numbers a run is summed up by, and the line
that names the machine (kuiper/bench/__init__.py says why each rule)."""

from __future__ import annotations

import contextlib
import os
import platform
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

# On the CPU: torch (eager) and onnxruntime. On a CUDA GPU (columns.bench_torch_cuda):
# torch-cuda: eager, fp32 with TF32 off everywhere (the like-for-like fp32 comparison), host
#   arrays in and out as Kuiper's host-to-host column;
# torch-cuda-default: the same with PyTorch's defaults (cuDNN convolutions may use TF32);
# torch-cuda-device: eager fp32 with the tensors on the GPU (Kuiper's "device I/O" column);
# torch-compile, -tf32, -fp16: torch.compile(mode="reduce-overhead") with the tensors on the
#   GPU, in fp32 (TF32 off), with TF32 allowed, and of model.half(): the strongest anchors.
REFERENCES = ("torch", "onnxruntime", "torch-cuda", "torch-cuda-default", "torch-cuda-device",
              "torch-compile", "torch-compile-tf32", "torch-compile-fp16")


PROFILE_RUNS = 5


SETTLE_SECONDS = 0.25  # longer than OpenBLAS's and OpenMP's spin-wait before their threads sleep


REWARM_SECONDS = 0.05  # untimed runs after each pause (PoCL needs 3-4 MobileNetV2 runs, ~35 ms)


@dataclass
class Column:
    """One row of the results table: a backend or a reference framework."""

    label: str
    runs: list[float] = field(default_factory=list)  # seconds
    after_idle: list[float] = field(default_factory=list)  # the first run after each pause
    outputs: list = field(default_factory=list)
    profile: dict[str, float] = field(default_factory=dict)  # operator name -> seconds
    note: str = ""
    run: Callable[[], object] | None = field(default=None, repr=False)  # one inference
    memory: str = ""  # peak memory, and how it was counted
    profiler: Callable[[], dict[str, float]] | None = field(default=None, repr=False)
    tracer: Callable[[], list] | None = field(default=None, repr=False)  # one run's spans
    kinds: dict[str, float] = field(default_factory=dict)  # kind of operator -> seconds (kinds.py)
    kind_profiler: Callable[[], dict[str, float]] | None = field(default=None, repr=False)
    # OpenCL: kernel launches per inference and the time between them (columns.launch_gaps)
    gaps: dict[str, float] = field(default_factory=dict)
    gap_profiler: Callable[[], dict[str, float]] | None = field(default=None, repr=False)

    @property
    def median(self) -> float:
        return statistics.median(self.runs)

    @property
    def best(self) -> float:
        return min(self.runs)

    def percentile(self, q: float) -> float:
        """The q-th percentile of the run times (linear interpolation between runs)."""
        return float(np.percentile(self.runs, q))


# --- timing ---------------------------------------------------------------------------------
def blas_threads(threads: int):
    """Limit NumPy's BLAS (and so Kuiper's direct sgemm, the same library) to `threads` while
    the benchmark runs.

    threadpoolctl changes the thread count of the BLAS libraries already loaded, on every
    platform; setting OMP_NUM_THREADS or OPENBLAS_NUM_THREADS here would come too late, as
    OpenBLAS reads them once when NumPy is imported.
    """
    from threadpoolctl import threadpool_limits

    return threadpool_limits(limits=threads, user_api="blas")


def time_columns(columns: list[Column], warmup: int, repeat: int, rounds: int,
                 advance: Callable[[Column], None], seconds: float | None = None) -> None:
    """Warm every column up, then time `repeat` runs of each in interleaved rounds; with
    `seconds`, each column runs for about that long in all (seconds / rounds per round).
    Each block starts with a pause (SETTLE_SECONDS) and untimed runs (REWARM_SECONDS), the
    first of which goes to `column.after_idle`, not to `column.runs`."""
    for column in columns:
        for _ in range(warmup):
            column.run()
            advance(column)
    if seconds is None:
        rounds = min(rounds, repeat)
        blocks = [repeat // rounds + (i < repeat % rounds) for i in range(rounds)]
    else:
        blocks = [None] * rounds
    for block in blocks:
        for column in columns:
            time.sleep(SETTLE_SECONDS)
            after_pause = time.perf_counter()
            column.run()                  # the first run after the pause: "after idle"
            column.after_idle.append(time.perf_counter() - after_pause)
            while time.perf_counter() - after_pause < REWARM_SECONDS:   # back to speed, untimed
                column.run()
            block_start = time.perf_counter()
            done = 0
            # A count, or a time budget: at least one run either way.
            while done < 1 or (block is not None and done < block) or (
                    block is None and time.perf_counter() - block_start < seconds / rounds):
                start = time.perf_counter()
                column.run()
                column.runs.append(time.perf_counter() - start)
                advance(column)
                done += 1


# --- the command ----------------------------------------------------------------------------
def machine_line() -> str:
    cpu = platform.processor() or platform.machine()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    return (f"{cpu}, {os.cpu_count()} logical cores, Python {platform.python_version()}, "
            f"NumPy {np.__version__}")


def busy_warning() -> str:
    """Other processes competing for the cores make timings (PyTorch's spinning OpenMP
    threads above all) unreliable; say so rather than print misleading numbers."""
    try:
        load = os.getloadavg()[0]
    except (AttributeError, OSError):  # not on every OS
        return ""
    cores = os.cpu_count() or 1
    if load <= cores * 0.75:
        return ""
    return (f"warning: the machine is busy (load average {load:.1f} on {cores} cores): "
            "timings will be noisy; benchmark on a quiet machine")


def summary_numbers(column: Column, batch: int) -> dict:
    """Timing statistics of one column, in ms and per second."""
    return {"runs": len(column.runs), "median_ms": column.median * 1e3,
            "min_ms": column.best * 1e3, "p50_ms": column.percentile(50) * 1e3,
            "p90_ms": column.percentile(90) * 1e3, "p99_ms": column.percentile(99) * 1e3,
            "inferences_per_s": 1 / column.median if column.median else None,
            "items_per_s": batch / column.median if column.median else None,
            "after_idle_ms": (statistics.median(column.after_idle) * 1e3
                              if column.after_idle else None),
            "after_idle_runs_ms": [t * 1e3 for t in column.after_idle]}


def threads_label(n: int) -> str:
    return f"{n} thread" + ("s" if n != 1 else "")
