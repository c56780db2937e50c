"""The `kuiper` command line (also `python -m kuiper`): one module per command, in this folder.

    kuiper info MODEL               operators, shapes, parameters, FLOPs (--json, --dot)
    kuiper run MODEL --input x.npy  run it (images, a folder: a batch), classify or detect
    kuiper ops                      which PNNX operator types each backend supports
    kuiper devices                  OpenCL devices, and the one Kuiper picks
    kuiper demo                     the handwritten-digits demo, checked against PyTorch
    kuiper bench MODEL              timings, per-operator profile, ratios to PyTorch/onnxruntime
    kuiper compare MODEL            every operator's output on each backend against PyTorch
    kuiper tune MODEL               time the OpenCL kernel candidates, keep the fastest (cache)
    kuiper convert MODEL.onnx       an ONNX or TorchScript file to PNNX, with pnnx
    kuiper export FILE.py:NAME      a PyTorch module of yours to a Kuiper model, checked
    kuiper batch MODEL FOLDER       a folder of inputs through a model, with progress (or Ray)
    kuiper course check N           the course's exercises (course_notes/)
    kuiper fuzz --cases 2000        mutated models in a sandbox: every bad file must be refused

A command is one module, kuiper/cli/<name>.py, with `add_parser(sub)`: it declares its
arguments on the subparser it adds and sets `func`, the function that runs it and returns the
exit status. COMMANDS below lists them, in the order `kuiper -h` shows. A command module imports
the shared helpers of this folder (options.py: model and plugin options, the argument parser
class; logs.py) and the engine, never another command's module.

`-v`/`-vv`/`-q` (before or after the command) set how much the `kuiper` logger prints on
stderr (logs.py). `--json` (info, ops, devices, bench, compare, tune) prints one JSON document on
stdout instead of the text (kuiper/io/jsonout.py).

Exit status: 0 success, 1 a KuiperError (printed as `kuiper: error: ...`, without a traceback:
the message already says what is wrong and how to fix it), 2 a usage error (argparse, through
options.KuiperArgumentParser: also one `kuiper: error: ...` line, and no abbreviated options).
File arguments are checked before the model runs (kuiper/io/inputs.py: require_file), so a typo
in `--labels` does not cost an inference first.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from kuiper.cli.logs import configure as configure_logging
from kuiper.cli.options import KuiperArgumentParser
from kuiper.core.errors import KuiperError
from kuiper.core.version import __version__

# The commands, in the order `kuiper -h` lists them: kuiper/cli/<name>.py each.
COMMANDS = ("info", "run", "ops", "devices", "demo", "bench", "compare", "tune", "convert",
            "export", "batch", "course", "fuzz")


def command_modules() -> list:
    """The modules of COMMANDS, imported when the parser is built (so that `kuiper --version`
    does not pay for them)."""
    from kuiper.cli import (
        batch,
        bench,
        compare,
        convert,
        course,
        demo,
        devices,
        export,
        fuzz,
        info,
        ops,
        run,
        tune,
    )

    modules = {"info": info, "run": run, "ops": ops, "devices": devices, "demo": demo,
               "bench": bench, "compare": compare, "tune": tune, "convert": convert,
               "export": export, "batch": batch, "course": course, "fuzz": fuzz}
    return [modules[name] for name in COMMANDS]


def build_parser() -> argparse.ArgumentParser:
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
    for module in command_modules():
        module.add_parser(sub)
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
        from kuiper.cli.options import convert_model_argument

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
