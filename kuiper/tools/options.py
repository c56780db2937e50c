"""Command-line options that several subcommands share (info, run, ops, bench, compare)."""

from __future__ import annotations

import argparse

from kuiper import plugins
from kuiper.tools.inputs import parse_shapes


def shape_list(text: str) -> list[tuple[int, ...]]:
    """argparse type for --input-shape: '1x3x224x224', or several joined by ','."""
    try:
        return parse_shapes(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def add_plugin_option(p: argparse.ArgumentParser) -> None:
    """--plugin MODULE_OR_PATH (repeatable): what `kuiper.load(..., plugins=[...])` takes."""
    p.add_argument("--plugin", action="append", default=[], metavar="MODULE_OR_PATH",
                   help="load layers of your own from a module or a .py file (repeatable); "
                   "installed plugins load by themselves (kuiper/PLUGINS.md)")


def load_plugins(args: argparse.Namespace) -> None:
    """Load the --plugin plugins (and the installed ones) before any model is loaded."""
    plugins.load_all(getattr(args, "plugin", ()))
