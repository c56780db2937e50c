"""`kuiper bench`: how fast is a model on each backend, where does the time go, and how does that
compare with PyTorch and onnxruntime on the same machine, in the same run?

Method (what makes the numbers worth writing down):
- the same seeded input for every column; `--warmup` untimed runs first (OpenCL compiles and
  binds, caches warm up), then `--repeat` timed runs of one whole inference each;
- the timed runs are *interleaved*: `--rounds` rounds, each giving every column a block of its
  runs. A shared or virtual machine speeds up and slows down by tens of percent over seconds;
  timing all of one column and then all of the next would pin such a phase on one framework.
  Before each block the machine idles for a moment, because every framework's worker threads
  keep spinning a while after their last task (OpenBLAS: ~0.1 s) and would slow the next one;
- that pause lets every framework's threads (and the CPU's clocks) go idle, and frameworks
  come back up to speed at different rates: on the 2-core VM of the README, PyTorch's second
  MobileNetV2 run after a 0.25 s pause is at full speed, PoCL's fourth. So after the pause each
  column runs untimed for `REWARM_SECONDS` (at least once) before its timed block: the medians
  are steady-state times for everyone. The first run after each pause is kept apart and shown
  as "after idle" (the latency of an occasional single inference);
- we report the median (typical) and the min (best case, least disturbed by other processes)
  rather than the mean, which one hiccup can move; p90/p99 show the tail (p99 of 20 runs is
  about the slowest run: ask for more runs, or --seconds, before trusting it); throughput is
  1 / median inferences per second, times the batch size for items per second;
- `--seconds S` times each column for about S seconds instead of `--repeat` runs, still in
  interleaved rounds (S / rounds per column per round, at least one run each);
- every column is checked against the first one (max |diff|), so a fast wrong answer shows;
- PyTorch and onnxruntime get `--threads` threads (default 2), and so do NumPy's BLAS calls
  (through threadpoolctl): ratios are only fair at equal thread counts;
- per operator: on the CPU each layer is timed through `graph.forward(observer=...)`; on OpenCL
  the kernels are timed on the device from profiling events (`event.profile.start/end`), so the
  host's enqueue overhead is not counted there.

Output: `--json` prints one JSON document instead of the tables; `--trace FILE.json` writes one
profiled run per Kuiper backend as a Chrome trace (ui.perfetto.dev, chrome://tracing);
`--plot FILE.png` draws the per-operator times (needs matplotlib).

References and model code: `--against torch` (and torch-cuda) runs pnnx's `<stem>_pnnx.py`,
Python code from the model's folder, so ask for it only for a model you trust. `--against
onnxruntime` runs a plain `<stem>.onnx` beside the model; when there is none, it exports one
from `<stem>_pnnx.py` only if you add `--trust-model-code`. Nothing else runs code from there.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import logging
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from kuiper.core.errors import KuiperError, OpenCLUnavailableError
from kuiper.cli.jsonout import add_json_option, emit
from kuiper.cli.options import (
    add_pass_option,
    add_plugin_option,
    check_model_path,
    comma_list,
    load_plugins,
    passes_from,
    shape_list,
)
from kuiper.io.trace import spans_of

log = logging.getLogger("kuiper.tools")

# torch-cuda: fp32 with TF32 off everywhere (the like-for-like fp32 comparison);
# torch-cuda-default: PyTorch's defaults (cuDNN convolutions may use TF32 tensor cores).
REFERENCES = ("torch", "onnxruntime", "torch-cuda", "torch-cuda-default")
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

    @property
    def median(self) -> float:
        return statistics.median(self.runs)

    @property
    def best(self) -> float:
        return min(self.runs)

    def percentile(self, q: float) -> float:
        """The q-th percentile of the run times (linear interpolation between runs)."""
        return float(np.percentile(self.runs, q))


def add_parser(sub) -> None:
    p = sub.add_parser("bench", help="time a model per backend and per operator, against "
                       "PyTorch and onnxruntime", description=__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", help="path of the .pnnx.param")
    p.add_argument("--backends", type=comma_list(("cpu", "opencl"), "backend"),
                   default=["cpu", "opencl"], help="Kuiper backends to time (default: cpu,opencl)")
    p.add_argument("--against", type=comma_list(REFERENCES, "reference", allow_empty=True),
                   default=[], help="references: torch, torch-cuda[-default] (these RUN pnnx's "
                   "Python file <stem>_pnnx.py beside the model: only for models you trust) and/or "
                   "onnxruntime (a plain <stem>.onnx beside the model; without one, see "
                   "--trust-model-code)")
    p.add_argument("--trust-model-code", action="store_true",
                   help="with --against onnxruntime and no <stem>.onnx beside the model: export "
                   "one from <stem>_pnnx.py, which runs that Python file from the model's folder")
    p.add_argument("--repeat", type=int, default=20, help="timed runs (default: %(default)s)")
    p.add_argument("--seconds", type=float, metavar="S", help="time each column for about S "
                   "seconds instead of --repeat runs (still in interleaved rounds)")
    p.add_argument("--rounds", type=int, default=5, help="the timed runs are split into this "
                   "many interleaved rounds over the columns (default: %(default)s)")
    p.add_argument("--warmup", type=int, default=3, help="untimed runs first "
                   "(default: %(default)s)")
    p.add_argument("--threads", type=int, default=2, help="threads for PyTorch, onnxruntime "
                   "and NumPy's BLAS (default: %(default)s)")
    p.add_argument("--input-shape", type=shape_list, metavar="SHAPE",
                   help="input size, e.g. 1x3x224x224 (default: the exported one)")
    p.add_argument("--device", help="OpenCL device (see `kuiper devices`)")
    from kuiper.cli.main import add_memory_plan_option  # cli imports this module lazily

    add_memory_plan_option(p)
    p.add_argument("--top", type=int, default=15, help="operators listed in the profile "
                   "(default: %(default)s; 0 hides the profile)")
    add_json_option(p)
    p.add_argument("--trace", metavar="FILE.json", help="write one profiled run per Kuiper "
                   "backend as a Chrome trace (open it in https://ui.perfetto.dev)")
    p.add_argument("--plot", metavar="FILE.png", help="draw the per-operator times (needs "
                   "matplotlib: pip install matplotlib)")
    add_plugin_option(p)
    add_pass_option(p)
    p.set_defaults(func=run_command)


def run_command(args: argparse.Namespace) -> int:
    check_model_path(args.model)
    params = load_plugins(args)
    if args.repeat < 1 or args.warmup < 0 or args.threads < 1 or args.rounds < 1:
        raise KuiperError("--repeat, --rounds and --threads must be at least 1, --warmup at "
                          "least 0")
    if args.seconds is not None and not 0 < args.seconds < float("inf"):
        raise KuiperError(f"--seconds {args.seconds:g}: give a duration above 0, e.g. 5")
    # Output files are checked before minutes of timing, not after.
    if args.plot:
        from kuiper.bench.plot import require_matplotlib

        require_matplotlib(args.plot)
    if args.trace:
        from kuiper.io.trace import check_writable

        check_writable(args.trace)
    return benchmark(args.model, args.backends, args.against, args.repeat, args.warmup,
                     args.threads, args.input_shape, args.device, args.top, args.rounds, params,
                     trust_model_code=args.trust_model_code, seconds=args.seconds,
                     as_json=args.json, trace=args.trace, plot=args.plot,
                     memory=args.memory_plan, passes=passes_from(args))


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


def bench_kuiper(path: str, backend: str, inputs: list[np.ndarray], args: dict) -> Column:
    import kuiper

    # The timed runs use a plain queue: a profiling one stamps every kernel, which costs
    # several microseconds per launch on some drivers (NVIDIA's), as much as a small kernel.
    # The per-operator profile and the trace load a second graph on a profiling queue.
    options: dict = {}
    if backend == "opencl" and args["device"]:
        options["device"] = args["device"]
    if args.get("memory"):
        options["memory"] = args["memory"]
    runtime = None
    if backend == "opencl":  # the runtime the graph will share: its counter from here on
        from kuiper.opencl.device.runtime import OpenCLRuntime

        runtime = OpenCLRuntime.shared(args["device"], False, False)
        before = runtime.reset_peak()

    def load(**extra):
        return kuiper.load(path, backend=backend, input_shapes=[x.shape for x in inputs],
                           params=args["params"], passes=args.get("passes"), **options, **extra)

    graph = load()
    label = f"kuiper {backend}"
    if backend == "opencl":
        label += f" ({graph.executor.runtime.device.name.strip()})"
    column = Column(label)
    if graph.fallbacks:
        column.note = f"{len(graph.fallbacks)} operator(s) fall back to the CPU"
    column.outputs = graph.forward(*inputs)
    column.run = lambda: graph.forward(*inputs)
    column.memory = peak_memory(graph, runtime.peak_bytes - before if runtime else None)
    # on OpenCL, a second graph on a profiling queue, made once when the profile or the trace
    # asks for it
    profiled_graph = (functools.cache(lambda: load(profiling=True)) if backend == "opencl"
                      else lambda: graph)
    if args["top"] > 0 or args["plot"]:
        column.profiler = lambda: (opencl_profile(profiled_graph(), inputs) if backend == "opencl"
                                   else cpu_profile(graph, inputs))
    column.tracer = lambda: spans_of(profiled_graph(), inputs)
    return column


def peak_memory(graph, device_peak: int | None) -> str:
    """What `kuiper bench` says of memory. OpenCL: the runtime's counter of device buffers
    held at once (weights, activations, workspaces) during the build and a first run. CPU:
    the planned arena of the layers that write into it (kuiper/cpu/arena.py), not measured:
    NumPy's other temporaries come and go per forward."""
    from kuiper.memory.plan_memory import short_bytes
    from kuiper.memory.report import strategy_in_use

    strategy = strategy_in_use(graph.executor) or "naive"
    if device_peak is not None:
        return (f"peak device memory {short_bytes(device_peak)} (runtime counter; memory "
                f"plan: {strategy})")
    arena = getattr(graph.executor, "arena", None)
    held = short_bytes(arena.nbytes) if arena is not None else "none"
    return f"activation arena {held} (planned, {strategy}; other NumPy arrays not counted)"


