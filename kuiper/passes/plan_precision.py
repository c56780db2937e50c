"""plan_precision: which operators compute their matrix products in reduced precision.

`kuiper.load(..., precision="tf32" | "fp16")` asks for the tensor cores' precisions (the
default, "fp32", changes nothing). This pass decides per operator, and writes the decision into
the plan (`plan.precisions`, `plan.precision_of(op)`), which the executor hands to each layer
as `bind(..., precision=)` (and `workspace_shapes(..., precision=)`: a convolution's algorithm,
hence its scratch, depends on it):

- operators whose layer class sets `reduced_precision` take it: the GEMM-based ones, Linear,
  the convolutions (1-D to 3-D, through their GEMMs), the transposed convolutions and
  nn.MultiheadAttention's projections. Their products accumulate in float32 either way; only
  the inputs of each multiply are rounded (TF32: 10 bits of mantissa; FP16: 10 bits and
  half's range, the weight also stored as half);
- everything else stays fp32: softmax, the norms, pooling, activations, elementwise
  arithmetic, matmul, the fused attention kernel. Those are the sensitive or memory-bound
  operators, where reduced precision costs accuracy and buys no speed.

The layer then does what its device allows: on a device whose probe found tensor cores
(kuiper/opencl/device/tensor_cores.py) the selector may pick gemm_mma; elsewhere the portable
kernels compute in fp32 (under fp16 with the weight stored as half on every OpenCL device).
`kuiper info --backend opencl` shows, per layer, what it computes in.

The cpu backend computes everything in float32 whatever is asked: NumPy has no tensor cores,
and rounding every operand by hand would make the CPU slower to imitate what is a speed-up
elsewhere. The pass says so in its report. (The OpenCL kernels' emulation of the tensor cores,
clkernels/gemm_mma.h, is how the CPU checks the reduced precisions: tests/models/
test_precision.py.)
"""

from __future__ import annotations

from kuiper.core.registry import is_kuipers
from kuiper.passes.plan import PassReport, Plan


def plan_precision(graph, plan: Plan) -> PassReport:
    """Record `graph.precision` for every running step whose layer declares
    `reduced_precision` (the module docstring says which and why)."""
    wanted = getattr(graph, "precision", "fp32")
    plan.precision = wanted
    if wanted == "fp32":
        return PassReport("plan_precision", "fp32 everywhere (precision='fp32', the default)")
    if graph.backend == "cpu":
        return PassReport("plan_precision", f"precision '{wanted}' asked, but the cpu backend "
                          "computes every operator in fp32 (NumPy has no tensor cores; load "
                          "with backend='opencl')")
    reduced, kept = [], 0
    for op in plan.steps:
        layer = op.layer
        if getattr(layer, "reduced_precision", False) and is_kuipers(type(layer)):
            plan.precisions[op.name] = wanted
            reduced.append(f"{op.name} ({op.type}): {wanted}")
        else:
            kept += 1
    summary = (f"{len(reduced)} GEMM-based operator{'' if len(reduced) == 1 else 's'} may "
               f"compute in {wanted} (tensor cores where the device has them, else fp32"
               f"{', weights stored as half' if wanted == 'fp16' else ''}); {kept} other"
               f"{'' if kept == 1 else 's'} stay fp32")
    return PassReport("plan_precision", summary, reduced, len(reduced))
