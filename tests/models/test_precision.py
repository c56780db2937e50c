"""The accuracy contract of precision="tf32" and "fp16" (kuiper/DESIGN.md, section "Precision
and its accuracy contract") on the benchmark models of the zoo, end to end on OpenCL.

For each model and precision, Kuiper's output is compared with PyTorch's float32 output:

    error = max |y - y_fp32| / max |y_fp32|        (relative to the output's scale)

and must stay within the precision's stated bound, BOUNDS below. It is also set beside PyTorch
computing at the same precision, "torch_same": on a CUDA GPU, PyTorch itself (TF32 allowed for
matmuls and cuDNN; `model.half()` for fp16). Without one (this CPU-only machine), PyTorch's CPU
has no TF32, so the reference is emulated: the weights and the inputs of every convolution and
linear layer are rounded to TF32 (nearest, ties away: what cvt.rna does) by forward hooks, sums
in float32, which is what TF32 tensor cores compute (nn.MultiheadAttention: its weights and
inputs rounded, its attention output into the out-projection not). fp16 runs `model.half()` on
the CPU, which PyTorch supports: everything in half, norms and softmax included. Kuiper keeps
those in float32 (plan_precision.py), so its error must not be larger than PyTorch's at the
same precision by more than SAME_PRECISION_FACTOR.

Where the device has no tensor cores (PoCL here), the model runs with the emulated tensor-core
kernels (`emulated_tensor_cores()`: the same gemm_mma kernel, each mma done in float arithmetic
on the same fragments), so the test measures Kuiper's reduced precision, not fp32 in disguise;
on an NVIDIA GPU whose probe passed, the real ones. Each test prints its numbers (pytest -s).
"""

from __future__ import annotations

import contextlib
import copy

import numpy as np
import pytest
import torch

import kuiper
from kuiper.core.precision import round_tf32
from kuiper.layers.opencl_gemm import mma_sets
from kuiper.opencl.device.tensor_cores import tensor_cores
from kuiper.testing import assert_close, tensor_cores_preferred
from tests.conftest import opencl_available
from tests.models import zoo
from tests.models.common import image, torch_outputs

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not opencl_available(), reason="no OpenCL device")]

# The contract: max |y - y_fp32| <= BOUNDS[precision] * max |y_fp32|, per output. TF32 and half
# both keep 10 bits of mantissa (a relative rounding of 2^-11 = 4.9e-4 per input); through
# 20 to 50 layers, batch norms folded into the weights, the errors measured here (emulated,
# PoCL) go from 2.2e-3 of the output's scale (ResNet-18) to 2.1e-2 (MobileNetV2, whose
# PyTorch at the same precision is off by 2.8e-2): the bound leaves a margin for the GPU's own
# order of additions and for other seeds. kuiper/DESIGN.md, section 7, states the same.
BOUNDS = {"tf32": 5e-2, "fp16": 5e-2}
# Kuiper's error may exceed PyTorch's at the same precision by at most this factor (plus
# 1e-3 of the scale): both round the same inputs, in other orders.
SAME_PRECISION_FACTOR = 3.0

CLASSIFIER_SHAPE = (1, 3, 64, 64)     # as tests/models/test_classifiers.py exports them
UNET_SHAPE = (1, 3, 64, 48)           # tests/models/test_unet.py
YOLO_SHAPE = (1, 3, 320, 320)         # tests/models/test_yolo.py
VIT_SHAPE = (1, 3, 32, 32)            # tests/models/test_vit.py


def randn(*shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(0))


def rand(*shape: int) -> torch.Tensor:
    return torch.rand(*shape, generator=torch.Generator().manual_seed(0))


# name: (the export's name in the other model tests, class, example, input maker); the same
# names and examples, so that a KUIPER_EXPORTS folder made by those tests serves these
MODELS = {
    "resnet18": ("resnet18", zoo.ResNet18, lambda: randn(*CLASSIFIER_SHAPE),
                 lambda rng: image(rng, *CLASSIFIER_SHAPE)),
    "mobilenet_v2": ("mobilenet_v2", zoo.MobileNetV2, lambda: randn(*CLASSIFIER_SHAPE),
                     lambda rng: image(rng, *CLASSIFIER_SHAPE)),
    "unet": ("unet", zoo.UNet, lambda: randn(*UNET_SHAPE), lambda rng: image(rng, *UNET_SHAPE)),
    "yolov5s": ("yolo_320", zoo.YoloV5Small, lambda: rand(*YOLO_SHAPE),
                lambda rng: rng.random(YOLO_SHAPE, dtype="float32")),
    "vit": ("vit_tiny", zoo.ViTTiny, lambda: randn(*VIT_SHAPE),
            lambda rng: image(rng, *VIT_SHAPE)),
}


@pytest.fixture(scope="module", params=list(MODELS))
def model(request, export_model):
    export_name, cls, example, make_input = MODELS[request.param]
    module = zoo.make(cls, example())
    return request.param, module, export_model(export_name, module, example()), make_input


@pytest.fixture(scope="module")
def device_tensor_cores():
    from kuiper.opencl.device.runtime import OpenCLRuntime

    return tensor_cores(OpenCLRuntime.shared().device)


