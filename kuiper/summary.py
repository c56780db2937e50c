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


def operator_rows(graph: RuntimeGraph) -> list[dict]:
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


def summarize(graph: RuntimeGraph) -> str:
    rows = operator_rows(graph)
    fallback = {op.name for op in graph.fallbacks}
    header = ("operator", "type", "output", "params", "FLOPs")
    table = [header] + [(r["name"], r["type"] + (" *" if r["name"] in fallback else ""),
                         r["output"], f"{r['params']:,}", human(r["flops"])) for r in rows]
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    right = (False, False, False, True, True)  # numbers line up on their last digit

    def line(row) -> str:
        return "  ".join(cell.rjust(w) if r else cell.ljust(w)
                         for cell, w, r in zip(row, widths, right)).rstrip()

    lines = [line(row) for row in table]
    lines.insert(1, "  ".join("-" * w for w in widths))
    total_p = sum(r["params"] for r in rows)
    weight_bytes = sum(int(a.nbytes) for op in graph.operators for a in op.attributes.values())
    total_f = sum(r["flops"] for r in rows)
    ins = ", ".join(str(p) for p in graph.inputs)
    outs = ", ".join(str(p) for p in graph.outputs)
    lines += ["", f"inputs:  {ins}", f"outputs: {outs}",
              (f"{len(rows)} operators, {total_p:,} parameters ({human(weight_bytes)}B of "
               f"weights), {human(total_f)} FLOPs per inference (backend: {graph.backend})")]
    if rows:
        lines.append(f"by type: {type_breakdown(rows)}")
    if graph.fallbacks:
        lines.append("* no OpenCL layer, runs on the CPU: " + ", ".join(
            f"{op.name} ({op.type})" for op in graph.fallbacks))
    return "\n".join(lines)
