"""The `kuiper` command line (also `python -m kuiper`).

    kuiper info MODEL               operators, shapes, parameters, FLOPs
    kuiper run MODEL --input x.npy  run it (an image works too), top-5 for classifiers
    kuiper ops                      which PNNX operator types each backend supports
    kuiper devices                  OpenCL devices, and the one Kuiper picks
    kuiper demo                     the handwritten-digits demo, checked against PyTorch
    kuiper bench MODEL              timings, per-operator profile, ratios to PyTorch/onnxruntime

Each subcommand is one `add_<name>_parser(sub)` function that declares its arguments and sets
`func`, the function that runs it and returns the exit status. Subcommands that live in their own
module (bench, compare, course) expose `add_parser(sub)` and are listed in COMMAND_MODULES.
Those modules import nothing from this one: the CLI sits on top of the tools, not among them.

Exit status: 0 success, 1 a KuiperError (printed as `kuiper: error: ...`, without a traceback:
the message already says what is wrong and how to fix it), 2 a usage error (argparse).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from kuiper.errors import KuiperError, OpenCLUnavailableError
from kuiper.table import print_table
from kuiper.tools.options import add_plugin_option, load_plugins, shape_list

# Modules that contribute a subcommand through `add_parser(sub)` (imported when the parser is
# built, so `kuiper --version` does not pay for them).
COMMAND_MODULES = ("kuiper.tools.bench", "kuiper.tools.compare", "kuiper.tools.course")
BACKEND_CHOICES = ("cpu", "opencl")
TOP_K = 5
FOLDED = ("pnnx.Attribute",)


# --- helpers shared by several subcommands ------------------------------------------------------
def add_model_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", help="path of the .pnnx.param (the .pnnx.bin is found beside it)")
    p.add_argument("--backend", choices=BACKEND_CHOICES, default="cpu",
                   help="where to run (default: %(default)s)")
    p.add_argument("--device", help="OpenCL device: 'P:D' as in PYOPENCL_CTX, or part of its "
                   "name (see `kuiper devices`)")
    p.add_argument("--input-shape", type=shape_list, metavar="SHAPE",
                   help="run at another input size, e.g. 4x3x160x160 (several inputs: "
                   "comma-separated)")
    add_plugin_option(p)


def load_model(args: argparse.Namespace, **options):
    import kuiper

    if args.backend == "opencl" and args.device:
        options["device"] = args.device
    params = load_plugins(args)
    return kuiper.load(args.model, backend=args.backend, input_shapes=args.input_shape,
                       params=params, **options)


# --- info ---------------------------------------------------------------------------------------
def add_info_parser(sub) -> None:
    p = sub.add_parser("info", help="operators, shapes, parameters and FLOPs of a model")
    add_model_options(p)
    p.set_defaults(func=cmd_info)


def cmd_info(args: argparse.Namespace) -> int:
    graph = load_model(args)
    print(f"model: {graph.param_path}")
    print(graph.summary())
    return 0


# --- run ----------------------------------------------------------------------------------------
def add_run_parser(sub) -> None:
    p = sub.add_parser("run", help="run a model on a .npy array or an image",
                       description="Run a model. An image (needs Pillow) is resized to the "
                       "model's input size and scaled to [0, 1]; 3-channel inputs are then "
                       "normalised with the ImageNet mean and std.")
    add_model_options(p)
    p.add_argument("--input", action="append", metavar="FILE",
                   help=".npy array or image; repeat for models with several inputs "
                   "(default: seeded random inputs)")
    p.add_argument("--output", metavar="FILE", help="save the output: .npy (one output) or "
                   ".npz (all outputs, by name)")
    p.add_argument("--labels", metavar="FILE", help="class names, one per line, for the top-5")
    p.set_defaults(func=cmd_run)


def cmd_run(args: argparse.Namespace) -> int:
    from kuiper.tools.inputs import load_input, random_inputs

    if args.output and not args.output.endswith((".npy", ".npz")):
        raise KuiperError(f"--output {args.output}: use a .npy or .npz file name")
    graph = load_model(args)
    ports = graph.inputs
    if args.input:
        if len(args.input) != len(ports):
            raise KuiperError(f"the model has {len(ports)} input(s) "
                              f"({', '.join(str(p) for p in ports)}), got {len(args.input)} "
                              "--input file(s)")
        inputs = [load_input(path, port) for path, port in zip(args.input, ports)]
    else:
        inputs = random_inputs(ports)
        print("no --input given: using seeded random inputs")
    for port, x in zip(ports, inputs):
        print(f"input  {port.name}: {'x'.join(map(str, x.shape))} {x.dtype}")

    start = time.perf_counter()
    outputs = [np.asarray(y) for y in graph.forward(*inputs)]
    seconds = time.perf_counter() - start
    labels = Path(args.labels).read_text().splitlines() if args.labels else None
    for port, y in zip(graph.outputs, outputs):
        stats = ""
        if y.size and np.issubdtype(y.dtype, np.number):
            stats = f"  min {y.min():.4g}  mean {y.mean():.4g}  max {y.max():.4g}"
        print(f"output {port.name}: {'x'.join(map(str, y.shape)) or 'scalar'} {y.dtype}{stats}")
        if y.ndim == 2 and y.shape[1] > 1 and np.issubdtype(y.dtype, np.floating):
            print_top_k(y, labels)
    print(f"{args.backend}: {seconds * 1e3:.2f} ms (first run, includes one-time work)")
    if args.output:
        save_outputs(args.output, graph.outputs, outputs)
        print(f"saved {args.output}")
    return 0


def print_top_k(logits: np.ndarray, labels: Sequence[str] | None, rows: int = 4) -> None:
    """Top-5 classes per sample, with softmax probabilities (for classifier outputs N x C)."""
    from kuiper.tools.postprocess import softmax_topk

    probs, classes = softmax_topk(logits, TOP_K)
    for n in range(min(rows, len(probs))):
        cells = []
        for p, c in zip(probs[n], classes[n]):
            name = labels[c] if labels is not None and c < len(labels) else f"class {c}"
            cells.append(f"{name} {p:.1%}")
        print(f"  top-{len(cells)}" + (f" [{n}]" if len(probs) > 1 else "") + ": "
              + ", ".join(cells))
    if len(probs) > rows:
        print(f"  ... {len(probs) - rows} more samples")


def save_outputs(path: str, ports, outputs: list[np.ndarray]) -> None:
    if path.endswith(".npz"):
        np.savez(path, **{port.name: y for port, y in zip(ports, outputs)})
    elif path.endswith(".npy"):
        if len(outputs) != 1:
            raise KuiperError(f"the model has {len(outputs)} outputs: save them with "
                              "--output FILE.npz")
        np.save(path, outputs[0])
    else:
        raise KuiperError(f"--output {path}: use a .npy or .npz file name")


# --- ops ----------------------------------------------------------------------------------------
def add_ops_parser(sub) -> None:
    p = sub.add_parser("ops", help="which PNNX operator types each backend supports")
    p.add_argument("--backend", choices=BACKEND_CHOICES,
                   help="list only the types this backend runs natively")
    add_plugin_option(p)
    p.set_defaults(func=cmd_ops)


def cmd_ops(args: argparse.Namespace) -> int:
    from kuiper import registry

    load_plugins(args)
    cpu = registry.supported("cpu")
    try:
        opencl = registry.supported("opencl")
    except ImportError as e:  # a broken OpenCL install must not hide the CPU list
        opencl = {}
        print(f"(OpenCL layers could not be imported: {e})")
    types = sorted(set(cpu) | set(opencl))
    if args.backend:
        types = [t for t in types if t in (cpu if args.backend == "cpu" else opencl)]
    rows = [("PNNX type", "cpu", "opencl", "file (layers/<backend>/...)", "from")]
    for t in types:
        classes = [c for c in (cpu.get(t), opencl.get(t)) if c is not None]
        on_cl = "yes" if t in opencl else ("cpu fallback" if t in cpu else "-")
        if t in FOLDED and t not in opencl:
            on_cl = "folded"  # constants: uploaded once at build, never run per inference
        # where each backend's layer comes from (a plugin may replace one backend's only)
        files = dict.fromkeys(layer_source_file(c) for c in classes)
        sources = dict.fromkeys(registry.origin(c) for c in classes)
        rows.append((t, "yes" if t in cpu else "-", on_cl, ", ".join(files), ", ".join(sources)))
    print_table(rows)
    print(f"\n{len(types)} types: {sum(t in cpu for t in types)} on cpu, "
          f"{sum(t in opencl for t in types)} on opencl. On OpenCL, a type without its own "
          "layer runs on the CPU between a download and an upload.")
    return 0


def layer_source_file(cls: type) -> str:
    """conv2d.py for Kuiper's own layers (the stem names the operator), the full path else."""
    if cls.__module__.startswith("kuiper.layers."):
        return cls.__module__.rsplit(".", 1)[-1] + ".py"
    return getattr(sys.modules.get(cls.__module__), "__file__", None) or cls.__module__


