"""precision="tf32" / "fp16" through the whole path: the plan_precision pass, the plan, the
executor's `bind(..., precision=)`, the selector, the layers (linear, convolutions through their
GEMMs, transposed convolutions), the tuning cache's keys, and `kuiper info`.

Where the device has no tensor cores (PoCL, Oclgrind) the layers run the emulated tensor-core
kernels (`emulated_tensor_cores()`), on a GPU whose probe passed the real ones; either way
their results carry the precision's rounding and are
checked against it: |y - y_fp32| <= (2 * 2^-11 + 4 K u) * op(|x|, |w|), the bound of
tests/opencl/mma_harness.py carried through a convolution (op(|x|, |w|) is the layer run on
absolute values, no bias). fp16 without tensor cores still stores the weight as half, on every
device: the result is then the float32 layer of the half-rounded weight.
"""

from __future__ import annotations

import contextlib
import gc

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import kuiper
from kuiper.core.errors import KuiperError
from kuiper.core.precision import U32, U_INPUT, round_half
from kuiper.layers.opencl_conv import algorithms
from kuiper.layers.opencl_conv.algorithms import ConvProblem
from kuiper.layers.opencl_gemm import mma_sets
from kuiper.opencl.device import tuning_cache
from kuiper.opencl.device.tensor_cores import tensor_cores
from kuiper.testing import assert_close, tensor_cores_preferred, write_operator_model
from tests.conftest import opencl_available

pytestmark = pytest.mark.skipif(not opencl_available(), reason="no OpenCL device")


def linear_case(rng):
    x = rng.standard_normal((3, 5, 37)).astype(np.float32)
    w = rng.standard_normal((29, 37)).astype(np.float32)
    b = rng.standard_normal(29).astype(np.float32)
    params = {"in_features": 37, "out_features": 29, "bias": True}
    return "nn.Linear", x, w, b, params, lambda x, w, b: F.linear(x, w, b), 37


def conv_case(rng):
    x = rng.standard_normal((2, 6, 9, 11)).astype(np.float32)
    w = rng.standard_normal((10, 3, 3, 3)).astype(np.float32)
    b = rng.standard_normal(10).astype(np.float32)
    params = {"in_channels": 6, "out_channels": 10, "kernel_size": (3, 3), "stride": (1, 1),
              "padding": (1, 1), "dilation": (1, 1), "groups": 2, "bias": True,
              "padding_mode": "zeros"}
    return "nn.Conv2d", x, w, b, params, lambda x, w, b: F.conv2d(x, w, b, 1, 1, 1, 2), 27


def conv_transpose_case(rng):
    x = rng.standard_normal((2, 6, 5, 7)).astype(np.float32)
    w = rng.standard_normal((6, 4, 3, 3)).astype(np.float32)
    b = rng.standard_normal(4).astype(np.float32)
    params = {"in_channels": 6, "out_channels": 4, "kernel_size": (3, 3), "stride": (2, 2),
              "padding": (1, 1), "output_padding": (1, 1), "dilation": (1, 1), "groups": 1,
              "bias": True}
    return ("nn.ConvTranspose2d", x, w, b, params,
            lambda x, w, b: F.conv_transpose2d(x, w, b, 2, 1, 1), 6 * 9)


CASES = {"linear": linear_case, "conv2d": conv_case, "conv_transpose2d": conv_transpose_case}


def needs_emulation(precision: str) -> bool:
    """Whether the tensor cores of `precision` must be emulated here (not on a GPU whose probe
    passed: there the tests run the real ones)."""
    from kuiper.opencl.device.runtime import OpenCLRuntime

    return precision != "fp32" and precision not in tensor_cores(OpenCLRuntime.shared().device)


