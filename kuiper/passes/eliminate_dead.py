"""eliminate_dead: operators none of whose outputs reach a graph output do not run."""

from __future__ import annotations

from kuiper.passes.fold_constants import _count
from kuiper.passes.plan import PassReport, Plan


def eliminate_dead(graph, plan: Plan) -> PassReport:
    """Walk back from the graph outputs: an operator is live when one of its outputs is read by
    a live operator or is a graph output. The others are dead: pnnx leaves such operators in a
    model (a `torch.max` whose values and indices are both unused, the parts of an `unbind`
    that nobody reads after an edit), and running them only costs time and memory.

    A live operator with some unused outputs (torch.max's values when only the indices are
    used) still runs for the others; the report counts those outputs too."""
    live = {plan.resolve(name) for name in plan.outputs}
    for op in reversed(plan.order):
        if op.name in plan.folded or not plan.runs(op):
            continue
        if any(o.name in live for o in op.outputs):
            live.update(plan.step_inputs(op))
        else:
            plan.dead.add(op.name)
    plan.unavailable.update(o.name for op in plan.order if op.name in plan.dead
                            for o in op.outputs)
    dead = [op for op in plan.order if op.name in plan.dead]
    unused = [f"{o.name} of {op.name} ({op.type})" for op in plan.order
              if plan.runs(op) and op.name not in plan.folded
              for o in op.outputs if o.name not in live]
    summary = f"{_count(len(dead))} removed (no output reaches a graph output)"
    if unused:
        summary += f"; {len(unused)} unused output(s) of operators that still run"
    details = [f"{op.name} ({op.type})" for op in dead]
    details += [f"unused: {u}" for u in unused]
    return PassReport("eliminate_dead", summary, details, len(dead))