def cpu_profile(graph, inputs: list[np.ndarray]) -> dict[str, float]:
    """Median wall time of each layer's forward() over a few runs (the observer hook).

    Under an observer every operator runs on its own, unfused (kuiper/cpu/executor.py): a fused
    ReLU shows up with its own (small) time here, while the timed runs above had none.
    """
    samples: dict[str, list[float]] = {}

    def observe(op, outputs, seconds):
        samples.setdefault(op.name, []).append(seconds)

    for _ in range(PROFILE_RUNS):
        graph.forward(*inputs, observer=observe)
    return {name: statistics.median(s) for name, s in samples.items()}


def opencl_profile(graph, inputs: list[np.ndarray]) -> dict[str, float]:
    """Median device time of each operator's kernels, from the profiling events of a few runs."""
    samples: dict[str, list[float]] = {}
    for _ in range(PROFILE_RUNS):
        graph.forward(*inputs)
        for op, events in graph.executor.operator_events():
            ns = sum(e.profile.end - e.profile.start for e in events)
            samples.setdefault(op.name, []).append(ns * 1e-9)
    return {name: statistics.median(s) for name, s in samples.items()}


def bench_torch(path: str, inputs: list[np.ndarray], args: dict) -> Column:
    import torch

    from kuiper.bench.reference import load_torch_reference, run_torch_reference

    torch.set_num_threads(args["threads"])
    model = load_torch_reference(path, args["params"])
    column = Column(f"torch {torch.__version__} ({threads_label(args['threads'])})")
    column.outputs = run_torch_reference(model, inputs)
    tensors = [torch.from_numpy(x) for x in inputs]

    def run():
        with torch.inference_mode():
            model(*tensors)

    column.run = run
    return column