# --- devices ------------------------------------------------------------------------------------
def add_devices_parser(sub) -> None:
    p = sub.add_parser("devices", help="list OpenCL devices and the one Kuiper picks")
    p.set_defaults(func=cmd_devices)


def device_kind(cl, device) -> str:
    names = [n for n in ("GPU", "CPU", "ACCELERATOR") if device.type & getattr(cl.device_type, n)]
    return "/".join(names) or "other"


def cmd_devices(args: argparse.Namespace) -> int:
    from kuiper.opencl.runtime import INSTALL_HINT, _cl, choose_device, list_devices

    cl = _cl()
    rows = list_devices()
    if not rows:
        raise OpenCLUnavailableError(f"no OpenCL platform found: {INSTALL_HINT}")
    try:
        default = choose_device()
    except OpenCLUnavailableError as e:
        default, why = None, str(e)
    table = [("", "device", "platform / name", "type", "units", "memory")]
    for index, label, dev in rows:
        mark = "*" if default is not None and dev == default else ""
        kind = "simulator" if "oclgrind" in label.lower() else device_kind(cl, dev)
        table.append((mark, index, label.rsplit(" (", 1)[0], kind, str(dev.max_compute_units),
                      f"{dev.global_mem_size / 2**30:.1f} GiB"))
    print_table(table)
    if default is None:
        print(f"\nno default device: {why}")
    else:
        print("\n* = the device Kuiper uses by default; choose another with --device P:D, "
              "--device NAME or the PYOPENCL_CTX environment variable")
    return 0


