"""fold_constants: operators whose outputs are all known when the graph is built never run."""

from __future__ import annotations

from kuiper.passes.plan import PassReport, Plan


def fold_constants(graph, plan: Plan) -> PassReport:
    """Operators whose every output is known from shapes alone (a `pnnx.Attribute`, `size()`
    arithmetic in an expression, a reshape of a constant) are folded: shape inference already
    computed their values (`TensorSpec.value`), so no backend runs them. The CPU executor hands
    the values to the readers; the OpenCL one uploads the numeric ones once per build."""
    for op in plan.order:
        if op.outputs and all(graph.specs[o.name].known for o in op.outputs):
            plan.folded.add(op.name)
    folded = [op for op in plan.order if op.name in plan.folded]
    return PassReport("fold_constants", f"{_count(len(folded))} folded (known at build time)",
                      [f"{op.name} ({op.type})" for op in folded], len(folded))


def _count(n: int) -> str:
    return f"{n} operator{'' if n == 1 else 's'}"
