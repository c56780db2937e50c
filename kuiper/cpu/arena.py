"""The CPU workspace: one NumPy arena, reused by every forward, a view per planned tensor.

A NumPy layer normally returns a fresh array, so every inference allocates (and frees) every
activation again. Layers whose class sets `writes_into = True` (convolution, linear ...) take
`forward(inputs, out=array)` and compute straight into a given array; for those, the executor
plans one arena at build time, with the same strategies as the OpenCL backend, and hands each
step its view of it. No allocation per forward for them; the others allocate as before.

What the plan must respect on the CPU, where views are not known in advance:

- any other layer's result *may* be a view of its inputs (a reshape, a slice, `x` itself), so
  its readers keep its inputs' arena bytes alive (`views`: output -> all inputs);
- graph outputs never live in the arena (a later forward would overwrite what the user holds):
  their producers get no `out=`, and the executor copies any returned array that shares the
  arena's memory (a reshape of an arena tensor).
"""

from __future__ import annotations

import numpy as np

from kuiper.memory.lifetimes import operand_lifetimes
from kuiper.memory.strategies import plan

ALIGNMENT = 64  # bytes: a cache line, so that two tensors never share one


class HostArena:
    """`out_for(op_name)`: the array a `writes_into` step computes into, or None."""

    def __init__(self, graph, schedule_plan, strategy: str):
        specs = graph.specs
        steps = schedule_plan.steps
        outputs = {schedule_plan.resolve(o.name) for o in graph.output_operands}
        views: dict[str, list[str]] = {name: [schedule_plan.resolve(name)]
                                       for name in schedule_plan.aliases}
        owned = {}  # operand name -> its step's operator name
        for op in steps:
            layer = op.layer
            spec = specs[op.outputs[0].name] if op.outputs else None
            if (getattr(layer, "writes_into", False) and len(op.outputs) == 1
                    and op.outputs[0].name not in outputs and spec is not None
                    and not spec.dynamic and not spec.known and spec.dtype.kind in "fc"):
                owned[op.outputs[0].name] = op.name
            else:  # its results may be views of what it reads
                for operand in op.outputs:
                    views.setdefault(operand.name, list(schedule_plan.step_inputs(op)))
        tensors = [t for t in operand_lifetimes(steps, specs,
                                                [op.outputs[0].name for op in graph.input_ops],
                                                outputs, views, schedule_plan.step_inputs)
                   if t.name in owned]
        self.strategy = strategy
        self.plan = plan(tensors, strategy, ALIGNMENT) if strategy != "naive" else None
        self.arena = np.empty(self.plan.total if self.plan else 0, np.uint8)
        self.outs: dict[str, np.ndarray] = {}
        for t in tensors if self.plan else ():
            spec = specs[t.name]
            start = self.plan.offsets[t.name]
            view = self.arena[start:start + t.size].view(spec.dtype).reshape(spec.shape)
            self.outs[owned[t.name]] = view

    @property
    def nbytes(self) -> int:
        return int(self.arena.nbytes)

    def out_for(self, op_name: str) -> np.ndarray | None:
        return self.outs.get(op_name)

    def detached(self, value):
        """`value`, copied if it shares the arena's memory (the next forward reuses it)."""
        if self.arena.size and isinstance(value, np.ndarray) and np.may_share_memory(
                value, self.arena):
            return value.copy()
        return value