def load_case(tmp_path, case, precision: str, emulate: bool | None = None):
    """Load and run a one-operator model at `precision`, the tensor cores preferred; `emulate`:
    None emulates the tensor cores only where the device has none."""
    op_type, x, w, b, params, _, _ = case
    path = write_operator_model(tmp_path, op_type, [x], params=params,
                                weights={"weight": w, "bias": b})
    if emulate is None:
        emulate = needs_emulation(precision)
    with mma_sets.emulated_tensor_cores() if emulate else contextlib.nullcontext(), \
            tensor_cores_preferred():
        with algorithms.forced("im2col_gemm"):   # a GEMM algorithm for the convolution
            graph = kuiper.load(path, backend="opencl", precision=precision)
            (y,) = graph.forward(x)
    layer = next(op.layer for op in graph.order if op.type == op_type)
    return graph, layer, np.asarray(y)


def torch_of(fn, x, w, b, dtype=torch.float64):
    return fn(*(torch.from_numpy(v).to(dtype) for v in (x, w, b))).numpy()


@pytest.mark.parametrize("precision", ["tf32", "fp16"])
@pytest.mark.parametrize("name", list(CASES))
def test_gemm_layers_compute_in_the_precision_asked(tmp_path, rng, name, precision):
    """A layer on the tensor cores computes in the precision asked, within its bound."""
    case = CASES[name](rng)
    _, x, w, b, _, fn, k = case
    graph, layer, y = load_case(tmp_path, case, precision)
    assert graph.plan.precision_of(next(op for op in graph.order if op.layer is layer)) \
        == precision
    assert layer.computes.startswith(precision), layer.computes
    assert layer.algorithm_params["kernel"] == "gemm_mma"
    if precision == "fp16":   # the weight attribute is stored as half
        assert layer.computes == "fp16, half weight"
    exact = torch_of(fn, x, w, b)
    scale = torch_of(fn, np.abs(x), np.abs(w), np.zeros_like(b))
    bound = (2 * U_INPUT + 4 * k * U32) * scale + 4 * U32 * np.abs(exact) + 1e-30
    assert (np.abs(y - exact) <= bound).all(), (
        f"{name} at {precision}: {np.abs(y - exact).max():.3g} over the precision's bound")
    # and it is not float32 in disguise: the rounding shows
    assert np.abs(y - exact).max() > 1e-5 * np.abs(exact).max()


@pytest.mark.parametrize("name", list(CASES))
def test_fp16_stores_weights_as_half_on_every_device(tmp_path, rng, name):
    """No tensor cores (none emulated either): the portable kernels read the half weight and
    compute in float32; the device holds half the weight's bytes."""
    case = CASES[name](rng)
    _, x, w, b, _, fn, _ = case
    from kuiper.opencl.device.runtime import OpenCLRuntime

    if tensor_cores(OpenCLRuntime.shared().device):
        pytest.skip("this device has tensor cores: fp16 runs on them (the test above)")
    graph, layer, y = load_case(tmp_path, case, "fp16", emulate=False)
    assert layer.computes == "fp32, half weight"
    assert layer._uploaded[0].dtype == np.float16
    assert_close(y, torch_of(fn, x, round_half(w), b), what=f"{name}, half weight")


def test_fp32_is_the_default_and_changes_nothing(tmp_path, rng):
    case = linear_case(rng)
    _, x, w, b, _, fn, _ = case
    graph, layer, y = load_case(tmp_path, case, "fp32")
    assert layer.computes == "fp32" and layer.algorithm_params["kernel"] != "gemm_mma"
    assert not graph.plan.precisions
    assert_close(y, torch_of(fn, x, w, b))


def test_a_weight_given_as_an_input_stays_float32(tmp_path, rng):
    """F.linear's weight comes from the graph: it is read as float32 (its mma converts it)."""
    x = rng.standard_normal((9, 19)).astype(np.float32)   # (4 rows or fewer: gemv)
    w = rng.standard_normal((11, 19)).astype(np.float32)
    path = write_operator_model(tmp_path, "F.linear", [x, w])
    with mma_sets.emulated_tensor_cores() if needs_emulation("fp16") else \
            contextlib.nullcontext(), tensor_cores_preferred():
        graph = kuiper.load(path, backend="opencl", precision="fp16")
        (y,) = graph.forward(x, w)
    layer = next(op.layer for op in graph.order if op.type == "F.linear")
    assert layer.computes == "fp16"
    exact = x.astype(np.float64) @ w.T.astype(np.float64)
    assert np.abs(y - exact).max() <= (2 * U_INPUT + 4 * 19 * U32) * (np.abs(x) @ np.abs(w.T)
                                                                        ).max()


