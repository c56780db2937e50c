"""Command-line options that several commands share (info, run, ops, bench, compare, tune ...),
loading a model from them, and the argument parser class every `kuiper` command uses."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from kuiper.core import plugins
from kuiper.core.errors import KuiperError
from kuiper.io.inputs import parse_shapes
from kuiper.parser.values import parse_value


class KuiperArgumentParser(argparse.ArgumentParser):
    """argparse, with two changes that every subcommand inherits (argparse builds subparsers
    with the class of their parent):

    - no abbreviations: by default argparse takes `--input` as short for `--input-shape` when
      a command has only the latter, and then complains about the *shape*. A mistyped option
      should be reported as unknown, naming what was typed;
    - a usage error ends with one `kuiper: error: ...` line, as every other error does, and
      still exits with status 2.
    """

    def __init__(self, *args, **kwargs):
        kwargs["allow_abbrev"] = False
        super().__init__(*args, **kwargs)

    def error(self, message: str):
        self.print_usage(sys.stderr)
        command = self.prog.partition(" ")[2]  # "kuiper run" -> "run"
        where = f"{command}: " if command else ""
        self.exit(2, f"kuiper: error: {where}{message} (`{self.prog} -h` lists the options)\n")


def comma_list(allowed: tuple[str, ...], what: str = "name",
               allow_empty: bool = False) -> Callable[[str], list[str]]:
    """argparse type: 'a,b' -> ['a', 'b'], each one of `allowed` (else a usage error); an empty
    list is a usage error too unless `allow_empty` (`--backends ""` would run nothing)."""
    def parse(text: str) -> list[str]:
        items = [t.strip() for t in text.split(",") if t.strip()]
        unknown = [t for t in items if t not in allowed]
        if unknown:
            raise argparse.ArgumentTypeError(f"unknown {what} {', '.join(unknown)} (choose "
                                             f"from {', '.join(allowed)})")
        if not items and not allow_empty:
            raise argparse.ArgumentTypeError(f"'{text}' names no {what}: give one or more of "
                                             f"{', '.join(allowed)}, comma-separated")
        return items
    return parse


def shape_list(text: str) -> list[tuple[int, ...]]:
    """argparse type for --input-shape: '1x3x224x224', or several joined by ','."""
    try:
        return parse_shapes(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


# Files people pass as "the model" that Kuiper cannot read, and what to do instead.
PNNX_HINT = ("Kuiper loads PNNX models (model.pnnx.param + model.pnnx.bin): convert this one with "
             "pnnx, e.g. `pnnx model.pt inputshape=[1,3,224,224]` (parser/PNNX_FORMAT.md)")
FOREIGN_MODEL_SUFFIXES = (".onnx", ".pt", ".pth", ".torchscript", ".ptl", ".pb", ".tflite",
                          ".h5", ".keras", ".safetensors", ".ncnn.param")


def check_model_path(path: str) -> None:
    """Catch the two commonest wrong files before the loader reads them: the weights (.bin)
    instead of the .param, and a model in another framework's format. Everything else (a
    missing file, a folder, a damaged file) the loader reports itself."""
    name = Path(path).name.lower()
    if name.endswith(".bin"):
        stem = Path(path).name[: -len(".bin")]
        raise KuiperError(f"{path}: this is the weight file; give the model's {stem}.param "
                          "instead (the .bin beside it is found by itself)")
    if name.endswith(FOREIGN_MODEL_SUFFIXES):
        raise KuiperError(f"{path}: not a PNNX model. {PNNX_HINT}")


def add_plugin_option(p: argparse.ArgumentParser) -> None:
    """--plugin and --param: what `kuiper.load(..., plugins=[...], params={...})` takes."""
    p.add_argument("--plugin", action="append", default=[], metavar="MODULE_OR_PATH",
                   help="load layers of your own from a module or a .py file (repeatable); "
                   "installed plugins load by themselves (kuiper/PLUGINS.md)")
    p.add_argument("--param", action="append", default=[], metavar="TYPE:KEY=VALUE",
                   type=type_param, help="a parameter the file does not carry, for every "
                   "operator of TYPE, e.g. mymods.Swish2:beta=1.5 (repeatable)")


def add_pass_option(p: argparse.ArgumentParser) -> None:
    """--no-pass NAME: leave a graph pass out (kuiper/passes/), repeatable or comma-separated."""
    from kuiper.graph.pipeline import PASS_NAMES

    p.add_argument("--no-pass", action="append", default=[], metavar="NAME",
                   type=comma_list(PASS_NAMES, "pass"),
                   help="leave out a graph pass (repeatable, or comma-separated): "
                   f"{', '.join(PASS_NAMES)}")


def passes_from(args: argparse.Namespace) -> list[str] | None:
    """kuiper.load's `passes` for --no-pass: None (all) when none is left out."""
    from kuiper.graph.pipeline import PASS_NAMES

    dropped = {name for names in getattr(args, "no_pass", ()) for name in names}
    return None if not dropped else [n for n in PASS_NAMES if n not in dropped]


