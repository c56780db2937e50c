"""Run one convolution algorithm (layers/opencl_conv/algorithms.py) on its own.

`run_algorithm` builds the ConvProblem and ConvOperands the way layers/opencl/conv2d.py does,
binds the algorithm on a bare OpenCL layer and enqueues its launches: the algorithm is checked
without the selector or the graph around it. `torch_reference` is what it must agree with,
`activation_epilogue` a fused epilogue with a real activation operator.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from kuiper.core import registry
from kuiper.core.ir import RuntimeOperator
from kuiper.layers.common import conv_geometry
from kuiper.layers.opencl_base import OpenCLLayer
from kuiper.layers.opencl_conv.algorithms import ALGORITHMS, ConvOperands, ConvProblem
from kuiper.opencl.device.runtime import OpenCLRuntime
from kuiper.opencl.device.vector_width import wide_vectors
from kuiper.passes.epilogue import Epilogue


def wide(algorithm: str, params: dict | None) -> bool:
    """Whether `algorithm` with `params` keeps 16-wide vectors: direct always (float16
    channels), the register blocks of Winograd (bm), implicit GEMM (vec_n) and gemm_blocked
    (BLOCK_N) above 8."""
    params = params or {}
    if algorithm == "direct":
        return True
    return max(params.get("bm", 0), params.get("vec_n", 0), params.get("BLOCK_N", 0)) > 8


def skip_where_it_cannot_run(algorithm: str, params: dict | None) -> None:
    """Skip, saying why, what the selector never gives this device: a 16-wide kernel where its
    compiler cannot build one (PoCL 3.0 on AMD Zen 4: kuiper/opencl/device/vector_width.py;
    the 8-wide sets still run there), or a GEMM parameter set `fits` refuses it."""
    import pytest

    device = OpenCLRuntime.shared().device
    if wide(algorithm, params) and not wide_vectors(device):
        pytest.skip(f"{algorithm} {params or ''}: 16-wide vectors, which "
                    f"{device.name.strip()}'s compiler cannot build")
    # a GEMM parameter set the selector would never give this device (parameter_sets.fits:
    # K-blocked and 6-row gemm_blocked sets on CPU devices only)
    from kuiper.layers.opencl_gemm import parameter_sets as gemm

    gemm_set = (params or {}).get("gemm", params)
    if (isinstance(gemm_set, dict) and gemm_set.get("kernel") in gemm.GEMM_KERNELS
            and not gemm.fits(gemm_set, device)):
        pytest.skip(f"{algorithm} {gemm.describe_params(gemm_set)} does not fit "
                    f"{device.name.strip()}: {gemm.why_it_cannot_run(gemm_set, device)}")


class BareLayer(OpenCLLayer):
    """An OpenCL layer with nothing of its own: it lends an algorithm kernels and buffers."""

    def __init__(self, runtime):
        super().__init__(RuntimeOperator("conv", "nn.Conv2d"))
        self.attach(runtime)


def pair(v) -> tuple[int, int]:
    return tuple(v) if isinstance(v, (tuple, list)) else (v, v)


def make_problem(x_shape, w_shape, stride=1, padding=0, dilation=1, groups=1,
                 padding_mode="zeros", precision="fp32") -> ConvProblem:
    n, c, h, w = x_shape
    cout, _, kh, kw = w_shape
    stride, dilation = pair(stride), pair(dilation)
    pads = [pair(p) for p in pair(padding)]
    out = [conv_geometry.conv_output_size(s, k, st, p, d)
           for s, k, st, p, d in zip((h, w), (kh, kw), stride, pads, dilation)]
    return ConvProblem(n=n, c=c, cout=cout, groups=groups, size=(1, h, w), kernel=(1, kh, kw),
                       out=(1, *out), stride=(1, *stride), dilation=(1, *dilation),
                       pads=((0, 0), *pads), padding_mode=padding_mode, precision=precision)


def activation_operator(op_type: str, **params) -> RuntimeOperator:
    """A real activation operator (`op_type`) with its OpenCL layer: what an epilogue fuses."""
    op = RuntimeOperator("act", op_type, params=dict(params))
    op.layer = registry.lookup(op_type, "opencl").from_operator(op)
    return op


def activation_epilogue(op_type: str, residual: bool = False, residual_first: bool = True,
                        **params) -> Epilogue:
    """An Epilogue whose activation is a real OpenCL activation layer (`op_type`)."""
    return Epilogue.around(activation=activation_operator(op_type, **params),
                           residual="res" if residual else None,
                           residual_first=residual_first, absorbed=("act",))


def run_algorithm(name: str, x: np.ndarray, w: np.ndarray, b: np.ndarray | None = None,
                  params: dict | None = None, epilogue: Epilogue | None = None,
                  residual: np.ndarray | None = None, weight_on_host: bool = True,
                  **geometry) -> np.ndarray:
    runtime = OpenCLRuntime.shared()
    skip_where_it_cannot_run(name, params)
    layer = BareLayer(runtime)
    problem = make_problem(x.shape, w.shape, **geometry)
    algorithm = ALGORITHMS[name]
    why = algorithm.unsupported(problem, runtime.device)
    assert why is None, f"{name} refuses {problem.key}: {why}"
    if params is None:
        params = algorithm.parameter_sets(problem, runtime.device)[0]
    _, oh, ow = problem.out
    x_dev = runtime.to_device(x.astype(np.float32))
    y_dev = runtime.empty((x.shape[0], w.shape[0], oh, ow))
    w_dev = runtime.to_device(w.astype(np.float32))
    b_dev = runtime.to_device(b.astype(np.float32)) if b is not None else None
    r_dev = runtime.to_device(residual.astype(np.float32)) if residual is not None else None
    tables = [runtime.to_device(conv_geometry.source_indices(length, pad, problem.padding_mode))
              for length, pad in zip(problem.size, problem.pads)]
    ops = ConvOperands(x=x_dev, y=y_dev, weight=w_dev.data,
                       bias=b_dev.data if b_dev is not None else None,
                       weight_host=w if weight_on_host else None,
                       bias_host=b, tables=[t.data for t in tables],
                       residual=r_dev.data if r_dev is not None else None, epilogue=epilogue,
                       workspaces=[runtime.empty(shape) for shape in algorithm.workspace_shapes(
                           problem, params, runtime.device, weight_is_input=not weight_on_host)])
    layer.launches = algorithm.bind(layer, problem, ops, params)
    assert layer.launches, f"{name} bound no launches"
    for event in layer.enqueue(runtime.queue, []):
        event.wait()
    return y_dev.get()


def torch_reference(x, w, b=None, stride=1, padding=0, dilation=1, groups=1,
                    padding_mode="zeros", activation=None, residual=None,
                    residual_first=True) -> np.ndarray:
    """F.conv2d in float64 (then the epilogue), the reference the algorithms must meet."""
    xt, wt = torch.from_numpy(x).double(), torch.from_numpy(w).double()
    bt = torch.from_numpy(b).double() if b is not None else None
    pads = [pair(p) for p in pair(padding)]
    if padding_mode != "zeros" or pads[0][0] != pads[0][1] or pads[1][0] != pads[1][1]:
        mode = {"zeros": "constant"}.get(padding_mode, padding_mode)
        xt = F.pad(xt, (*pads[1], *pads[0]), mode=mode)
        pads = [(0, 0), (0, 0)]
    y = F.conv2d(xt, wt, bt, pair(stride), (pads[0][0], pads[1][0]), pair(dilation), groups)
    r = torch.from_numpy(residual).double() if residual is not None else None
    if r is not None and residual_first:
        y = y + r
    if activation is not None:
        y = activation(y)
    if r is not None and not residual_first:
        y = y + r
    return y.numpy()


def term_sizes(x, w, stride=1, padding=0, dilation=1, groups=1) -> np.ndarray:
    """sum |w| |x| over each output's window: the scale of the terms an output adds up."""
    return torch_reference(np.abs(x), np.abs(w), None, stride, padding, dilation, groups)
