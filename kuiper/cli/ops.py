"""`kuiper ops`: which PNNX operator types each backend runs, from which file and which plugin."""

from __future__ import annotations

import argparse
import logging
import sys

from kuiper.cli.options import BACKEND_CHOICES, add_plugin_option, load_plugins
from kuiper.core.table import print_table
from kuiper.io.jsonout import add_json_option, emit

log = logging.getLogger("kuiper.cli")

def add_parser(sub) -> None:
    p = sub.add_parser("ops", help="which PNNX operator types each backend supports")
    p.add_argument("--backend", choices=BACKEND_CHOICES,
                   help="list only the types this backend runs natively")
    add_plugin_option(p)
    add_json_option(p)
    p.set_defaults(func=cmd_ops)


FOLDED = ("pnnx.Attribute",)


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
