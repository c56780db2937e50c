"""The `kuiper` command line (also `python -m kuiper`).

    kuiper info MODEL               operators, shapes, parameters, FLOPs (--json, --dot)
    kuiper run MODEL --input x.npy  run it (images, a folder: a batch), classify or detect
    kuiper ops                      which PNNX operator types each backend supports
    kuiper devices                  OpenCL devices, and the one Kuiper picks
    kuiper demo                     the handwritten-digits demo, checked against PyTorch
    kuiper bench MODEL              timings, per-operator profile, ratios to PyTorch/onnxruntime
    kuiper fuzz --cases 2000        mutated models in a sandbox: every bad file must be refused
    kuiper tune MODEL               time the OpenCL kernel candidates, keep the fastest (cache)

Each subcommand is one `add_<name>_parser(sub)` function that declares its arguments and sets
`func`, the function that runs it and returns the exit status. Subcommands that live in their own
module (bench, compare, course, fuzz) expose `add_parser(sub)` and are listed in COMMAND_MODULES.
Those modules import nothing from this one: the CLI sits on top of the tools, not among them.

`-v`/`-vv`/`-q` (before the command) set how much the `kuiper` logger prints on stderr
(tools/logs.py). `--json` (info, ops, devices, bench, compare) prints one JSON document on stdout
instead of the text (tools/jsonout.py).

Exit status: 0 success, 1 a KuiperError (printed as `kuiper: error: ...`, without a traceback:
the message already says what is wrong and how to fix it), 2 a usage error (argparse, through
options.KuiperArgumentParser: also one `kuiper: error: ...` line, and no abbreviated options).
File arguments are checked before the model runs (tools/inputs.py: require_file), so a typo
in `--labels` does not cost an inference first.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from kuiper.core.errors import KuiperError, OpenCLUnavailableError, UnsupportedOperatorError
from kuiper.graph.pipeline import PASS_NAMES
from kuiper.core.table import print_table
from kuiper.cli.jsonout import add_json_option, emit
from kuiper.cli.logs import configure as configure_logging
from kuiper.cli.options import (
    KuiperArgumentParser,
    add_pass_option,
    add_plugin_option,
    check_model_path,
    load_plugins,
    passes_from,
    shape_list,
)

# Modules that contribute a subcommand through `add_parser(sub)` (imported when the parser is
# built, so `kuiper --version` does not pay for them).
COMMAND_MODULES = ("kuiper.cli.bench", "kuiper.cli.compare", "kuiper.cli.course",
                   "kuiper.cli.fuzz", "kuiper.cli.convert", "kuiper.cli.tune")
BACKEND_CHOICES = ("cpu", "opencl")
TOP_K = 5
FOLDED = ("pnnx.Attribute",)
log = logging.getLogger("kuiper.tools")


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
    add_memory_plan_option(p)
    add_plugin_option(p)
    add_pass_option(p)


def add_memory_plan_option(p: argparse.ArgumentParser) -> None:
    from kuiper.memory import DEFAULT_STRATEGY, STRATEGIES

    p.add_argument("--memory-plan", choices=STRATEGIES, metavar="STRATEGY",
                   help="how activations share memory (kuiper/memory/): "
                   f"{', '.join(STRATEGIES)} (default: {DEFAULT_STRATEGY}; on an OpenCL "
                   "device that is not a CPU, greedy_in_order)")


def load_model(args: argparse.Namespace, **options):
    import kuiper

    if args.backend == "opencl" and args.device:
        options["device"] = args.device
    if getattr(args, "memory_plan", None):
        options["memory"] = args.memory_plan
    check_model_path(args.model)
    params = load_plugins(args)
    return kuiper.load(args.model, backend=args.backend, input_shapes=args.input_shape,
                       params=params, passes=passes_from(args), **options)


# --- info ---------------------------------------------------------------------------------------
def add_info_parser(sub) -> None:
    p = sub.add_parser("info", help="operators, shapes, parameters and FLOPs of a model",
                       epilog="To look at the graph: --dot writes Graphviz DOT (render with "
                       "`dot -Tsvg model.dot -o model.svg`); Netron (https://netron.app) "
                       "opens a .pnnx.param directly.")
    add_model_options(p)
    add_json_option(p)
    p.add_argument("--dot", nargs="?", const="-", metavar="FILE",
                   help="write the graph as Graphviz DOT to FILE (stdout without FILE): "
                   "operators as nodes with type and output shape, operands as edges")
    p.add_argument("--passes", action="store_true",
                   help="print what each graph pass changed (kuiper/passes/): folded, dead and "
                   "no-op operators, fused epilogues")
    p.add_argument("--memory", action="store_true",
                   help="the activation memory of one inference per planning strategy, beside "
                   "its lower bound, and the layers' workspace")
    p.set_defaults(func=cmd_info)


def cmd_info(args: argparse.Namespace) -> int:
    if args.dot and args.dot != "-" and not Path(args.dot).parent.is_dir():
        raise KuiperError(f"--dot {args.dot}: the folder {Path(args.dot).parent} does not exist")
    try:
        graph = load_model(args)
    except UnsupportedOperatorError as e:
        print_unbuilt(args, e)  # still show the model, then the error (exit status 1)
        raise
    if args.dot:
        from kuiper.io.dot import to_dot

        if args.dot == "-":
            sys.stdout.write(to_dot(graph))
            return 0
        try:
            Path(args.dot).write_text(to_dot(graph))
        except OSError as e:
            raise KuiperError(f"--dot {args.dot}: cannot be written ({e.strerror or e})") from None
        if not args.json:
            print(f"wrote {args.dot} (render: dot -Tsvg {args.dot} -o graph.svg)")
    if args.json:
        document = info_document(graph)
        if args.memory:
            from kuiper.memory.report import memory_document

            document["memory"] = memory_document(graph)
        emit(document)
        return 0
    print(f"model: {graph.param_path}")
    print(graph.summary())
    if args.passes:
        print("\ngraph passes, in order (--no-pass NAME leaves one out):")
        print(graph.plan.describe(PASS_NAMES))
    if args.memory:
        from kuiper.memory.report import memory_table

        print(memory_table(graph))
    if graph.backend == "opencl":  # the kernel selector's decisions (kuiper/cli/tune.py)
        from kuiper.cli.tune import algorithm_lines

        for line in algorithm_lines(graph):
            print(line)
    return 0


def info_document(graph) -> dict:
    """`kuiper info --json`: what the summary table shows, as data."""
    from kuiper.graph.summary import operator_rows
    from kuiper.cli.jsonout import port_dict
    from kuiper.cli.tune import algorithm_rows

    rows = operator_rows(graph)
    fallback = {op.name for op in graph.fallbacks}
    for row in rows:
        row["fallback"] = row["name"] in fallback
    return {"model": graph.param_path, "backend": graph.backend,
            "inputs": [port_dict(p) for p in graph.inputs],
            "outputs": [port_dict(p) for p in graph.outputs],
            "operators": rows, "parameters": sum(r["params"] for r in rows),
            "flops": sum(r["flops"] for r in rows)} | (
                {"kernels": algorithm_rows(graph)} if graph.backend == "opencl" else {})


def print_unbuilt(args: argparse.Namespace, error: UnsupportedOperatorError) -> None:
    """The model as parsed, the operators without a layer marked: it can be inspected even if
    it cannot run yet (kuiper/graph/summary.py: parsed_summary)."""
    import kuiper
    from kuiper.graph.summary import parsed_summary

    graph = kuiper.RuntimeGraph(args.model, backend=args.backend, params=load_plugins(args))
    graph.init()
    print(f"model: {graph.param_path}")
    print(parsed_summary(graph, getattr(error, "operators", [])))


# --- run (kuiper/cli/run.py: images, tasks, pre- and post-processing) ---------------------
def add_run_parser(sub) -> None:
    importlib.import_module("kuiper.cli.run").add_parser(sub, add_model_options, load_model)


# --- ops ----------------------------------------------------------------------------------------
def add_ops_parser(sub) -> None:
    p = sub.add_parser("ops", help="which PNNX operator types each backend supports")
    p.add_argument("--backend", choices=BACKEND_CHOICES,
                   help="list only the types this backend runs natively")
    add_plugin_option(p)
    add_json_option(p)
    p.set_defaults(func=cmd_ops)


def cmd_ops(args: argparse.Namespace) -> int:
    from kuiper.core import registry

    load_plugins(args)
    cpu = registry.supported("cpu")
    try:
        opencl = registry.supported("opencl")
    except ImportError as e:  # a broken OpenCL install must not hide the CPU list
        opencl = {}
        log.warning("OpenCL layers could not be imported: %s", e)
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
    if args.json:
        emit({"types": [dict(zip(("type", "cpu", "opencl", "files", "from"), row))
                        for row in rows[1:]],
              "count": len(types), "cpu": sum(t in cpu for t in types),
              "opencl": sum(t in opencl for t in types)})
        return 0
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
    add_json_option(p)
    p.set_defaults(func=cmd_devices)


def device_kind(cl, device) -> str:
    names = [n for n in ("GPU", "CPU", "ACCELERATOR") if device.type & getattr(cl.device_type, n)]
    return "/".join(names) or "other"


def cmd_devices(args: argparse.Namespace) -> int:
    from kuiper.opencl.device.runtime import INSTALL_HINT, _cl, choose_device, list_devices

    cl = _cl()
    rows = list_devices()
    if not rows:
        raise OpenCLUnavailableError(f"no OpenCL platform found: {INSTALL_HINT}")
    try:
        default = choose_device()
    except OpenCLUnavailableError as e:
        default, why = None, str(e)
    table = [("", "device", "platform / name", "type", "units", "memory")]
    found = []
    for index, label, dev in rows:
        mark = "*" if default is not None and dev == default else ""
        kind = "simulator" if "oclgrind" in label.lower() else device_kind(cl, dev)
        table.append((mark, index, label.rsplit(" (", 1)[0], kind, str(dev.max_compute_units),
                      f"{dev.global_mem_size / 2**30:.1f} GiB"))
        found.append({"index": index, "name": label.rsplit(" (", 1)[0], "type": kind,
                      "compute_units": dev.max_compute_units,
                      "memory_bytes": dev.global_mem_size, "default": bool(mark)})
    if args.json:
        emit({"devices": found, "default": next((d["index"] for d in found if d["default"]),
                                                None),
              "no_default_reason": None if default is not None else why})
        return 0
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
    from kuiper.demo.digits import run_demo

    return run_demo(args.backend, args.device, args.show)


# --- the parser ---------------------------------------------------------------------------------
BUILTIN_COMMANDS: tuple[Callable, ...] = (add_info_parser, add_run_parser, add_ops_parser,
                                          add_devices_parser, add_demo_parser)


def build_parser() -> argparse.ArgumentParser:
    from kuiper import __version__

    parser = KuiperArgumentParser(
        prog="kuiper", description="Kuiper: an educational inference engine for PNNX models "
        "(NumPy and OpenCL backends).", epilog="`kuiper COMMAND -h` shows a command's options.")
    parser.add_argument("--version", action="version", version=f"kuiper {__version__}")
    parser.add_argument("-v", "--verbose", action="count", default=0,
                        help="say more on stderr: -v details for debugging (DEBUG); by "
                        "default progress lines (building OpenCL kernels...) and warnings")
    parser.add_argument("-q", "--quiet", action="store_true",
                        help="errors only on stderr (no warnings)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for add in BUILTIN_COMMANDS:
        add(sub)
    for name in COMMAND_MODULES:
        importlib.import_module(name).add_parser(sub)
    for command_parser in sub.choices.values():  # so an unknown option is reported by it
        command_parser.set_defaults(command_parser=command_parser)
        add_verbosity_options(command_parser)
    return parser


def add_verbosity_options(p: argparse.ArgumentParser) -> None:
    """-v/-q after the command too (`kuiper run m.pnnx.param -q`), as people type them.

    SUPPRESS as the default: a subcommand that was not given -v keeps the top-level value.
    A command that uses -v or -q for something of its own keeps it."""
    for flags, options in ((("-v", "--verbose"), {"action": "count"}),
                           (("-q", "--quiet"), {"action": "store_true"})):
        try:
            p.add_argument(*flags, default=argparse.SUPPRESS, help=argparse.SUPPRESS, **options)
        except argparse.ArgumentError:
            pass


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown:  # name the command whose options they are not, as `kuiper bench: ...`
        getattr(args, "command_parser", parser).error(
            f"unrecognized arguments: {' '.join(unknown)}")
    undo_logging = configure_logging(args.verbose, args.quiet)
    try:
        return run_parsed(parser, args)
    finally:
        undo_logging()


def run_parsed(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    """Run the chosen command, turning a KuiperError into one `kuiper: error:` line."""
    if getattr(args, "func", None) is None:
        parser.print_help(sys.stderr)
        print("kuiper: error: no command given: choose one of those above", file=sys.stderr)
        return 2
    try:
        from kuiper.cli.convert import convert_model_argument

        convert_model_argument(args)  # a MODEL.onnx / .pt becomes its converted .pnnx.param
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
