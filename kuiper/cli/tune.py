"""`kuiper tune MODEL`: time every kernel candidate of each convolution, transposed convolution
and linear layer on the device, and keep the winners in the tuning cache, which later loads use
automatically.

For each distinct problem of the model (a convolution's ConvProblem, the GEMM shape of a linear
layer or of a transposed convolution, at the --precision the model will be loaded with: the
tensor-core kernels compete under tf32 / fp16, and the winners are kept per precision), every
algorithm that can run it
(layers/opencl_conv/selector.py) is bound with each of its parameter sets, on a fresh
copy of the layer with its own buffers, and timed: one warm-up run (the kernels are compiled
at bind time, before it), then `--runs` timed runs, each measured on the device from OpenCL
profiling events (first kernel's start to last kernel's end), so host overheads do not count;
the median decides. The winners go to the
tuning cache (kuiper/opencl/device/tuning_cache.py: keyed by device name, driver version and shape).

Each winner is written to the cache as soon as its problem is timed, so a tune that is stopped
(Ctrl-C, `--budget SECONDS`, a time limit) keeps what it measured: the problem being timed
keeps the fastest of the candidates timed so far, marked partial. A tune goes on where the
last one stopped: the problems the cache holds complete for this device are skipped (`--fresh`
times everything again). On a terminal a progress bar counts the candidates; elsewhere (a log
file, CI) one line per problem says how far it got.

A transposed convolution is timed as its layer runs, GEMM and col2im (the same col2im for every
candidate); its GFLOP/s count the GEMM's FLOPs.

The final table shows, per problem, the winner, its time and GFLOP/s, and how much faster it
is than what the cost model would have chosen (1.00x: the cost model was right).
`kuiper info MODEL --backend opencl` then shows each convolution's algorithm and why.
"""

from __future__ import annotations

import argparse
import contextlib
import logging

from kuiper.cli.options import (
    add_plugin_option,
    add_precision_option,
    check_model_path,
    load_plugins,
    shape_list,
)
from kuiper.core.errors import KuiperError
from kuiper.core.table import format_table
from kuiper.io.jsonout import add_json_option, emit
from kuiper.io.progress import progress_bar

log = logging.getLogger("kuiper.tools")


