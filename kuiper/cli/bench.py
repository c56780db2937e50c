"""`kuiper bench MODEL`: the command line of kuiper/bench/ (whose docstring, printed by
`kuiper bench -h`, is the method)."""

from __future__ import annotations

import argparse

import kuiper.bench
from kuiper.bench.benchmark import benchmark
from kuiper.bench.timing import REFERENCES
from kuiper.cli.options import (
    add_memory_plan_option,
    add_pass_option,
    add_plugin_option,
    add_precision_option,
    check_model_path,
    comma_list,
    load_plugins,
    passes_from,
    shape_list,
)
from kuiper.core.errors import KuiperError
from kuiper.io.jsonout import add_json_option


def add_parser(sub) -> None:
    p = sub.add_parser("bench", help="time a model per backend and per operator, against "
                       "PyTorch and onnxruntime", description=kuiper.bench.__doc__,
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
    add_precision_option(p)
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
                     memory=args.memory_plan, passes=passes_from(args),
                     precision=getattr(args, "precision", "fp32"))