def kuiper_run(param, inputs, precision: str, device_tensor_cores) -> tuple[list, str]:
    """The model's outputs on OpenCL at `precision`, and what ran: the real tensor cores
    where the probe found them, else their emulation; preferred by the cost model, so that the
    contract is measured on them (on these small layers it may rightly pick portable sets)."""
    real = precision in device_tensor_cores
    with contextlib.nullcontext() if real else mma_sets.emulated_tensor_cores(), \
            tensor_cores_preferred():
        graph = kuiper.load(param, backend="opencl", precision=precision)
        outputs = [np.asarray(o) for o in graph.forward(*inputs)]
        rows = [getattr(op.layer, "computes", None) for op in graph.order]
    on_cores = sum(1 for c in rows if c and c.startswith(precision))
    assert on_cores > 0, f"no layer computed in {precision}: {rows}"
    return outputs, f"{'tensor cores' if real else 'emulated tensor cores'} ({on_cores} layers)"


# --- PyTorch at the same precision ----------------------------------------------------------

GEMM_MODULES = (torch.nn.Conv1d, torch.nn.Conv2d, torch.nn.Conv3d, torch.nn.ConvTranspose1d,
                torch.nn.ConvTranspose2d, torch.nn.ConvTranspose3d, torch.nn.Linear,
                torch.nn.MultiheadAttention)


def tf32_tensor(t: torch.Tensor) -> torch.Tensor:
    if not t.is_floating_point():
        return t
    return torch.from_numpy(round_tf32(t.detach().numpy()))


def emulated_tf32_model(module: torch.nn.Module) -> torch.nn.Module:
    """A copy of `module` computing its convolutions and linear layers as TF32 tensor cores do:
    weights and inputs rounded to TF32, float32 sums."""
    model = copy.deepcopy(module)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, GEMM_MODULES):
                for name, p in m.named_parameters(recurse=isinstance(m,
                                                                     torch.nn.MultiheadAttention)):
                    if "weight" in name:
                        p.copy_(tf32_tensor(p))
                m.register_forward_pre_hook(
                    lambda _m, args: tuple(tf32_tensor(a) if isinstance(a, torch.Tensor) else a
                                           for a in args))
    return model


def torch_same_precision(module: torch.nn.Module, inputs, precision: str) -> tuple[list, str]:
    """PyTorch's outputs at `precision`, and how they were computed (module docstring)."""
    if torch.cuda.is_available():
        model = copy.deepcopy(module).cuda().eval()
        tensors = [torch.from_numpy(x).cuda() for x in inputs]
        old = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
        try:
            if precision == "fp16":
                model, tensors = model.half(), [t.half() for t in tensors]
            else:
                torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
            with torch.no_grad():
                out = model(*tensors)
        finally:
            torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = old
        outs = out if isinstance(out, (tuple, list)) else (out,)
        how = "torch cuda, TF32 on" if precision == "tf32" else "torch cuda, model.half()"
        return [o.float().cpu().numpy() for o in outs], how
    if precision == "tf32":
        return (torch_outputs(emulated_tf32_model(module), inputs),
                "torch cpu, conv/linear inputs and weights rounded to TF32 (emulated)")
    half = copy.deepcopy(module).half()
    with torch.no_grad():
        out = half(*[torch.from_numpy(x).half() for x in inputs])
    outs = out if isinstance(out, (tuple, list)) else (out,)
    return [o.float().numpy() for o in outs], "torch cpu, model.half()"


def relative_error(actual: np.ndarray, reference: np.ndarray) -> float:
    scale = float(np.abs(reference).max())
    return float(np.abs(actual.astype(np.float64) - reference).max()) / max(scale, 1e-30)


@pytest.mark.parametrize("precision", ["tf32", "fp16"])
def test_accuracy_contract(model, precision, device_tensor_cores, rng):
    name, module, param, make_input = model
    inputs = [make_input(rng)]
    fp32 = torch_outputs(module, inputs)
    ours, how = kuiper_run(param, inputs, precision, device_tensor_cores)
    theirs, their_how = torch_same_precision(module, inputs, precision)
    for k, (y, t, e) in enumerate(zip(ours, theirs, fp32)):
        assert np.isfinite(y).all(), f"{name} {precision}: output {k} is not finite"
        err, torch_err = relative_error(y, e), relative_error(t, e)
        print(f"\n{name} {precision} output {k}: kuiper {err:.2e} ({how}); torch "
              f"{torch_err:.2e} ({their_how}); bound {BOUNDS[precision]:.0e}")
        assert err <= BOUNDS[precision], (
            f"{name} at {precision}, output {k}: max |y - y_fp32| is {err:.3g} of the output's "
            f"scale, over the contract's {BOUNDS[precision]:g} ({how})")
        assert err <= SAME_PRECISION_FACTOR * torch_err + 1e-3, (
            f"{name} at {precision}, output {k}: {err:.3g} of the scale against PyTorch's own "
            f"{torch_err:.3g} at the same precision ({their_how})")


def test_fp32_stays_exact_to_float32(model, rng):
    """The default is unchanged: precision='fp32' meets the float32 model tests' tolerance,
    and no layer computes in anything else (the tensor cores are not even offered)."""
    name, module, param, make_input = model
    inputs = [make_input(rng)]
    graph = kuiper.load(param, backend="opencl", precision="fp32")
    for k, (y, e) in enumerate(zip(graph.forward(*inputs), torch_outputs(module, inputs))):
        assert_close(y, e, what=f"{name} at fp32, output {k}")
    assert {getattr(op.layer, "computes", "fp32") for op in graph.order} == {"fp32"}