# --- demo ---------------------------------------------------------------------------------------
def add_demo_parser(sub) -> None:
    p = sub.add_parser("demo", help="classify handwritten digits with a small CNN and check "
                       "every prediction against PyTorch")
    p.add_argument("--backend", choices=BACKEND_CHOICES, default="cpu",
                   help="where to run (default: %(default)s)")
    p.add_argument("--device", help="OpenCL device (see `kuiper devices`)")
    p.add_argument("--show", type=int, default=6, metavar="N",
                   help="how many digits to draw (default: %(default)s)")
    p.set_defaults(func=cmd_demo)


def cmd_demo(args: argparse.Namespace) -> int:
    from kuiper.tools.demo.digits import run_demo

    return run_demo(args.backend, args.device, args.show)


# --- the parser ---------------------------------------------------------------------------------
BUILTIN_COMMANDS: tuple[Callable, ...] = (add_info_parser, add_run_parser, add_ops_parser,
                                          add_devices_parser, add_demo_parser)


def build_parser() -> argparse.ArgumentParser:
    from kuiper import __version__

    parser = argparse.ArgumentParser(
        prog="kuiper", description="Kuiper: an educational inference engine for PNNX models "
        "(NumPy and OpenCL backends).", epilog="`kuiper COMMAND -h` shows a command's options.")
    parser.add_argument("--version", action="version", version=f"kuiper {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for add in BUILTIN_COMMANDS:
        add(sub)
    for name in COMMAND_MODULES:
        importlib.import_module(name).add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "func", None) is None:
        parser.print_help(sys.stderr)
        return 2
    try:
        return int(args.func(args) or 0)
    except KuiperError as e:
        sys.stdout.flush()
        print(f"kuiper: error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("kuiper: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader went away (`kuiper ops | head`): stop quietly, as shell tools do. Point
        # stdout at /dev/null so Python's final flush does not raise a second time.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
