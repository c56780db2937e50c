"""Command-line options that several subcommands share (info, run, ops, bench, compare)."""

from __future__ import annotations

import argparse

from kuiper import plugins
from kuiper.parser.values import parse_value
from kuiper.tools.inputs import parse_shapes


def shape_list(text: str) -> list[tuple[int, ...]]:
    """argparse type for --input-shape: '1x3x224x224', or several joined by ','."""
    try:
        return parse_shapes(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def add_plugin_option(p: argparse.ArgumentParser) -> None:
    """--plugin and --param: what `kuiper.load(..., plugins=[...], params={...})` takes."""
    p.add_argument("--plugin", action="append", default=[], metavar="MODULE_OR_PATH",
                   help="load layers of your own from a module or a .py file (repeatable); "
                   "installed plugins load by themselves (kuiper/PLUGINS.md)")
    p.add_argument("--param", action="append", default=[], metavar="TYPE:KEY=VALUE",
                   type=type_param, help="a parameter the file does not carry, for every "
                   "operator of TYPE, e.g. mymods.Swish2:beta=1.5 (repeatable)")


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
