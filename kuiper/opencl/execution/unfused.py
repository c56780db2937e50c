"""A second binding of an OpenCL graph without its optimizing passes, made when first needed.

An observer (`kuiper compare`, `kuiper trace`) must see every operator's own output, and
`outputs=` may ask for a value the passes no longer keep (a convolution's raw output, now
written with its fused ReLU applied). The main binding cannot give those: its kernels were
bound with the epilogues in their stores, and its memory may be shared. So such a run uses
this second executor, bound to the graph's unoptimized plan (constant folding only) with its
own copies of the layers (a layer binds one set of arguments at a time). It is built lazily,
on the first such run, and dropped on a rebuild.
"""

from __future__ import annotations

import copy
from types import SimpleNamespace
from typing import Any

from kuiper.core.ir import operator_failure
from kuiper.core.plugins import call


def unoptimized_view(graph) -> Any:
    """What an executor reads of a graph, with the unoptimized plan and fresh layers."""
    specs = graph.specs
    order = []
    for op in graph.order:
        twin = copy.copy(op)  # same operands and parameters; a layer of its own
        if op.layer is not None:
            cls = type(op.layer)
            twin.layer = call(op, cls, "from_operator", cls.from_operator, op)
            try:  # layers keep what infer worked out (axes, geometry) for bind
                call(op, twin.layer, "infer", twin.layer.infer,
                     [specs[o.name] for o in op.inputs])
            except Exception as e:  # the same shapes were inferred once already
                raise operator_failure(op, "inferring shapes", e, specs) from e
        order.append(twin)
    return SimpleNamespace(order=order, specs=specs, input_ops=graph.input_ops,
                           output_operands=graph.output_operands, param_path=graph.param_path,
                           plan=graph.unoptimized_plan, passes=graph.passes, operands=
                           graph.operands)
