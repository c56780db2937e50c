"""Linear on OpenCL: one launch of the GEMM of clkernels/gemm.h.

The input's leading axes are the GEMM's rows, so `x (rows, in) @ W^T` needs no reshaping on the
device. The weight's layout depends on the kernel that reads it:
- PyTorch's (out, in), read transposed (clkernels/linear.cl sets TRANS_B), on GPUs, for a few
  rows (gemv.h reads each output's weights as one contiguous dot product) and for F.linear,
  whose weight is only known when the graph runs;
- (in, out), transposed once at bind time, on CPU devices for more than GEMV_MAX_ROWS rows:
  gemm_blocked.h loads a row of B as one float8/float16 vector, and with B stored (out, in) it
  has to gather those values one by one instead. ConvNeXt's 1x56x56x96 -> 384 layers took 12
  ms each that way under PoCL (19 GFLOP/s), against ~1.5 ms for a convolution's GEMM of the
  same size. gemm_blocked then reads it in strips of BLOCK_N columns, each one contiguous run
  (`stored_weight`, layers/opencl_gemm/launch.py, says what that saves).
The bias and a fused epilogue (activation, residual add) are applied as the results are
stored. The launch is bound by `weight_gemm_launch`
(layers/opencl_gemm/launch.py), like the convolutions' GEMM, with the parameter set that
`kuiper tune` measured fastest for this shape, else the cost model's
(layers/opencl_gemm/selection.py).
"""

from __future__ import annotations

from kuiper.core.registry import register
from kuiper.layers.cpu import linear
from kuiper.layers.opencl_base import OpenCLLayer
from kuiper.layers.opencl_gemm.launch import (
    BIAS_PER_COLUMN,
    WeightBuffers,
    stored_weight,
    weight_gemm_launch,
    weight_stored_transposed,
)
from kuiper.layers.opencl_gemm.selection import select_gemm


@register(backend="opencl")
class Linear(WeightBuffers, OpenCLLayer, linear.Linear):
    epilogue_in_kernel = True
    algorithm: str = ""
    algorithm_params: dict | None = None
    algorithm_reason: str = ""

    def gemm_shape(self, in_specs, out_specs) -> tuple[int, int, int]:
        """(rows, out_features, in_features): the GEMM's M, N, K."""
        n_out, n_in = self.weight_of(in_specs)
        rows = out_specs[0].numel // n_out if n_out else 0
        return rows, n_out, n_in

    def gemm_problem(self, in_specs, out_specs) -> tuple[int, int, int, int, bool, bool]:
        """(M, N, K, Z, trans_a, trans_b): select_gemm's and `kuiper tune`'s arguments, with
        trans_b False where bind stores the weight (in, out) (the module docstring says when)."""
        rows, n_out, n_in = self.gemm_shape(in_specs, out_specs)
        transposed_at_bind = (self.weight is not None
                              and weight_stored_transposed(self.runtime.device, rows))
        return rows, n_out, n_in, 1, False, not transposed_at_bind

    def bind(self, inputs, outputs, in_specs, out_specs, *, epilogue=None, residual=None):
        rows, n_out, n_in, _, _, trans_b = self.gemm_problem(in_specs, out_specs)
        self.launches = []
        if rows == 0 or n_out == 0:
            return
        params, reason = select_gemm(self.runtime.device, rows, n_out, n_in, trans_b=trans_b,
                                     packed_b=not trans_b)
        self.algorithm, self.algorithm_params, self.algorithm_reason = "gemm", params, reason
        options = [f"-DTRANS_B={int(trans_b)}"]
        stored = None
        if not trans_b:   # only for a weight attribute: W^T, in strips for gemm_blocked
            stored, options = stored_weight(self.weight, True, params)
        w, b = self.weight_buffers(inputs, weight=stored)
        residual = residual.data if residual is not None else None
        self.launches = [weight_gemm_launch(self, rows, n_out, n_in, inputs[0].data, 0, w, 0,
                                            outputs[0].data, 0, b, BIAS_PER_COLUMN,
                                            params=params, epilogue=epilogue,
                                            residual=residual, options=options)]
