"""`graph.summary()`: one row per operator with its output shapes, parameters and FLOPs.

Every function here takes a built RuntimeGraph and only reads it (its `order`, `specs`,
`operators`, ports and `fallbacks`); this module does not import the graph, which calls it.
"""

from __future__ import annotations

from kuiper.core.plugins import call
from kuiper.core.table import format_table
from kuiper.graph import topo


def human(n: float) -> str:
    for unit in ("", "K", "M", "G", "T"):
        if abs(n) < 1000:
            return f"{n:.3g}{unit}"
        n /= 1000
    return f"{n:.3g}P"


def operator_rows(graph) -> list[dict]:
    rows = []
    for op in graph.order:
        if op.layer is None:
            continue
        ins = [graph.specs[o.name] for o in op.inputs]
        outs = [graph.specs[o.name] for o in op.outputs]
        params = sum(int(a.size) for a in op.attributes.values())
        rows.append({"name": op.name, "type": op.type,
                     # "3: 1x16x8x8 float32": the operand's name is what outputs=[...] takes
                     "output": ", ".join(f"{o.name}: {s}" for o, s in zip(op.outputs, outs)),
                     "params": params,
                     "flops": call(op, op.layer, "flops", op.layer.flops, ins, outs)})
    return rows


def type_breakdown(rows: list[dict]) -> str:
    """'nn.Conv2d x2 (81% of FLOPs), nn.ReLU x3 (1%), ...': where the work is, at a glance."""
    count: dict[str, int] = {}
    flops: dict[str, int] = {}
    for r in rows:
        count[r["type"]] = count.get(r["type"], 0) + 1
        flops[r["type"]] = flops.get(r["type"], 0) + r["flops"]
    total = sum(flops.values())
    parts = []
    for k, t in enumerate(sorted(count, key=lambda t: (-flops[t], -count[t], t))):
        share = f" ({flops[t] / total:.0%}{' of FLOPs' if k == 0 else ''})" if total else ""
        parts.append(f"{t} x{count[t]}{share}")
    return ", ".join(parts)


def concurrency(graph) -> list[str]:
    """Which operators may run at the same time: the level schedule, levels with 2+ operators.

    Level k holds the operators whose inputs are all produced by levels before k (see
    kuiper/graph/topo.py), so the operators of one level never wait for each other: an out-of-order
    OpenCL queue may overlap them, and a threaded CPU executor could.
    """
    def runs(op) -> bool:  # folded constants (weights, shape arithmetic) never run
        return op.layer is not None and not all(graph.specs[o.name].known for o in op.outputs)

    levels = [[op for op in level if runs(op)] for level in topo.level_schedule(graph.operators)]
    levels = [level for level in levels if level]
    wide = [(k, level) for k, level in enumerate(levels) if len(level) > 1]
    if not wide:
        return [f"none: the {len(levels)} operators form a chain, each waits for the one before"]
    lines = [f"{len(levels)} levels; up to {max(map(len, levels))} operators may run at once "
             f"(in {len(wide)} levels):"]
    shown = 8  # a deep network has many small branches; the first few show the idea
    lines += [f"  level {k}: " + ", ".join(op.name for op in level) for k, level in wide[:shown]]
    if len(wide) > shown:
        lines.append(f"  ... and {len(wide) - shown} more levels with 2+ operators")
    return lines


def summarize(graph) -> str:
    rows = operator_rows(graph)
    fallback = {op.name for op in graph.fallbacks}
    table = [("operator", "type", "output", "params", "FLOPs")]
    table += [(r["name"], r["type"] + (" *" if r["name"] in fallback else ""),
               r["output"], f"{r['params']:,}", human(r["flops"])) for r in rows]
    lines = [format_table(table, right=(3, 4))]  # numbers line up on their last digit
    total_p = sum(r["params"] for r in rows)
    weight_bytes = sum(int(a.nbytes) for op in graph.operators for a in op.attributes.values())
    total_f = sum(r["flops"] for r in rows)
    # "0 (in0): 1x3x8x8 float32": str(port) with its alias beside the name
    # (kuiper/graph/named_io.py)
    ins = ", ".join(p.label + str(p)[len(p.name):] for p in graph.inputs)
    outs = ", ".join(p.label + str(p)[len(p.name):] for p in graph.outputs)
    lines += ["", f"inputs:  {ins}", f"outputs: {outs}",
              (f"{len(rows)} operators, {total_p:,} parameters ({human(weight_bytes)}B of "
               f"weights), {human(total_f)} FLOPs per inference (backend: {graph.backend})")]
    if rows:
        lines.append(f"by type: {type_breakdown(rows)}")
    if graph.fallbacks:
        lines.append("* no OpenCL layer, runs on the CPU: " + ", ".join(
            f"{op.name} ({op.type})" for op in graph.fallbacks))
    dynamic = [op for op in graph.order if op.layer is not None
               and any(graph.specs[o.name].dynamic for o in op.outputs)]
    if dynamic:  # kuiper/core/dynamic_shapes.py: sizes known only when the model runs
        lines.append("dynamic (data-dependent size, '<=' an upper bound): " + ", ".join(
            f"{op.name} ({op.type})" for op in dynamic))
    lines.append("concurrency: " + "\n".join(concurrency(graph)))
    return "\n".join(lines)


def parsed_summary(graph, unsupported: list[tuple[int, str, str]]) -> str:
    """The operators of a graph that could not be built, as the file declares them.

    `kuiper info` prints this for a model with operators no layer runs (`unsupported`: the
    (line, name, type) of each, from UnsupportedOperatorError.operators), so the model can
    still be inspected. Only `init()` ran: the shapes are those pnnx wrote into the file, and
    FLOPs are not known (no layer was created to count them).
    """
    missing = {name for _, name, _ in unsupported}
    table = [("", "line", "operator", "type", "output (as declared)", "params")]
    for op in graph.operators:
        if op.type in ("pnnx.Input", "pnnx.Output"):
            continue
        outs = ", ".join(declared(o) for o in op.outputs)
        params = sum(int(a.size) for a in op.attributes.values())
        table.append(("!" if op.name in missing else "", op.line, op.name, op.type, outs,
                      f"{params:,}"))
    ins = ", ".join(declared(op.outputs[0], op.outputs[0].name) for op in graph.input_ops)
    outs = ", ".join(declared(o, o.name) for o in graph.output_operands)
    types = sorted({t for _, _, t in unsupported})
    return "\n".join([
        format_table(table, right=(1, 5)), "", f"inputs:  {ins}", f"outputs: {outs}",
        f"{len(table) - 1} operators; {len(unsupported)} marked '!' have no {graph.backend} "
        f"layer ({', '.join(types)}): the model cannot run until a layer handles them"])


def declared(operand, name: str | None = None) -> str:
    """'1x3x8x8 f32' from the file's `#operand=(shape)dtype`, '?' where pnnx wrote none."""
    dims = "?" if operand.shape is None else "x".join(
        "?" if d is None else str(d) for d in operand.shape) or "scalar"
    text = f"{dims} {operand.dtype}" if operand.dtype else dims
    return f"{name}: {text}" if name else text