def bench_torch_cuda(path: str, inputs: list[np.ndarray], args: dict,
                     tf32: bool | None = None) -> Column:
    """PyTorch eager on the GPU; `tf32=False` forces true fp32, None keeps PyTorch's defaults.

    Each timed run is what Kuiper's is: from the host arrays in to the host arrays out (the
    inputs copied to the GPU, the outputs back, which also waits for the GPU). Timing only the
    model on tensors already on the GPU would leave out copies Kuiper's time includes: for
    YOLOv5s at 640 they are several milliseconds, more than the kernels."""
    import torch

    from kuiper.bench.reference import load_torch_reference

    if not torch.cuda.is_available():
        raise KuiperError("PyTorch sees no CUDA device")
    if tf32 is not None:
        torch.backends.cuda.matmul.allow_tf32 = tf32
        torch.backends.cudnn.allow_tf32 = tf32
    mode = "fp32, TF32 off" if tf32 is False else "defaults"
    model = load_torch_reference(path, args["params"]).cuda()
    column = Column(f"torch {torch.__version__} cuda ({mode})")
    with torch.inference_mode():
        out = model(*[torch.from_numpy(x).cuda() for x in inputs])
    outs = out if isinstance(out, (tuple, list)) else (out,)
    column.outputs = [o.float().cpu().numpy() for o in outs if isinstance(o, torch.Tensor)]

    def run():
        with torch.inference_mode():
            out = model(*[torch.from_numpy(x).cuda() for x in inputs])
            for o in out if isinstance(out, (tuple, list)) else (out,):
                if isinstance(o, torch.Tensor):
                    o.cpu()
        torch.cuda.synchronize()

    column.run = run
    return column