def add_parser(sub) -> None:
    p = sub.add_parser("tune", help="time the convolution and GEMM kernels of a model on the "
                       "device and keep the fastest (a cache later loads use)", description=__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", help="path of the .pnnx.param (the .pnnx.bin is found beside it)")
    p.add_argument("--backend", choices=("opencl",), default="opencl",
                   help="only OpenCL has kernels to tune (default: %(default)s)")
    p.add_argument("--device", help="OpenCL device: 'P:D' as in PYOPENCL_CTX, or part of its "
                   "name (see `kuiper devices`)")
    p.add_argument("--input-shape", type=shape_list, metavar="SHAPE",
                   help="tune for another input size, e.g. 32x3x224x224 (a batch size is part "
                   "of each layer's shape)")
    p.add_argument("--runs", type=int, default=5, help="timed runs per candidate, after one "
                   "warm-up (default: %(default)s; the median counts)")
    again = p.add_mutually_exclusive_group()
    again.add_argument("--resume", action="store_true", help="skip the problems the tuning "
                       "cache already holds for this device: go on where the last tune stopped "
                       "(the default)")
    again.add_argument("--fresh", action="store_true", help="time every problem again, even "
                       "those the cache holds")
    p.add_argument("--budget", type=float, metavar="SECONDS", help="start no new candidate "
                   "after this many seconds; what was measured is kept (run again to go on)")
    add_precision_option(p)
    add_plugin_option(p)
    add_json_option(p)
    p.set_defaults(func=run_command)


def run_command(args: argparse.Namespace) -> int:
    from kuiper.graph.load import load
    from kuiper.opencl.device import tuning_cache
    from kuiper.opencl.execution.tuner import tune_graph

    check_model_path(args.model)
    if args.runs < 1:
        raise KuiperError(f"--runs {args.runs}: give at least 1 timed run")
    budget = getattr(args, "budget", None)
    if budget is not None and not budget > 0:  # (also NaN)
        raise KuiperError(f"--budget {budget}: give a number of seconds above 0")
    options = {"device": args.device} if args.device else {}
    graph = load(args.model, backend="opencl", input_shapes=args.input_shape,
                 params=load_plugins(args), precision=getattr(args, "precision", "fp32"), **options)
    device = graph.executor.runtime.device

    def keep(problem) -> None:  # each winner at once: an interrupted tune keeps it
        best = problem.best
        if best is not None:
            entry = {"algorithm": best.algorithm, "params": best.params,
                     "seconds": best.seconds}
            if problem.partial:
                entry["partial"] = True
            tuning_cache.store(device, {problem.key: entry})

    def complete(key: str) -> bool:  # a partial winner is timed again, in full
        entry = tuning_cache.lookup(device, key)
        return entry is not None and not entry.get("partial")

    bar = progress_bar()
    with bar if bar is not None else contextlib.nullcontext():
        task = bar.add_task("tuning", total=None) if bar is not None else None

        def advance(done: int, total: int) -> None:
            if bar is not None:
                bar.update(task, completed=done, total=total)

        problems = tune_graph(graph, runs=args.runs, on_tuned=keep,
                              skip=None if getattr(args, "fresh", False) else complete,
                              budget=budget, on_candidate=advance)
    path = tuning_cache.cache_path()
    log.info("%d winners written to the tuning cache %s",
             sum(p.best is not None for p in problems), path)
    if args.json:
        emit({"model": graph.param_path, "device": tuning_cache.device_key(device),
              "cache": str(path), "problems": [problem_dict(p) for p in problems]})
        return 0
    if problems:
        print(format_table(result_rows(problems), right=(4, 5, 6)))
    else:   # only the convolutions and matrix products have kernels to choose between
        print("nothing to tune: the model has no convolution or matrix product that computes "
              "a value (a batch of 0 computes none)")
    print(f"tuning cache: {path} ({tuning_cache.device_key(device)})")
    return 0


def result_rows(problems) -> list[tuple]:
    from kuiper.opencl.execution.tuner import params_text

    rows = [("layer", "kind", "algorithm", "params", "time ms", "GFLOP/s", "vs cost model")]
    for p in problems:
        name = p.layers[0] + (f" (+{len(p.layers) - 1})" if len(p.layers) > 1 else "")
        best = p.best
        if best is None:
            timed = any(c.seconds is not None or c.error for c in p.candidates)
            rows.append((name, p.kind, "all failed" if timed else "not timed (budget)", "-",
                         "-", "-", "-"))
            continue
        chosen = p.time_of(p.model_choice)
        speedup = f"{chosen / best.seconds:.2f}x" if chosen else "-"
        algorithm = best.algorithm + (" (partial)" if p.partial else "")
        rows.append((name, p.kind, algorithm, params_text(best.params),
                     f"{best.seconds * 1e3:.3f}", f"{p.flops / best.seconds / 1e9:.1f}",
                     speedup))
    return rows


def problem_dict(p) -> dict:
    best = p.best
    return {"key": p.key, "kind": p.kind, "layers": p.layers, "flops": p.flops,
            "partial": p.partial,
            "best": None if best is None else {"algorithm": best.algorithm,
                                               "params": best.params, "seconds": best.seconds},
            "cost_model": None if p.model_choice is None else
            {"algorithm": p.model_choice[0], "params": p.model_choice[1],
             "seconds": p.time_of(p.model_choice)},
            "candidates": [{"algorithm": c.algorithm, "params": c.params,
                            "seconds": c.seconds, "error": c.error} for c in p.candidates]}