def test_softmax_stays_fp32_and_the_pass_reports(tmp_path, rng):
    x = rng.standard_normal((3, 17)).astype(np.float32)
    path = write_operator_model(tmp_path, "F.softmax", [x], params={"dim": -1})
    graph = kuiper.load(path, backend="opencl", precision="tf32")
    assert not graph.plan.precisions
    report = graph.plan.describe()
    assert "plan_precision" in report and "0 GEMM-based operators" in report
    assert_close(graph.forward(x)[0], torch.softmax(torch.from_numpy(x), -1).numpy())


def test_the_cpu_backend_computes_fp32_and_says_so(tmp_path, rng):
    case = linear_case(rng)
    op_type, x, w, b, params, fn, _ = case
    path = write_operator_model(tmp_path, op_type, [x], params=params,
                                weights={"weight": w, "bias": b})
    graph = kuiper.load(path, backend="cpu", precision="fp16")
    assert not graph.plan.precisions
    assert "cpu backend computes every operator in fp32" in graph.plan.describe()
    plain = kuiper.load(path, backend="cpu")
    np.testing.assert_array_equal(graph.forward(x), plain.forward(x))


@pytest.mark.parametrize("precision", ["bf16", "FP16", 16, None])
def test_an_unknown_precision_is_a_kuiper_error_naming_the_choices(tmp_path, rng, precision):
    case = linear_case(rng)
    op_type, x, w, b, params, _, _ = case
    path = write_operator_model(tmp_path, op_type, [x], params=params,
                                weights={"weight": w, "bias": b})
    with pytest.raises(KuiperError, match="expected one of 'fp32', 'tf32', 'fp16'"):
        kuiper.load(path, precision=precision)


def test_an_observed_run_keeps_the_precision(tmp_path, rng):
    """An observer runs the unoptimized plan: it keeps the precision decision (it changes
    values, not which operators run), so `kuiper compare` sees what the model computes."""
    case = linear_case(rng)
    op_type, x, w, b, params, _, _ = case
    path = write_operator_model(tmp_path, op_type, [x], params=params,
                                weights={"weight": w, "bias": b})
    with mma_sets.emulated_tensor_cores() if needs_emulation("tf32") else \
            contextlib.nullcontext():
        graph = kuiper.load(path, backend="opencl", precision="tf32")
        plain = graph.forward(x)
        seen = {}
        observed = graph.forward(x, observer=lambda op, outs, s: seen.update({op.name: outs}))
    assert graph.unoptimized_plan.precisions == graph.plan.precisions == {"op0": "tf32"}
    np.testing.assert_array_equal(plain, observed)


def test_the_tuning_cache_keeps_winners_per_precision():
    problem = ConvProblem(1, 8, 16, 1, (1, 9, 9), (1, 3, 3), (1, 9, 9), (1, 1, 1), (1, 1, 1),
                          ((0, 0), (1, 1), (1, 1)))
    tf32 = ConvProblem(**{**problem.__dict__, "precision": "tf32"})
    assert tuning_cache.conv_key(problem) != tuning_cache.conv_key(tf32)
    assert tuning_cache.conv_key(tf32).endswith("_tf32")
    assert tuning_cache.gemm_key(64, 10, 32, 1, False, True) == "gemm:m64n10k32z1_tb"
    assert tuning_cache.gemm_key(64, 10, 32, 1, False, True, "fp16") == "gemm:m64n10k32z1_tb_fp16"


