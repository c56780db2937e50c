"""The NumPy executor: run layers in topological order, freeing values after their last use."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from kuiper.graph import Observer, RuntimeGraph


class CPUExecutor:
    def __init__(self, graph: "RuntimeGraph"):
        self.graph = graph
        self.steps = [op for op in graph.order if op.layer is not None]
        keep = {o.name for o in graph.output_operands}
        # How many times each operand will still be read; at zero its array can be dropped,
        # which keeps peak memory near the widest point of the graph rather than its sum.
        self.uses = {}
        for op in self.steps:
            for operand in op.inputs:
                self.uses[operand.name] = self.uses.get(operand.name, 0) + 1
        for name in keep:
            self.uses[name] = self.uses.get(name, 0) + 1

    def run(self, inputs: list[np.ndarray], observer: "Observer | None" = None) -> list:
        graph = self.graph
        values: dict[str, object] = {}
        for op, x in zip(graph.input_ops, inputs):
            values[op.outputs[0].name] = x
        remaining = dict(self.uses)
        for op in self.steps:
            args = [values[o.name] for o in op.inputs]
            start = time.perf_counter()
            outs = op.layer.forward(args)
            if observer is not None:
                observer(op, list(outs), time.perf_counter() - start)
            for operand, value in zip(op.outputs, outs):
                values[operand.name] = value
            for operand in op.inputs:
                remaining[operand.name] -= 1
                if remaining[operand.name] == 0:
                    values.pop(operand.name, None)
        return [values[o.name] for o in graph.output_operands]
