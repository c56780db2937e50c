"""The `plan_memory` graph pass: the memory plan of the final list of steps.

The memory planner owns its pass; the graph's pipeline (kuiper/graph/pipeline.py) runs it last.

It runs last, once the other passes have decided which operators run and which operands are
aliases, and plans the graph's operands backend-neutrally (every operand its own tensor, bytes
unaligned), with the strategy the graph was loaded with (`kuiper.load(..., memory=...)`). Each
executor then plans again with what only it knows: the OpenCL one which outputs are device
views, the device's alignment, and the layers' workspaces (kuiper/opencl/execution/executor.py); the
CPU one which layers write into a given array (kuiper/cpu/arena.py). The pass's plan is what
`kuiper info --passes` reports.
"""

from __future__ import annotations

from kuiper.core.limits import format_bytes
from kuiper.memory.lifetimes import operand_lifetimes
from kuiper.memory.strategies import DEFAULT_STRATEGY, check_strategy, plan
from kuiper.passes.plan import PassReport


def graph_lifetimes(graph, steps_plan) -> list:
    """Lifetimes of the operands under a pass plan: its steps, what they read, its aliases."""
    aliases = {name: steps_plan.resolve(name) for name in steps_plan.aliases}
    return operand_lifetimes(steps_plan.steps, graph.specs,
                             [op.outputs[0].name for op in graph.input_ops],
                             [o.name for o in graph.output_operands], aliases,
                             steps_plan.step_inputs)


def plan_memory(graph, steps_plan):
    """Set `steps_plan.memory` to the plan of the graph's operands; the pass's report."""
    strategy = check_strategy(strategy_of(graph))
    tensors = graph_lifetimes(graph, steps_plan)
    result = plan(tensors, strategy)
    steps_plan.memory = result
    naive = sum(t.size for t in tensors)
    summary = (f"{strategy}: {short_bytes(result.total)} for {len(tensors)} operands "
               f"({result.ratio:.2f}x the lower bound of {short_bytes(result.lower_bound)}; "
               f"a buffer each: {short_bytes(naive)})")
    return PassReport("plan_memory", summary, changed=len(tensors))


def strategy_of(graph) -> str:
    """The strategy the graph's executor will use: the one asked for, else the one the graph
    says its backend uses by default (`graph.memory_strategy`: on an OpenCL GPU,
    greedy_in_order). This package never opens a device itself."""
    options = getattr(graph, "backend_options", {})
    if options.get("memory") is not None:
        return options["memory"]
    return getattr(graph, "default_memory_strategy", DEFAULT_STRATEGY)


def short_bytes(n: int) -> str:
    """'3.8 MiB': format_bytes without the exact count."""
    return format_bytes(n).split(" (")[0]