def test_the_device_memory_counter_counts_half_weights(tmp_path, rng):
    """The runtime's counter of device bytes (what `kuiper bench` reports as peak device
    memory) holds the weight at 2 bytes a value under fp16, 4 under fp32."""
    from kuiper.opencl.device.runtime import OpenCLRuntime

    case = linear_case(rng)
    op_type, x, w, b, params, _, _ = case
    path = write_operator_model(tmp_path, op_type, [x], params=params,
                                weights={"weight": w, "bias": b})
    runtime = OpenCLRuntime.shared()
    held, stored = {}, {}
    for precision in ("fp32", "fp16"):
        gc.collect()   # buffers of earlier tests, freed now rather than while we count
        before = runtime.allocated_bytes
        graph = kuiper.load(path, backend="opencl", precision=precision)
        gc.collect()
        held[precision] = runtime.allocated_bytes - before
        # values of the weight as stored: W^T in gemm_blocked's strips is padded to whole strips
        layer = next(op.layer for op in graph.order if op.type == op_type)
        stored[precision] = layer._uploaded[0].size
        graph.close()
    assert stored["fp32"] == stored["fp16"] >= w.size
    assert held["fp32"] - held["fp16"] == stored["fp16"] * 2


@pytest.mark.parametrize("command", ["info", "run", "bench", "compare", "tune"])
def test_every_command_that_loads_a_model_takes_precision(command):
    from kuiper.cli.main import build_parser

    args = build_parser().parse_args([command, "model.pnnx.param", "--precision", "fp16"])
    assert args.precision == "fp16"
    assert build_parser().parse_args([command, "model.pnnx.param"]).precision == "fp32"


def test_kuiper_info_shows_the_plan_and_what_each_layer_computes_in(tmp_path, rng, capsys):
    from kuiper.cli.main import main

    case = linear_case(rng)
    op_type, x, w, b, params, _, _ = case
    path = write_operator_model(tmp_path, op_type, [x], params=params,
                                weights={"weight": w, "bias": b})
    assert main(["info", path, "--backend", "opencl", "--precision", "fp16", "--passes"]) == 0
    out = capsys.readouterr().out
    assert "plan_precision   1 GEMM-based operator may compute in fp16" in out
    assert "op0 (nn.Linear): fp16" in out
    assert "computes in" in out and "half weight" in out
    assert main(["info", path, "--precision", "tf32", "--passes"]) == 0
    assert "the cpu backend computes every operator in fp32" in capsys.readouterr().out


# --- split-K (clkernels/gemm_split_k.h) meets the precisions: a linear layer's split sets are
# gemm_tiled's, computing in fp32, and compete at every precision as its whole-K sets do; a
# tensor-core set never splits K. Linear.choose, shared by workspace_shapes and bind, takes the
# precision, so the scratch buffer planned is the one the bound set uses.

def split_linear_case(rng):
    x = rng.standard_normal((3, 7, 600)).astype(np.float32)   # 21 rows, K = 600
    w = rng.standard_normal((45, 600)).astype(np.float32)
    b = rng.standard_normal(45).astype(np.float32)
    params = {"in_features": 600, "out_features": 45, "bias": True}
    return "nn.Linear", x, w, b, params, lambda x, w, b: F.linear(x, w, b), 600


@pytest.mark.parametrize("precision", ["fp32", "tf32", "fp16"])
def test_a_linear_layer_binds_a_split_k_set_at_every_precision(tmp_path, rng, precision):
    """A split set pinned as `kuiper tune` pins a candidate: the executor plans its scratch
    from workspace_shapes(precision=) and binds it (two launches) with bind(precision=); the
    arithmetic is fp32, on the half-rounded weight under fp16."""
    from kuiper.layers.opencl_gemm import parameter_sets
    from kuiper.layers.opencl_gemm.selection import pinned
    from kuiper.opencl.device.runtime import OpenCLRuntime

    split = parameter_sets.split_k(parameter_sets.SPLIT_TILES[0], 3)
    if not parameter_sets.fits(split, OpenCLRuntime.shared().device):
        pytest.skip("the split set does not fit this device")
    case = split_linear_case(rng)
    _, x, w, b, _, fn, _ = case
    with pinned("gemm", split):
        graph, layer, y = load_case(tmp_path, case, precision)
        op = next(op for op in graph.order if op.layer is layer)
        specs = [[graph.specs[o.name] for o in ops] for ops in (op.inputs, op.outputs)]
        shapes = layer.workspace_shapes(*specs, precision=precision)
    assert graph.plan.precision_of(op) == precision
    assert layer.algorithm_params == split and len(layer.launches) == 2
    assert shapes == [((3 * 21 * 45,), np.float32)]
    half = precision == "fp16"
    assert layer.computes == ("fp32, half weight" if half else "fp32")
    assert_close(y, torch_of(fn, x, round_half(w) if half else w, b),
                 what=f"split-K linear at {precision}")


