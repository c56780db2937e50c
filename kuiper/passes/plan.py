"""The plan the passes write and both executors carry out.

A `Plan` says, for one build of a graph (its operators in order, its shapes inferred), which
operators run and how: folded ones never run (their outputs are known constants), dead ones
and no-ops never run either, and fused ones are applied by the producer before them. What an
executor needs from it:

- `steps`: the operators that run, in order (an operator a pass replaced, by its
  replacement: `step(op)`);
- `resolve(name)`: the operand whose value `name` is (a no-op's output is its input, an
  absorbed activation's output is its producer's fused output);
- `step_inputs(op)`: the operands a step reads (its inputs, resolved, and the residual of its
  epilogue): what it waits for, and what must stay alive until it ran;
- `epilogues`: {producer name: Epilogue} (kuiper/passes/epilogue.py);
- `precision_of(op)`: where its GEMMs compute, "fp32", "tf32" or "fp16"
  (kuiper/passes/plan_precision.py);
- `serves(names)`: whether these operands keep their own values under this plan (a fused
  producer's raw output does not), else an executor runs `graph.unoptimized_plan`.

The plan is backend-neutral: no array, no kernel, only names.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class PassReport:
    """What one pass changed: a one-line summary with counts, and one line per operator."""

    name: str
    summary: str
    details: list[str] = field(default_factory=list)
    changed: int = 0


@dataclass
class Plan:
    order: list                      # the graph's operators with a layer, in execution order
    outputs: list[str]               # the graph outputs' operand names
    passes: tuple[str, ...] = ()     # the passes that ran, in order
    folded: set[str] = field(default_factory=set)     # operators with known outputs
    dead: set[str] = field(default_factory=set)       # operators whose outputs nobody reads
    noops: set[str] = field(default_factory=set)      # operators whose output is their input
    aliases: dict[str, str] = field(default_factory=dict)  # operand -> the operand it is
    epilogues: dict[str, Any] = field(default_factory=dict)  # producer name -> Epilogue
    absorbed: dict[str, str] = field(default_factory=dict)   # operator -> producer absorbing it
    # operator -> the operator that runs in its place (fuse_attention's kuiper.fused_attention)
    replaced: dict[str, Any] = field(default_factory=dict)
    unavailable: set[str] = field(default_factory=set)  # operands no step keeps the value of
    # operator -> "tf32" or "fp16" where its GEMMs may compute in reduced precision (the
    # others: fp32); `precision` is what the graph was loaded with
    precisions: dict[str, str] = field(default_factory=dict)
    precision: str = "fp32"
    reports: list[PassReport] = field(default_factory=list)
    memory: Any = None               # the memory planner's plan (kuiper/memory/), if any

    # --- what executors ask -----------------------------------------------------------------
    def resolve(self, name: str) -> str:
        """The operand holding the value of `name` (follows no-ops and fusions)."""
        while name in self.aliases:
            name = self.aliases[name]
        return name

    def runs(self, op) -> bool:
        return not (op.name in self.folded or op.name in self.dead or op.name in self.noops
                    or op.name in self.absorbed)

    def precision_of(self, op) -> str:
        """"fp32", "tf32" or "fp16": where the GEMMs of `op` (a step) compute."""
        return self.precisions.get(op.name, "fp32")

    def step(self, op):
        """The operator that runs for `op`: `op` itself, or what a pass put in its place."""
        return self.replaced.get(op.name, op)

    @property
    def steps(self) -> list:
        return [self.step(op) for op in self.order if self.runs(op)]

    def step_inputs(self, op) -> list[str]:
        """The operands `op` reads when it runs, resolved: its inputs, then its residual."""
        names = [self.resolve(o.name) for o in op.inputs]
        epilogue = self.epilogues.get(op.name)
        if epilogue is not None and epilogue.residual is not None:
            names.append(self.resolve(epilogue.residual))
        return names

    def serves(self, names: Iterable[str]) -> bool:
        """Whether every operand in `names` has its own value under this plan."""
        return not any(name in self.unavailable for name in names)

    @property
    def skips_anything(self) -> bool:
        """Whether an operator that would run without the passes does not (or is fused)."""
        return bool(self.dead or self.noops or self.absorbed or self.epilogues)

    def readers(self) -> dict[str, list]:
        """{resolved operand: the running operators that read it, once per read}."""
        readers: dict[str, list] = {}
        for op in self.steps:
            for name in self.step_inputs(op):
                readers.setdefault(name, []).append(op)
        return readers

    # --- what people read -------------------------------------------------------------------
    def describe(self, pipeline: Iterable[str] = ()) -> str:
        """Per pass, what it changed: `kuiper info --passes`. `pipeline`: every pass name in
        order, so that those that did not run show as off."""
        reports = {r.name: r for r in self.reports}
        names = list(pipeline) or list(reports)
        width = max(len(name) for name in names) if names else 1
        lines = []
        for name in names:
            report = reports.get(name)
            if report is None:
                lines.append(f"{name:<{width}}  off (not run)")
                continue
            lines.append(f"{name:<{width}}  {report.summary}")
            lines += [f"{'':<{width}}    {line}" for line in report.details]
        return "\n".join(lines)
