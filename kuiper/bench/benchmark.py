"""`benchmark`: every column loaded, warmed up and timed in interleaved rounds, then the
results table and the per-operator profile (or one JSON document)."""

from __future__ import annotations

import contextlib
import logging
import statistics
import sys
import time
from collections.abc import Callable

from kuiper.bench.columns import (
    bench_kuiper,
    bench_kuiper_device,
    bench_onnxruntime,
    bench_torch,
    bench_torch_cuda,
    why,
)
from kuiper.bench.kinds import kinds_table, kuiper_kinds
from kuiper.bench.timing import (
    SETTLE_SECONDS,
    Column,
    blas_threads,
    busy_warning,
    machine_line,
    summary_numbers,
    time_columns,
)
from kuiper.core.errors import OpenCLUnavailableError
from kuiper.io.jsonout import emit
from kuiper.io.progress import progress_bar

log = logging.getLogger("kuiper.bench")


def benchmark(path: str, backends: list[str], against: list[str], repeat: int, warmup: int,
              threads: int, input_shapes=None, device: str | None = None, top: int = 15,
              rounds: int = 5, params=None, trust_model_code: bool = False,
              seconds: float | None = None, as_json: bool = False, trace: str | None = None,
              plot: str | None = None, memory: str | None = None, passes=None,
              precision: str = "fp32") -> int:
    from kuiper.graph.load import load
    from kuiper.graph.summary import human, operator_rows
    from kuiper.io.inputs import random_inputs

    probe = load(path, input_shapes=input_shapes, params=params)  # fails early if bad
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
            "memory": memory, "passes": passes, "precision": precision}
    jobs: list[tuple[str, Callable]] = []
    for b in backends:
        jobs.append((f"kuiper {b}", lambda b=b: bench_kuiper(path, b, inputs, args)))
        if b == "opencl":   # and with its data on the device, like PyTorch's GPU tensors
            jobs.append(("kuiper opencl, device I/O",
                         lambda: bench_kuiper_device(path, inputs, args)))
    runners = {"torch": bench_torch, "onnxruntime": bench_onnxruntime,
               "torch-cuda": lambda *a: bench_torch_cuda(*a, tf32=False),
               "torch-cuda-default": lambda *a: bench_torch_cuda(*a, tf32=None),
               "torch-cuda-device": lambda *a: bench_torch_cuda(*a, tf32=False, resident=True),
               "torch-compile": lambda *a: bench_torch_cuda(*a, tf32=False, resident=True,
                                                            compiled=True),
               "torch-compile-tf32": lambda *a: bench_torch_cuda(*a, tf32=True, resident=True,
                                                                 compiled=True),
               "torch-compile-fp16": lambda *a: bench_torch_cuda(*a, resident=True,
                                                                 compiled=True, half=True)}
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
        operators = {op.name: op for op in probe.order}
        for column in columns:
            if column.profiler is None and column.kind_profiler is None:
                continue
            # each profile after the same pause as each timed block: the last timed block's
            # framework (PyTorch's OpenMP threads, OpenBLAS's) may otherwise still spin
            time.sleep(SETTLE_SECONDS)
            if column.profiler is not None:
                column.profile = column.profiler()
                column.kinds = kuiper_kinds(column.profile, operators, probe.specs)
            if column.gap_profiler is not None:   # from the same profiled runs
                column.gaps = column.gap_profiler()
            if column.kind_profiler is not None:   # onnxruntime's own profile
                column.kinds = column.kind_profiler()
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
                                    sorted(c.profile.items(), key=lambda kv: -kv[1])],
                     "kinds_ms": {kind: seconds * 1e3 for kind, seconds in c.kinds.items()},
                     "launch_gaps": c.gaps}
                    for c in columns]}


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
    for c in columns:
        if c.gaps:
            idle = c.gaps["span_ms"] - c.gaps["busy_ms"]
            print(f"launches of {c.label.split(' (')[0]}: {c.gaps['launches']:.0f} kernels per "
                  f"inference, {c.gaps['busy_ms']:.3f} ms of kernel time in "
                  f"{c.gaps['span_ms']:.3f} ms from the first start to the last end: "
                  f"{idle:.3f} ms ({idle / c.gaps['span_ms']:.0%}) between kernels, median gap "
                  f"{c.gaps['median_gap_us']:.1f} us")
    by_kind = kinds_table(columns)
    if by_kind is not None and len(by_kind[0]) > 2:   # two columns at least: a comparison
        print("\ntime by kind of operator (ms per inference; onnxruntime: its own profile, "
              "each node's median; a fused activation counts in its producer)")
        print_table(by_kind)
    sys.stdout.flush()