def plain_onnx_path(param_path: str) -> Path:
    """`model.onnx` beside `model.pnnx.param`: there when the model came through ONNX.

    (pnnx's own `model.pnnx.onnx` is pnnx's graph in an ONNX container, with pnnx operator
    types and no opset: onnxruntime cannot run it.)
    """
    p = Path(param_path)
    stem = p.name.split(".pnnx.")[0] if ".pnnx." in p.name else p.stem
    return p.with_name(stem + ".onnx")


def export_onnx(param_path: str, inputs: list[np.ndarray], folder: str, params=None) -> Path:
    """No plain .onnx beside the model: export one from pnnx's PyTorch module (needs torch)."""
    import warnings

    import torch

    from kuiper.bench.reference import load_torch_reference

    model = load_torch_reference(param_path, params)
    path = Path(folder) / "model.onnx"
    with torch.no_grad(), warnings.catch_warnings(), contextlib.redirect_stdout(None):
        warnings.simplefilter("ignore")  # the TorchScript exporter's deprecation notices
        torch.onnx.export(model, tuple(torch.from_numpy(x) for x in inputs), str(path),
                          dynamo=False)
    return path


def bench_onnxruntime(path: str, inputs: list[np.ndarray], args: dict) -> Column:
    import tempfile

    import onnxruntime as ort

    from kuiper.bench.reference import torch_module_path

    with tempfile.TemporaryDirectory(prefix="kuiper-bench-") as folder:
        model = plain_onnx_path(path)
        source = model.name
        if not model.is_file():
            if not args["trust_model_code"]:
                # The export would run <stem>_pnnx.py: Python code from the model's folder.
                raise KuiperError(f"no {model.name} beside the model; to export one from "
                                  f"{torch_module_path(path).name} (which runs that Python "
                                  "file) add --trust-model-code")
            try:
                model = export_onnx(path, inputs, folder, args["params"])
            except ImportError:
                raise KuiperError(f"no {model.name} beside the model, and exporting one from "
                                  "pnnx's PyTorch module needs torch (pip install "
                                  "torch==2.13.0)") from None
            source = f"exported from {Path(path).name.split('.pnnx.')[0]}_pnnx.py"
        options = ort.SessionOptions()
        options.intra_op_num_threads = args["threads"]
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        session = ort.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])
    feed = {i.name: x for i, x in zip(session.get_inputs(), inputs)}
    column = Column(f"onnxruntime {ort.__version__} ({threads_label(args['threads'])}, "
                    f"{source})")
    column.outputs = session.run(None, feed)
    column.run = lambda: session.run(None, feed)
    return column


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


def progress_bar():
    """A rich progress bar on stderr when it is a terminal; a silent stand-in otherwise."""
    try:
        from rich.console import Console
        from rich.progress import Progress
    except ImportError:
        return None
    console = Console(stderr=True)
    if not console.is_terminal:
        return None
    return Progress(console=console, transient=True)


