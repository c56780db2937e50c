"""`kuiper info --memory`: every strategy's plan beside the lower bound, and the workspace.

Reads what the executor recorded at build time (`executor.lifetimes`: the tensors it planned,
views already merged into their bases; `executor.workspaces`: the layers' scratch requests on
OpenCL) and plans them once per strategy, so the numbers compare the strategies on the very
tensors the backend allocates.
"""

from __future__ import annotations

from kuiper.core.table import format_table
from kuiper.memory.lifetimes import lower_bound
from kuiper.memory.plan_memory import short_bytes
from kuiper.memory.strategies import STRATEGIES, plan


def alignment_of(executor) -> int:
    runtime = getattr(executor, "runtime", None)
    return runtime.base_alignment if runtime is not None else 1


def strategy_in_use(executor) -> str | None:
    """The strategy the executor carried out: OpenCL says so (it may fall back to naive), the
    CPU executor's arena knows its own."""
    if hasattr(executor, "memory_strategy"):
        return executor.memory_strategy
    return getattr(getattr(executor, "arena", None), "strategy", None)


def memory_document(graph) -> dict:
    """The numbers of the memory table, as data (also `kuiper info --memory --json`)."""
    executor = graph.executor
    tensors = list(getattr(executor, "lifetimes", []))
    alignment = alignment_of(executor)
    bound = lower_bound(tensors, alignment)
    plans = []
    for name in STRATEGIES:
        p = plan(tensors, name, alignment)
        plans.append({"strategy": name, "bytes": p.total, "blocks": len(p.block_sizes),
                      "ratio": p.total / bound if bound else 1.0})
    workspaces = getattr(executor, "workspaces", None)
    needs = dict(getattr(workspaces, "needs", {}) or {})
    pooled = bool(getattr(workspaces, "pooled", False)) and not workspaces.naive
    return {"tensors": len(tensors), "alignment": alignment, "lower_bound": bound,
            "strategies": plans, "in_use": strategy_in_use(executor),
            "workspace": {"naive": sum(needs.values()),
                          "shared": workspaces.total if pooled else max(needs.values(),
                                                                         default=0),
                          "pooled": pooled,
                          "layers": sum(1 for n in needs.values() if n)}}


def memory_table(graph) -> str:
    doc = memory_document(graph)
    rows = [("strategy", "blocks", "activations", "bytes", "x lower bound", "")]
    for p in doc["strategies"]:
        mark = "<- in use" if p["strategy"] == doc["in_use"] else ""
        rows.append((p["strategy"], str(p["blocks"]), short_bytes(p["bytes"]),
                     f"{p['bytes']:,}", f"{p['ratio']:.2f}x", mark))
    rows.append(("lower bound", "", short_bytes(doc["lower_bound"]),
                 f"{doc['lower_bound']:,}", "1.00x", ""))
    lines = [f"\nmemory: {doc['tensors']} tensors of one inference, offsets aligned to "
             f"{doc['alignment']} bytes", format_table(rows, right=(1, 2, 3, 4))]
    lines.append("naive: a buffer per tensor; greedy_in_order: pooled buffers reused in "
                 "order;\ngreedy_by_size: one arena, largest tensors first; lower bound: the "
                 "most bytes alive at once")
    ws = doc["workspace"]
    if ws["layers"]:
        lines.append(f"workspace (layers' scratch, e.g. im2col columns, {ws['layers']} "
                     f"layers): {short_bytes(ws['naive'])} as a buffer each, "
                     f"{short_bytes(ws['shared'])} shared ("
                     + ("a buffer per rank of request size, no sub-buffers)" if ws["pooled"]
                        else "one scratch buffer)"))
    elif graph.backend != "opencl":
        arena = getattr(graph.executor, "arena", None)
        if arena is not None and arena.outs:
            lines.append(f"cpu arena: {short_bytes(arena.nbytes)} for the {len(arena.outs)} "
                         "operators that compute into a given array (writes_into); the others "
                         "allocate per forward")
        lines.append("workspace: none planned on the cpu backend (layers allocate their "
                     "scratch themselves)")
    else:
        lines.append("workspace: no layer asked for one")
    return "\n".join(lines)
