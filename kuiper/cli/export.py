"""`kuiper export FILE.py:NAME`: a PyTorch module of yours to a Kuiper model, checked.

    kuiper export models.py:make_block --input-shape 1x8x32 -o out/block
    kuiper export mypackage.nets:ResNet --input-shape 1x3x224x224 -o out/resnet

NAME is a function that returns the module (an nn.Module, in eval mode or not), or an
nn.Module class that takes no arguments. The module is exported with pnnx at the given input
size, with the settings that work (kuiper/io/export.py: check_trace=False, which
nn.MultiheadAttention needs), then loaded by Kuiper and compared with PyTorch on a seeded
random example: an export that does not compute what the module does is an error, not a file.
This runs FILE.py: the code you name, as `python FILE.py` would.

From Python, the same is `kuiper.export(model, (x,), "out/block")`.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import sys
from pathlib import Path

from kuiper.cli.options import shape_list
from kuiper.core.errors import KuiperError

DTYPES = ("float32", "int64", "int32")


def add_parser(sub) -> None:
    p = sub.add_parser("export", help="export a PyTorch module (FILE.py:NAME) to a Kuiper "
                       "model with pnnx, and check it against PyTorch", description=__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("module", metavar="FILE.py:NAME", help="a Python file or module and, after "
                   "':', the function (or nn.Module class) that makes the module")
    p.add_argument("--input-shape", type=shape_list, required=True, metavar="SHAPE",
                   help="the input size to export at, e.g. 1x3x224x224 (several inputs: "
                   "comma-separated)")
    p.add_argument("--input-dtype", choices=DTYPES, default="float32",
                   help="the inputs' type: float32 (seeded normal values), or integers such "
                   "as token ids (seeded values 0..9) (default: %(default)s)")
    p.add_argument("-o", "--output", required=True, metavar="PATH",
                   help="the model's path without suffix: PATH.pnnx.param and PATH.pnnx.bin "
                   "are written (and PATH's folder made)")
    p.add_argument("--moduleop", action="append", default=[], metavar="TYPE",
                   help="a module type pnnx keeps whole, for a plugin (kuiper/PLUGINS.md)")
    p.add_argument("--no-check", action="store_true", help="do not compare with PyTorch (a "
                   "model that needs a plugin to run)")
    p.set_defaults(func=run_command)


def find_factory(spec: str):
    """The callable `FILE.py:NAME` or `package.module:NAME` names."""
    where, _, name = spec.rpartition(":")
    if not where or not name:
        raise KuiperError(f"'{spec}': give FILE.py:NAME or MODULE:NAME, e.g. models.py:make")
    if where.endswith(".py"):
        path = Path(where)
        if not path.is_file():
            raise KuiperError(f"'{spec}': {path} is not a file")
        sys.path.insert(0, str(path.resolve().parent))  # its own imports, as `python FILE.py`
        module_spec = importlib.util.spec_from_file_location(path.stem, path)
        module = importlib.util.module_from_spec(module_spec)
        sys.modules[path.stem] = module
        module_spec.loader.exec_module(module)
    else:
        try:
            module = importlib.import_module(where)
        except ImportError as e:
            raise KuiperError(f"'{spec}': cannot import {where} ({e})") from None
    factory = getattr(module, name, None)
    if not callable(factory):
        raise KuiperError(f"'{spec}': {where} has no function or class named '{name}'")
    return factory


def example_inputs(shapes, dtype: str):
    import torch

    generator = torch.Generator().manual_seed(0)
    if dtype == "float32":
        return tuple(torch.randn(*s, generator=generator) for s in shapes)
    return tuple(torch.randint(0, 10, tuple(s), generator=generator,
                               dtype=getattr(torch, dtype)) for s in shapes)


def run_command(args: argparse.Namespace) -> int:
    from kuiper.io.export import export

    model = find_factory(args.module)()
    if not hasattr(model, "eval") or not callable(model):
        raise KuiperError(f"'{args.module}' returned {type(model).__name__}, not a "
                          "torch.nn.Module")
    param = export(model, example_inputs(args.input_shape, args.input_dtype), args.output,
                   moduleop=args.moduleop, check=not args.no_check)
    checked = "not checked (--no-check)" if args.no_check else "matches PyTorch on a seeded example"
    print(f"{param} and {param.with_name(param.name.replace('.param', '.bin'))}: {checked}")
    print(f"load it with: kuiper.load({str(param)!r}), or `kuiper run {param}`")
    return 0
