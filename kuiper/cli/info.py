"""`kuiper info MODEL`: operators, output shapes, parameters and FLOPs; with --passes what
each graph pass changed, with --memory the activation memory per planning strategy, --dot the
graph as Graphviz DOT, --json all of it as data. On OpenCL, the kernel each convolution and
linear layer runs, and why."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from kuiper.cli.options import add_model_options, load_model, load_plugins
from kuiper.core.errors import KuiperError, UnsupportedOperatorError
from kuiper.graph.pipeline import PASS_NAMES
from kuiper.io.jsonout import add_json_option, emit


def add_parser(sub) -> None:
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
    if graph.backend == "opencl":  # the kernel selector's decisions
        from kuiper.opencl.execution.kernels_chosen import algorithm_lines

        for line in algorithm_lines(graph):
            print(line)
    return 0


def info_document(graph) -> dict:
    """`kuiper info --json`: what the summary table shows, as data."""
    from kuiper.graph.summary import operator_rows
    from kuiper.io.jsonout import port_dict
    from kuiper.opencl.execution.kernels_chosen import algorithm_rows

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
    from kuiper.graph.runtime_graph import RuntimeGraph
    from kuiper.graph.summary import parsed_summary

    graph = RuntimeGraph(args.model, backend=args.backend, params=load_plugins(args))
    graph.init()
    print(f"model: {graph.param_path}")
    print(parsed_summary(graph, getattr(error, "operators", [])))
