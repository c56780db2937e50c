"""`kuiper.load`: from a file to a graph ready to call (the front door re-exports it)."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from kuiper.core.errors import KuiperError, ModelFormatError
from kuiper.core.limits import Limits
from kuiper.graph import arguments, convert
from kuiper.graph.runtime_graph import RuntimeGraph


def load(param_path: str | os.PathLike, bin_path: str | os.PathLike | None = None, *,
         backend: str = "cpu", input_shapes: Sequence[Sequence[int]] | None = None,
         plugins: Sequence[str | os.PathLike] = (),
         params: Mapping[str, Mapping[str, Any]] | None = None,
         limits: Limits | None = None, passes: Sequence[str] | None = None,
         precision: str = "fp32", **backend_options: Any) -> RuntimeGraph:
    """Load a PNNX model and build it for `backend` ("cpu" or "opencl").

    `input_shapes` overrides the shapes the model was exported with (needed when the export has
    dynamic dims). `plugins` are modules or files with layers of your own (one, a list, or
    None for none), `params` parameters per type that the file lacks (kuiper/PLUGINS.md).
    `limits` caps the memory a model may ask for (kuiper/core/limits.py: one tensor, and all
    activations). OpenCL options: `device="0:1"` (as PYOPENCL_CTX), `out_of_order=True`,
    `profiling=True`. CPU option: `fuse=False` runs every activation and residual add as its
    own step instead of fusing it into the convolution, linear or matmul before it (the same
    as leaving out the fuse_epilogues pass); `threads=2` limits NumPy's BLAS to 2 threads
    while this graph runs.

    `passes`: the graph passes to run, by name (kuiper/graph/pipeline.py: fold_constants,
    eliminate_dead, eliminate_noops, fuse_attention, fuse_epilogues, plan_precision,
    plan_memory); None runs them all, and `graph.plan.describe()` says what each one changed.

    `precision`: "fp32" (the default: exact float32), "tf32" or "fp16". With the reduced ones
    the GEMM-based operators (linear, convolutions through their GEMMs, attention's projections)
    may compute on tensor cores with inputs rounded to TF32 / half and sums in float32, on an
    OpenCL device whose probe found them (kuiper/opencl/device/tensor_cores.py); fp16 also
    stores those weights as half on every OpenCL device (activations stay float32). Softmax,
    norms and everything else stay fp32; the cpu backend computes fp32 whatever is asked.
    kuiper/DESIGN.md states the error bounds.

    `with kuiper.load(...) as g:` (or `g.close()`) releases the weights and the device
    buffers. Inputs and outputs by name: kuiper/graph/named_io.py.

    An ONNX file or a TorchScript `.pt` is converted with pnnx first, at `input_shapes`, and
    the result cached (kuiper/graph/convert.py).

    An argument of the wrong type or value is an ArgumentError naming it
    (kuiper/graph/arguments.py).
    """
    param_path = arguments.path("param_path", param_path)
    input_shapes = arguments.input_shapes(input_shapes)
    options = dict(backend=backend, plugins=plugins, params=params, limits=limits,
                   passes=passes, precision=precision, **backend_options)
    if not convert.is_convertible(param_path):
        return _built(param_path, bin_path, input_shapes, options)
    if bin_path is not None:
        raise KuiperError(f"{param_path}: bin_path belongs to a .pnnx.param; an ONNX or "
                          "TorchScript file is converted whole (leave bin_path out)")
    converted, cached = convert.converted(param_path, input_shapes)
    try:
        return _built(converted, None, input_shapes, options)
    except ModelFormatError:
        if not cached:
            raise
    # The cache entry looked whole but its files do not parse (truncated or rewritten since
    # they were written): a cache is never trusted over the source, so convert once more.
    converted, _ = convert.converted(param_path, input_shapes, refresh=True)
    return _built(converted, None, input_shapes, options)


def _built(param_path, bin_path, input_shapes, options: dict[str, Any]) -> RuntimeGraph:
    graph = RuntimeGraph(param_path, bin_path, **options)
    graph.init()
    graph.build(input_shapes)
    return graph