def type_param(text: str) -> tuple[str, str, object]:
    """argparse type for --param: 'mymods.Swish2:beta=1.5' -> ('mymods.Swish2', 'beta', 1.5).

    The value is read like a value in a .pnnx.param file (1.5, 3, (1,2), True, a word).
    """
    head, equals, value = text.partition("=")  # the value may hold ':' too
    op_type, colon, key = head.rpartition(":")  # the type may too (prim::...)
    if not colon or not op_type or not equals or not key:
        raise argparse.ArgumentTypeError(f"'{text}': expected TYPE:KEY=VALUE, e.g. "
                                         "mymods.Swish2:beta=1.5")
    return op_type, key, parse_value(value)


def load_plugins(args: argparse.Namespace) -> dict[str, dict[str, object]]:
    """Load the --plugin plugins (and the installed ones) before any model is loaded; return
    the --param values as kuiper.load's `params`."""
    plugins.load_all(getattr(args, "plugin", ()))
    params: dict[str, dict[str, object]] = {}
    for op_type, key, value in getattr(args, "param", ()):
        params.setdefault(op_type, {})[key] = value
    return params


# --- a model, as the model commands take it ---------------------------------------------------
BACKEND_CHOICES = ("cpu", "opencl")


def add_model_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", help="path of the .pnnx.param (the .pnnx.bin is found beside it)")
    p.add_argument("--backend", choices=BACKEND_CHOICES, default="cpu",
                   help="where to run (default: %(default)s)")
    p.add_argument("--device", help="OpenCL device: 'P:D' as in PYOPENCL_CTX, or part of its "
                   "name (see `kuiper devices`)")
    p.add_argument("--input-shape", type=shape_list, metavar="SHAPE",
                   help="run at another input size, e.g. 4x3x160x160 (several inputs: "
                   "comma-separated)")
    add_precision_option(p)
    add_memory_plan_option(p)
    add_plugin_option(p)
    add_pass_option(p)


def add_precision_option(p: argparse.ArgumentParser) -> None:
    """--precision: what `kuiper.load(..., precision=...)` takes (kuiper/core/precision.py)."""
    from kuiper.core.precision import PRECISIONS

    p.add_argument("--precision", choices=PRECISIONS, default="fp32",
                   help="where GEMM-based layers compute: fp32 (exact, the default), tf32 or "
                   "fp16 (tensor cores on an OpenCL device that has them, sums in fp32; fp16 "
                   "also stores their weights as half; softmax, norms and the rest stay fp32; "
                   "the cpu backend computes fp32)")


def add_memory_plan_option(p: argparse.ArgumentParser) -> None:
    from kuiper.memory import DEFAULT_STRATEGY, STRATEGIES

    p.add_argument("--memory-plan", choices=STRATEGIES, metavar="STRATEGY",
                   help="how activations share memory (kuiper/memory/): "
                   f"{', '.join(STRATEGIES)} (default: {DEFAULT_STRATEGY}; on an OpenCL "
                   "device that is not a CPU, greedy_in_order)")


def load_model(args: argparse.Namespace, **options):
    """kuiper.load with what add_model_options declared (the plugins loaded first)."""
    from kuiper.graph.load import load

    if args.backend == "opencl" and args.device:
        options["device"] = args.device
    if getattr(args, "memory_plan", None):
        options["memory"] = args.memory_plan
    check_model_path(args.model)
    params = load_plugins(args)
    return load(args.model, backend=args.backend, input_shapes=args.input_shape,
                params=params, passes=passes_from(args),
                precision=getattr(args, "precision", "fp32"), **options)


def convert_model_argument(args: argparse.Namespace) -> None:
    """Before a command runs: replace an ONNX/TorchScript MODEL by its converted .pnnx.param.

    The commands then see a PNNX model, as if the user had converted it by hand. The shapes
    to convert at are the command's --input-shape, when it has one.
    """
    model = getattr(args, "model", None)
    if args.command == "convert" or not isinstance(model, str):
        return
    from kuiper.graph import convert

    if convert.is_convertible(model):
        args.model = str(convert.to_pnnx(model, getattr(args, "input_shape", None)))
