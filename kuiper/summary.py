"""`graph.summary()`: one row per operator with its output shapes, parameters and FLOPs."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kuiper.graph import RuntimeGraph


def human(n: float) -> str:
    for unit in ("", "K", "M", "G", "T"):
        if abs(n) < 1000:
            return f"{n:.3g}{unit}"
        n /= 1000
    return f"{n:.3g}P"


def operator_rows(graph: "RuntimeGraph") -> list[dict]:
    rows = []
    for op in graph.order:
        if op.layer is None:
            continue
        ins = [graph.specs[o.name] for o in op.inputs]
        outs = [graph.specs[o.name] for o in op.outputs]
        params = sum(int(a.size) for a in op.attributes.values())
        rows.append({"name": op.name, "type": op.type,
                     "output": ", ".join(str(s) for s in outs),
                     "params": params, "flops": op.layer.flops(ins, outs)})
    return rows


def summarize(graph: "RuntimeGraph") -> str:
    rows = operator_rows(graph)
    header = ("operator", "type", "output", "params", "FLOPs")
    table = [header] + [(r["name"], r["type"], r["output"], f"{r['params']:,}",
                         human(r["flops"])) for r in rows]
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)) for row in table]
    lines.insert(1, "  ".join("-" * w for w in widths))
    total_p = sum(r["params"] for r in rows)
    total_f = sum(r["flops"] for r in rows)
    ins = ", ".join(str(p) for p in graph.inputs)
    outs = ", ".join(str(p) for p in graph.outputs)
    lines += ["", f"inputs:  {ins}", f"outputs: {outs}",
              f"{len(rows)} operators, {total_p:,} parameters, {human(total_f)}FLOPs "
              f"per inference (backend: {graph.backend})"]
    if graph.fallbacks:
        lines.append("CPU fallbacks: " + ", ".join(f"{op.name} ({op.type})"
                                                   for op in graph.fallbacks))
    return "\n".join(lines)