def transformer_linear(monkeypatch, rows: int = 128):
    """An OpenCL Linear as the cost model sees it on an H100 with tensor cores: a
    transformer's MLP output at `rows` tokens (rows x 768, K = 3072), no tuning cache."""
    from types import SimpleNamespace

    from kuiper.core.tensor_spec import TensorSpec
    from kuiper.layers.opencl.linear import Linear
    from tests.opencl.described_devices import fake_h100

    h100 = fake_h100()
    h100.tensor_cores = ("tf32", "fp16")
    monkeypatch.setattr(tuning_cache, "lookup", lambda *args, **kwargs: None)
    layer = Linear.__new__(Linear)
    layer.weight, layer.bias = np.zeros((768, 3072), np.float32), None
    layer.runtime = SimpleNamespace(device=h100)
    return layer, [TensorSpec.of((rows, 3072))], [TensorSpec.of((rows, 768))]


@pytest.mark.parametrize("rows", [128, 8192])
def test_the_linear_layers_scratch_follows_its_precision(monkeypatch, rows):
    """workspace_shapes answers what bind will bind (Linear.choose), at every precision: the
    partial sums' scratch exactly when the set chosen splits K. At 128 rows (24 tiles for 132
    compute units) fp32 splits K; at 8192 rows the TF32 tensor cores (1.2x gemm_tiled at best,
    as measured on an H200: cost.py) win, unsplit, and no scratch is planned."""
    from kuiper.layers.opencl_gemm.launch import split_workspace

    layer, in_specs, out_specs = transformer_linear(monkeypatch, rows)
    for precision in ("fp32", "tf32", "fp16"):
        params, _ = layer.choose(in_specs, out_specs, precision)
        shapes = layer.workspace_shapes(in_specs, out_specs, precision=precision)
        assert shapes == split_workspace(params, rows, 768, 3072), precision
        assert bool(shapes) == (params.get("SPLIT_K", 1) > 1), params
        if params["kernel"] == "gemm_mma":
            assert mma_sets.precision_of(params) == precision and not shapes
    fp32, _ = layer.choose(in_specs, out_specs, "fp32")
    tf32, _ = layer.choose(in_specs, out_specs, "tf32")
    if rows == 128:
        assert fp32.get("SPLIT_K", 1) > 1, fp32
    else:
        assert tf32["kernel"] == "gemm_mma" and mma_sets.precision_of(tf32) == "tf32", tf32


@pytest.mark.parametrize("precision", ["fp32", "tf32", "fp16"])
def test_kuiper_tune_times_split_sets_and_the_precisions_tensor_core_sets(monkeypatch,
                                                                         precision):
    """The tuner's candidates for a linear layer are select_gemm's: split sets at every
    precision (the layer binds them), the tensor-core sets of its precision only; a layer
    that cannot bind split sets (a transposed convolution's GEMM) gets none."""
    from types import SimpleNamespace

    from kuiper.opencl.execution import tuner

    layer, _, _ = transformer_linear(monkeypatch)
    shape = (128, 768, 3072, 1, False, False)

    def kernels(op_layer):
        problem = tuner.Problem("gemm", "key", SimpleNamespace(layer=op_layer), 1.0, shape,
                                precision)
        return [c.params for c in tuner.candidate_list(problem, layer.runtime.device)]

    sets = kernels(layer)
    assert any(p.get("SPLIT_K", 1) > 1 for p in sets)
    mma = {mma_sets.precision_of(p) for p in sets if p["kernel"] == "gemm_mma"}
    assert mma == (set() if precision == "fp32" else {precision})
    assert not any(p.get("SPLIT_K", 1) > 1 for p in kernels(SimpleNamespace()))
