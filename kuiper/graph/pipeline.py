"""The graph-pass pipeline: which passes `RuntimeGraph.build` runs, in which order.

After shapes are inferred, each pass reads the graph and writes into one backend-neutral `Plan`
(kuiper/passes/plan.py) that both executors carry out:

    fold_constants    operators whose outputs are known at build time never run   kuiper/passes/
    eliminate_dead    operators whose outputs reach no graph output never run     kuiper/passes/
    eliminate_noops   identity reshapes, casts, copies, expands: output is input   kuiper/passes/
    fuse_attention    matmul, scale, softmax, matmul: one fused attention          kuiper/passes/
    fuse_epilogues    activation / residual add folded into the producer before    kuiper/passes/
    plan_precision    where GEMMs compute: fp32, or the tf32 / fp16 asked for      kuiper/passes/
    plan_memory       which operands share memory                                  kuiper/memory/

Each pass is a function `pass(graph, plan) -> PassReport` in its own module, named after it.
`kuiper.load(..., passes=[...])` runs only the named ones (`--no-pass NAME` on the command line
leaves one out), and `kuiper info --passes` prints every report. The list lives here, with the
graph that runs it, because the passes and the memory planner sit on the floor below.
"""

from __future__ import annotations

from collections.abc import Iterable

from kuiper.core.errors import KuiperError
from kuiper.memory.plan_memory import plan_memory
from kuiper.passes.eliminate_dead import eliminate_dead
from kuiper.passes.eliminate_noops import eliminate_noops
from kuiper.passes.fold_constants import fold_constants
from kuiper.passes.fuse_attention import fuse_attention
from kuiper.passes.fuse_epilogues import fuse_epilogues
from kuiper.passes.plan import Plan
from kuiper.passes.plan_precision import plan_precision

PIPELINE = (fold_constants, eliminate_dead, eliminate_noops, fuse_attention, fuse_epilogues,
            plan_precision, plan_memory)
PASS_NAMES = tuple(p.__name__ for p in PIPELINE)

def checked_names(names: Iterable[str] | None) -> tuple[str, ...]:
    """The passes to run, in pipeline order: all for None, else those named (each must be a
    pass: a KuiperError lists them)."""
    if names is None:
        return PASS_NAMES
    if isinstance(names, str):
        names = [names]
    names = list(names)
    unknown = [n for n in names if n not in PASS_NAMES]
    if unknown:
        raise KuiperError(f"unknown pass(es) {', '.join(map(repr, unknown))}: the passes are "
                          f"{', '.join(PASS_NAMES)}")
    return tuple(n for n in PASS_NAMES if n in names)


def without(names: Iterable[str], dropped: Iterable[str]) -> tuple[str, ...]:
    """`names` less `dropped` (each must be a pass), in pipeline order: --no-pass."""
    dropped = set(checked_names(list(dropped)))
    return tuple(n for n in checked_names(names) if n not in dropped)


def run(graph, names: Iterable[str] | None = None) -> Plan:
    """Run the passes `names` (all by default) on a built graph; the plan they wrote."""
    names = checked_names(names)
    plan = Plan(order=[op for op in graph.order if op.layer is not None],
                outputs=[o.name for o in graph.output_operands], passes=names)
    for step in PIPELINE:
        if step.__name__ in names:
            plan.reports.append(step(graph, plan))
    return plan
