"""plan_memory: the memory planner (kuiper/memory/), run last, on the final list of steps."""

from __future__ import annotations

from kuiper.passes.plan import PassReport, Plan


def plan_memory(graph, plan: Plan) -> PassReport:
    """Decide which operands share memory, from their lifetimes in the final plan (the steps
    that run, the operands they read: `plan.steps`, `plan.step_inputs`, `plan.resolve`).

    The planner lives in kuiper/memory/: its `plan_memory(graph, plan)` sets `plan.memory` and
    returns this pass's PassReport. Until that package exists, this pass reports that it is
    not available and every operand keeps its own memory."""
    try:
        from kuiper import memory
    except ImportError:
        return PassReport("plan_memory", "not available (kuiper/memory/ is not built yet): "
                          "every operand has its own memory")
    planner = getattr(memory, "plan_memory", None)
    if planner is None:
        return PassReport("plan_memory", "not available (kuiper.memory has no "
                          "plan_memory(graph, plan)): every operand has its own memory")
    return planner(graph, plan)
