"""`kuiper compare MODEL`: where, and by how much, backends (and PyTorch) disagree, operator by
operator (the engine is kuiper/bench/compare.py, whose docstring says how)."""

from __future__ import annotations

import argparse

import kuiper.bench.compare
from kuiper.bench.compare import compare
from kuiper.cli.options import (
    add_pass_option,
    add_plugin_option,
    add_precision_option,
    check_model_path,
    comma_list,
    load_plugins,
    passes_from,
)
from kuiper.core.errors import InputError
from kuiper.graph.load import load
from kuiper.io.inputs import load_input
from kuiper.io.jsonout import add_json_option
from kuiper.testing import RTOL


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("compare", help="per-operator differences between backends and PyTorch",
                       description=kuiper.bench.compare.__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", help="path of the .pnnx.param")
    p.add_argument("--input", action="append", metavar="FILE",
                   help=".npy array or image, as for `kuiper run` (repeat for several inputs); "
                   "default: seeded random inputs of the model's input shapes")
    p.add_argument("--backends", type=comma_list(("cpu", "opencl"), "backend"),
                   default=["cpu", "opencl"], help="comma list; the first is the reference "
                   "(default cpu,opencl)")
    p.add_argument("--against", type=comma_list(("torch",), "reference", allow_empty=True),
                   default=[], help="'torch' to also compare with pnnx's PyTorch module: this "
                   "RUNS the Python file <stem>_pnnx.py beside the model (only for models you "
                   "trust)")
    p.add_argument("--device", help="OpenCL device (as PYOPENCL_CTX, or part of its name)")
    p.add_argument("--rtol", type=tolerance_factor, default=RTOL,
                   help="tolerance factor (default %(default)g)")
    add_precision_option(p)
    add_json_option(p)
    add_plugin_option(p)
    add_pass_option(p)
    p.set_defaults(func=run_command)


def tolerance_factor(text: str) -> float:
    """argparse type for --rtol: a number >= 0 (NaN would make every comparison fail)."""
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"'{text}': expected a finite number >= 0, e.g. 1e-4")
    return value


def run_command(args: argparse.Namespace) -> int:
    check_model_path(args.model)
    params = load_plugins(args)
    x = None
    if args.input:
        ports = load(args.model, params=params).inputs
        if len(args.input) != len(ports):
            raise InputError(f"the model has {len(ports)} input(s) "
                                    f"({', '.join(str(p) for p in ports)}), got "
                                    f"{len(args.input)} --input file(s)")
        x = [load_input(path, port) for path, port in zip(args.input, ports)]
    return compare(args.model, args.backends, args.against, x, args.device, args.rtol, params,
                   as_json=args.json, passes=passes_from(args),
                   precision=getattr(args, "precision", "fp32"))
