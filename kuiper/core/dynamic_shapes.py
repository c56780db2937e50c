"""Data-dependent shapes: operators whose output size depends on the input *values*.

`torch.masked_select(x, mask)` returns as many elements as the mask has True values, and
`torch.arange(x[0])` as many as x[0] says: no amount of shape inference knows that before the
model runs. Such a layer's `infer` returns a spec with `dynamic=True` whose shape is an upper
bound (masked_select: every element selected), or 0 elements when there is none (arange), and
the graph marks every operand computed from it dynamic too (kuiper/graph/runtime_graph.py,
`_infer`).

The executors then do one extra thing for the operators that *read* a dynamic operand: before
running one, they infer its shapes again from the actual arrays (`reinfer`), so that whatever
the layer worked out from its input shapes (an axis, a broadcast shape) matches this run. On the
OpenCL backend those readers run on the host, after a wait for the device (see
kuiper/opencl/execution/executor.py): a data-dependent size is one of the few reasons to sync
mid-graph.
`kuiper info` marks dynamic outputs with `<=` before their (upper bound) shape.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from kuiper.core.tensor_spec import TensorSpec


def dynamic_readers(order, specs) -> set[str]:
    """Names of the operators that read at least one dynamic operand."""
    return {op.name for op in order if op.layer is not None
            and any(specs[o.name].dynamic for o in op.inputs)}


def reinfer(layer, values: Sequence[Any], specs: Sequence[TensorSpec]) -> None:
    """Run `layer.infer` again on the actual shapes of `values` (build-time constants keep
    their spec), so the layer's state matches this run's data-dependent sizes."""
    actual = [spec if spec.known else TensorSpec.of(np.shape(v), np.asarray(v).dtype)
              for v, spec in zip(values, specs)]
    layer.infer(actual)
