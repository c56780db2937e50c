"""Linear on OpenCL: the GEMM of clkernels/gemm.h (one launch, two for a split-K set).

The input's leading axes are the GEMM's rows, so `x (rows, in) @ W^T` needs no reshaping on the
device. The weight's layout depends on the kernel that reads it:
- PyTorch's (out, in), read transposed (clkernels/linear.cl sets TRANS_B), for a few rows
  (gemv.h reads each output's weights as one contiguous dot product) and for F.linear, whose
  weight is only known when the graph runs;
- (in, out), transposed once at bind time, for more than GEMV_MAX_ROWS rows. On a CPU device
  gemm_blocked.h loads a row of B as one float8/float16 vector, and with B stored (out, in) it
  has to gather those values one by one instead: ConvNeXt's 1x56x56x96 -> 384 layers took 12
  ms each that way under PoCL (19 GFLOP/s), against ~1.5 ms for a convolution's GEMM of the
  same size. gemm_blocked then reads it in strips of BLOCK_N columns, each one contiguous run
  (`stored_weight`, layers/opencl_gemm/launch.py, says what that saves). On a GPU gemm_tiled.h's
  float4 loads of B run along the output columns and land in local memory as they are: on an
  NVIDIA H200, transformer layers (128-6304 rows, 384-3072 wide) ran 0-25% faster that way at
  their best parameter set (197 x 1152 x 384: 20.4 against 24.4 us), 4% slower on one shape
  of ten.
The bias and a fused epilogue (activation, residual add) are applied as the results are
stored. The launch is bound by `linear_gemm_launches` (layers/opencl_gemm/launch.py), like the
convolutions' GEMM, with the parameter set that `kuiper tune` measured fastest for this shape,
else the cost model's (layers/opencl_gemm/selection.py). On a GPU that set may split K
(clkernels/gemm_split_k.h): a transformer's layers at a few hundred tokens have too few output
tiles to fill the device, so K is cut in slices computed side by side into a scratch buffer
(`workspace_shapes`), and a second launch adds them with the bias and the epilogue.
Under precision tf32 / fp16 (the plan's, kuiper/passes/plan_precision.py) the tensor-core GEMM
(gemm_mma.h) competes where the device has it, and fp16 stores a weight attribute as half
(F.linear's weight, an input, stays the graph's float32). The fp32 sets stay candidates at
every precision, the split-K ones included: a split set computes in fp32 on gemm_tiled, reading
a half weight as every gemm_tiled set does; a tensor-core set never splits K. The precision is
part of the choice (`choose`), so `workspace_shapes` and `bind` agree on the set, hence on the
scratch buffer.
"""

from __future__ import annotations

import numpy as np

from kuiper.core.registry import register
from kuiper.layers.cpu import linear
from kuiper.layers.opencl_base import OpenCLLayer
from kuiper.layers.opencl_gemm.launch import (
    WeightBuffers,
    linear_gemm_launches,
    split_workspace,
    stored_weight,
    weight_dtype,
    weight_stored_transposed,
)
from kuiper.layers.opencl_gemm.parameter_sets import computes_in
from kuiper.layers.opencl_gemm.selection import select_gemm


@register(backend="opencl")
class Linear(WeightBuffers, OpenCLLayer, linear.Linear):
    epilogue_in_kernel = True
    splits_k = True   # binds split-K sets (linear_gemm_launches): `kuiper tune` times them too
    reduced_precision = True   # workspace_shapes and bind take precision= (the plan's)
    algorithm: str = ""
    algorithm_params: dict | None = None
    algorithm_reason: str = ""
    computes: str = "fp32"      # what the bound kernels compute in (`kuiper info`)

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

    def choose(self, in_specs, out_specs, precision: str = "fp32") -> tuple[dict, str]:
        """(parameter set, reason) for these shapes at this precision: the same answer for
        `workspace_shapes` and the `bind` that follows it (select_gemm is deterministic)."""
        rows, n_out, n_in, _, _, trans_b = self.gemm_problem(in_specs, out_specs)
        return select_gemm(self.runtime.device, rows, n_out, n_in, trans_b=trans_b,
                           packed_b=not trans_b, precision=precision, split=True)

    def workspace_shapes(self, in_specs, out_specs, *, precision="fp32"):
        rows, n_out, n_in = self.gemm_shape(in_specs, out_specs)
        if rows == 0 or n_out == 0:
            return []
        params, _ = self.choose(in_specs, out_specs, precision)
        return split_workspace(params, rows, n_out, n_in)

    def bind(self, inputs, outputs, in_specs, out_specs, *, epilogue=None, residual=None,
             workspaces=(), precision="fp32"):
        rows, n_out, n_in, _, _, trans_b = self.gemm_problem(in_specs, out_specs)
        self.launches = []
        if rows == 0 or n_out == 0:
            return
        params, reason = self.choose(in_specs, out_specs, precision)
        self.algorithm, self.algorithm_params, self.algorithm_reason = "gemm", params, reason
        # a weight attribute is stored as the precision says (half under fp16); an input as is
        dtype = weight_dtype(precision) if self.weight is not None else np.float32
        options = [f"-DTRANS_B={int(trans_b)}"]
        stored = None
        if not trans_b:   # only for a weight attribute: W^T, in strips for gemm_blocked
            stored, options = stored_weight(self.weight, True, params, dtype)
        w, b = self.weight_buffers(inputs, weight=stored, dtype=dtype)
        half = dtype == np.float16
        self.computes = computes_in(params, half_weight=half)
        residual = residual.data if residual is not None else None
        self.launches = linear_gemm_launches(self, rows, n_out, n_in, inputs[0].data, w,
                                             outputs[0].data, b, params, epilogue=epilogue,
                                             residual=residual, options=options,
                                             workspaces=workspaces, half_b=half)
