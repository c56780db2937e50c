"""Data-dependent sizes on the OpenCL backend (kuiper/core/dynamic_shapes.py says what they are).

Everything else in an OpenCL graph is allocated and bound once per input shape. An operand
whose size depends on the values (masked_select's output) cannot be: the producer writes into a
buffer of the upper-bound size and reports, after a host wait, how much of it is used
(`layer.dynamic_outputs(queue)`, device arrays of the actual shapes). From there on the graph
runs on the host: every operator that reads such an operand is a `DynamicHostStep`, which infers
its shapes again from the actual arrays and runs the CPU layer. Those operators are listed in
`graph.fallbacks`, like any other host step.
"""

from __future__ import annotations

from kuiper.core.dynamic_shapes import reinfer
from kuiper.core.plugins import results
from kuiper.core.registry import cpu_base


class DynamicHostStep:
    """One operator run on the host with the actual (data-dependent) sizes of its inputs."""

    def __init__(self, op, layer, executor):
        cls = type(layer)
        self.op, self.executor = op, executor
        self.layer = cpu_base(cls).from_operator(op) if hasattr(layer, "bind") else layer

    def enqueue(self, queue, wait_for) -> list:
        ex = self.executor
        if wait_for:
            ex.runtime.cl.wait_for_events(list(wait_for))
        specs = [ex.graph.specs[o.name] for o in self.op.inputs]
        host = [ex._host(o.name) for o in self.op.inputs]
        reinfer(self.layer, host, specs)
        for operand, value in zip(self.op.outputs,
                                  results(self.op, self.layer, self.layer.forward(host))):
            ex.dynamic_values[operand.name] = value
        return []


def has_device_dynamic_outputs(layer) -> bool:
    """Does this OpenCL layer compute its data-dependent outputs on the device itself?"""
    return hasattr(layer, "dynamic_outputs") and hasattr(layer, "bind")