def benchmark(path: str, backends: list[str], against: list[str], repeat: int, warmup: int,
              threads: int, input_shapes=None, device: str | None = None, top: int = 15,
              rounds: int = 5, params=None, trust_model_code: bool = False,
              seconds: float | None = None, as_json: bool = False, trace: str | None = None,
              plot: str | None = None, memory: str | None = None, passes=None) -> int:
    import kuiper
    from kuiper.graph.summary import human, operator_rows
    from kuiper.io.inputs import random_inputs

    probe = kuiper.load(path, input_shapes=input_shapes, params=params)  # fails early if bad
    inputs = random_inputs(probe.inputs)
    flops = sum(r["flops"] for r in operator_rows(probe))
    say = print if not as_json else (lambda *_a, **_k: None)  # --json: the document only
    say(f"model: {path}")
    say("input: " + ", ".join(f"{'x'.join(map(str, x.shape))} {x.dtype}" for x in inputs)
        + f"; {human(flops)} FLOPs per inference")
    say(f"machine: {machine_line()}")
    busy = busy_warning()
    if busy:
        log.warning(busy.removeprefix("warning: "))
    how_many = (f"about {seconds:g} s of timed runs" if seconds is not None
                else f"{repeat} timed run(s)")
    say(f"{warmup} warm-up run(s), then {how_many} per column, interleaved in "
        f"{rounds if seconds is not None else min(rounds, repeat)} round(s)\n")

    args = {"warmup": warmup, "repeat": repeat, "threads": threads, "device": device, "top": top,
            "params": params, "trust_model_code": trust_model_code, "plot": plot,
            "memory": memory, "passes": passes}
    jobs: list[tuple[str, Callable]] = []
    for b in backends:
        jobs.append((f"kuiper {b}", lambda b=b: bench_kuiper(path, b, inputs, args)))
    runners = {"torch": bench_torch, "onnxruntime": bench_onnxruntime,
               "torch-cuda": lambda *a: bench_torch_cuda(*a, tf32=False),
               "torch-cuda-default": lambda *a: bench_torch_cuda(*a, tf32=None)}
    for ref in against:
        jobs.append((ref, lambda ref=ref: runners[ref](path, inputs, args)))

    columns: list[Column] = []
    skipped: list[str] = []
    bar = progress_bar()
    with bar if bar is not None else contextlib.nullcontext(), blas_threads(threads):
        for name, job in jobs:  # load every model first: a failure shows before any timing
            try:
                columns.append(job())
            except OpenCLUnavailableError as e:
                skipped.append(f"{name}: skipped, {e}")
            except Exception as e:
                if name.startswith("kuiper"):
                    raise
                skipped.append(f"{name}: skipped, {why(e)}")
        total = warmup + repeat if seconds is None else None  # None: rich shows no end
        tasks = {id(c): bar.add_task(c.label, total=total) if bar is not None
                 else None for c in columns}
        time_columns(columns, warmup, repeat, rounds,
                     lambda c: bar.advance(tasks[id(c)]) if bar is not None else None,
                     seconds)
        for column in columns:
            if column.profiler is not None:
                column.profile = column.profiler()
        traced = [(c.label, c.tracer()) for c in columns if trace and c.tracer is not None]
    batch = inputs[0].shape[0] if inputs and inputs[0].ndim else 1
    outputs_written = write_files(columns, probe, trace, traced, plot, top)
    if as_json:
        emit(bench_document(path, inputs, flops, columns, skipped, probe, batch, warmup,
                            rounds, outputs_written))
        return 0
    report(columns, skipped, probe, top, batch)
    for line in outputs_written:
        print(line)
    return 0


def write_files(columns: list[Column], probe, trace, traced, plot, top: int) -> list[str]:
    """--trace and --plot; returns what was written, one line each."""
    lines = []
    if trace:
        from kuiper.io.trace import write_trace

        count = write_trace(trace, traced)
        lines.append(f"trace: {count} operator events in {trace} (open in "
                     "https://ui.perfetto.dev)")
    if plot:
        from kuiper.bench.plot import plot_profile

        profiled = {c.label.split(" (")[0]: c.profile for c in columns if c.profile}
        if profiled:
            plot_profile(plot, profiled, {op.name: op.type for op in probe.order},
                         max(top, 1))
            lines.append(f"plot: {plot}")
    return lines


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


def bench_document(path, inputs, flops, columns, skipped, probe, batch, warmup, rounds,
                   written) -> dict:
    """`kuiper bench --json`."""
    from kuiper.testing import max_abs_diff

    first = columns[0] if columns else None
    types = {op.name: op.type for op in probe.order}
    return {
        "model": path, "machine": machine_line(), "batch": batch, "flops": flops,
        "inputs": [{"shape": list(x.shape), "dtype": x.dtype.name} for x in inputs],
        "warmup": warmup, "rounds": rounds, "skipped": skipped, "files": written,
        "columns": [{"label": c.label, "note": c.note, "memory": c.memory,
                     **summary_numbers(c, batch),
                     "runs_ms": [t * 1e3 for t in c.runs],
                     "max_abs_diff": max((max_abs_diff(a, b) for a, b in
                                          zip(c.outputs, first.outputs)), default=0.0),
                     "profile_ms": [{"operator": name, "type": types.get(name, "?"),
                                     "ms": seconds * 1e3} for name, seconds in
                                    sorted(c.profile.items(), key=lambda kv: -kv[1])]}
                    for c in columns]}


def why(error: Exception) -> str:
    if isinstance(error, ImportError):
        module = error.name or str(error)
        hint = "pip install torch==2.13.0" if module == "torch" else f"pip install {module}"
        return f"{module} is not installed ({hint})"
    if isinstance(error, KuiperError):
        return str(error)
    return f"it failed: {type(error).__name__}: {error}"


def report(columns: list[Column], skipped: list[str], probe, top: int, batch: int = 1) -> None:
    from kuiper.core.table import print_table
    from kuiper.testing import max_abs_diff

    for line in skipped:
        print(line)
    if not columns:
        print("nothing was measured")
        return
    ref = next((c for c in columns if c.label.startswith("torch")), columns[0])
    first = columns[0]
    rows = [("", "median ms", "min ms", "p90 ms", "p99 ms", "inf/s", "items/s",
             f"vs {ref.label.split()[0]}", "max |diff|", "")]
    for c in columns:
        diffs = [max_abs_diff(a, b) for a, b in zip(c.outputs, first.outputs)]
        n = summary_numbers(c, batch)
        rows.append((c.label, f"{c.median * 1e3:.3f}", f"{c.best * 1e3:.3f}",
                     f"{n['p90_ms']:.3f}", f"{n['p99_ms']:.3f}",
                     f"{n['inferences_per_s']:.4g}", f"{n['items_per_s']:.4g}",
                     f"{c.median / ref.median:.2f}x", f"{max(diffs, default=0.0):.2g}", c.note))
    print_table(rows)
    for c in columns:
        if c.memory:
            print(f"memory of {c.label.split(' (')[0]}: {c.memory}")
    idle = [c for c in columns if c.after_idle]
    if idle:
        print(f"first run after each pause, median of {len(idle[0].after_idle)} (not in the "
              "runs above): " + ", ".join(f"{c.label.split(' (')[0]} "
                                          f"{statistics.median(c.after_idle) * 1e3:.3f} ms"
                                          for c in idle))
    print(f"\n'vs {ref.label.split()[0]}' = median / median of {ref.label.split()[0]} "
          "(below 1: faster); max |diff| is against the first row's outputs; median = p50; "
          f"inf/s = 1 / median, items/s = batch ({batch}) / median; runs per column: "
          + ", ".join(str(len(c.runs)) for c in columns))

    profiled = [c for c in columns if c.profile]
    if top <= 0 or not profiled:
        return
    ops = {op.name: op for op in probe.order}
    key = profiled[0].profile
    names = sorted(key, key=lambda n: -key[n])
    total = {c.label: sum(c.profile.values()) for c in profiled}
    print(f"\nper-operator time (ms), top {min(top, len(names))} of {len(names)} by "
          f"{profiled[0].label}; cpu: layer wall time, every operator run on its own (no ReLU "
          "fusion); opencl: kernel time on the device")
    rows = [("operator", "type") + tuple(c.label.split(" (")[0] for c in profiled) + ("share",)]
    for name in names[:top]:
        op_type = ops[name].type if name in ops else "?"
        rows.append((name, op_type) + tuple(f"{c.profile.get(name, 0.0) * 1e3:.3f}"
                                            for c in profiled)
                    + (f"{key[name] / total[profiled[0].label]:.0%}"
                       if total[profiled[0].label] else "-",))
    rest = names[top:]
    if rest:
        rows.append((f"({len(rest)} more)", "") + tuple(
            f"{sum(c.profile.get(n, 0.0) for n in rest) * 1e3:.3f}" for c in profiled) + ("",))
    rows.append(("total", "") + tuple(f"{total[c.label] * 1e3:.3f}" for c in profiled) + ("",))
    print_table(rows)
    fallbacks = [c for c in profiled if c.note and c.label.startswith("kuiper opencl")]
    if fallbacks:
        print("(OpenCL operators that fall back to the CPU show only their copy time)")
    sys.stdout.flush()


def threads_label(n: int) -> str:
    return f"{n} thread" + ("s" if n != 1 else "")
