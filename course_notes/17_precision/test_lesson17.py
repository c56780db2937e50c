"""Lesson 17: TF32 and half roundings bit for bit, the GEMM error bound on emulated tensor-core
products, and the bound held by the engine's own OpenCL layers (half weights on any device, the
tensor-core kernel emulated, and the real tensor cores where the device has them)."""

import contextlib

import numpy as np
import pytest

from kuiper.course.lessons import check_array, implementation
from kuiper.testing import tensor_cores_preferred

REFERENCE = {
    "round_tf32": "kuiper.core.precision:round_tf32",
    "round_half": "kuiper.core.precision:round_half",
    "gemm_error_bound": "kuiper.core.precision:gemm_error_bound",
}
ex = implementation(__file__, REFERENCE)

U32, U = 2.0 ** -24, 2.0 ** -11


def f32(*values) -> np.ndarray:
    return np.array(values, np.float32)


def same_bits(got, want, x, what: str) -> None:
    """Equal bit for bit (-0.0 is not 0.0, and NaN equals NaN); `x`: the inputs."""
    got = np.asarray(got)
    assert got.dtype == np.float32 and got.shape == want.shape, (
        f"{what}: got {got.dtype} {got.shape}, expected float32 {want.shape}")
    bad = np.flatnonzero(got.view(np.uint32) != want.view(np.uint32))
    assert bad.size == 0, f"{what}: {bad.size} of {want.size} values differ; first ones:\n" + \
        "\n".join(f"  x = {x.flat[i]!r:>14}: got {got.flat[i]!r}, expected {want.flat[i]!r}"
                  for i in bad[:6])


def wide_floats(seed: int, n: int = 20000) -> np.ndarray:
    """Float32 values of every size from 1e-45 to 3e38, and of both signs."""
    rng = np.random.default_rng(seed)
    bits = rng.integers(0, 0x7F800000, n, dtype=np.uint32) | (
        rng.integers(0, 2, n, dtype=np.uint32) << np.uint32(31))
    return bits.view(np.float32)


# --- round_tf32 ------------------------------------------------------------------------------

def test_tf32_rounds_to_nearest_with_ties_away_from_zero():
    x = f32(1.0, 1 + 2 ** -10, 1 + 2 ** -11, -(1 + 2 ** -11), 1 + 2 ** -12, 1 + 3 * 2 ** -12,
            2 - 2 ** -23, 1 / 3, 0.0, -0.0)
    want = f32(1.0, 1 + 2 ** -10, 1 + 2 ** -10, -(1 + 2 ** -10), 1.0, 1 + 2 ** -10, 2.0,
               0.333251953125, 0.0, -0.0)
    same_bits(ex.round_tf32(x), want, x, "round_tf32: 1 + 2^-11 is a tie (away from zero: up), "
              "1 + 2^-12 is below half a unit (down), 2 - 2^-23 carries into the exponent")


def test_tf32_keeps_inf_and_nan_and_overflows_at_the_top():
    x = f32(np.inf, -np.inf, np.nan, 3.4028235e38, -3.4028235e38, 3.3e38)
    want = f32(np.inf, -np.inf, np.nan, np.inf, -np.inf, 3.3e38)
    want[5] = np.uint32(np.float32(3.3e38).view(np.uint32) + 0x1000 & 0xFFFFE000).view(
        np.float32)
    same_bits(ex.round_tf32(x), want, x, "round_tf32 of inf, NaN and the largest floats")


def test_tf32_leaves_every_nan_alone():
    """np.nan's bits (0x7FC00000) survive the add-and-mask by luck; NaNs with low payload bits
    do not: 0x7F800001 would become inf, 0x7FFFFFFF -0.0 and 0xFFFFFFFF (wrapping) 0.0."""
    x = np.array([0x7F800001, 0x7FFFFFFF, 0xFFFFFFFF, 0xFFC00FFF], np.uint32).view(np.float32)
    same_bits(ex.round_tf32(x), x.copy(), x, "round_tf32 of NaNs with payload bits (exponent "
              "bits all ones: leave them as they are)")


def test_tf32_matches_rounding_in_float64_over_all_magnitudes():
    x = wide_floats(17)
    x = x[np.isfinite(x)]
    wide = x.astype(np.float64)
    _, e = np.frexp(np.abs(wide))
    spacing = np.ldexp(1.0, np.maximum(e - 1, -126) - 10)     # 10 bits kept, float's range
    want = (np.sign(wide) * np.floor(np.abs(wide) / spacing + 0.5) * spacing)
    with np.errstate(over="ignore"):
        want = want.astype(np.float32)
    want = np.where(x == 0, x, want)                           # keep the zeros' signs
    same_bits(ex.round_tf32(x), want, x, "round_tf32 on random floats of every magnitude, "
              "subnormals included")


# --- round_half ------------------------------------------------------------------------------

def half_of(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        return x.astype(np.float16).astype(np.float32)


HALF_CASES = {
    "ties to even": f32(1 + 2 ** -11, 1 + 3 * 2 ** -11, -(1 + 2 ** -11), 2049, 2051, 0.1),
    "the top": f32(65504, 65519.99, 65520, -65520, 1e5, 3.4e38),
    "subnormals": f32(2 ** -14, 2 ** -15, 3 * 2 ** -25, 2 ** -24, 2 ** -25, 1.5 * 2 ** -25,
                      2 ** -26, 1e-40, -1e-8),
    "special": f32(0.0, -0.0, np.inf, -np.inf, np.nan),
}


@pytest.mark.parametrize("case", list(HALF_CASES))
def test_half_rounds_like_ieee(case):
    x = HALF_CASES[case]
    same_bits(ex.round_half(x), half_of(x), x, f"round_half, {case}")


def test_half_matches_numpy_over_all_magnitudes():
    x = wide_floats(18)
    near = np.random.default_rng(19).standard_normal(20000).astype(np.float32) * np.float32(
        2.0 ** np.random.default_rng(20).integers(-30, 18, 20000))
    x = np.concatenate([x, near])
    same_bits(ex.round_half(x), half_of(x), x, "round_half on random floats of every magnitude")


# --- gemm_error_bound ------------------------------------------------------------------------

def test_the_bound_of_a_small_product():
    a = np.array([[1.0, -2.0], [0.5, 4.0]], np.float32)
    b = np.array([[3.0], [-1.0]], np.float32)
    scale = np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64))   # [[5], [5.5]]
    for precision, u, eta in (("fp32", 0.0, 0.0), ("tf32", U, 2.0 ** -137),
                              ("fp16", U, 2.0 ** -25)):
        want = (2 * u + 8 * U32) * scale + 2 * eta * np.array([[3 + 4], [4.5 + 4]]) \
            + 2 * (2 * eta ** 2 + 2.0 ** -149)
        check_array(ex.gemm_error_bound(a, b, precision), want,
                    f"gemm_error_bound of a 2 x 2 x 1 product in {precision}", rtol=1e-12)


def emulated(a, b, precision: str, order: str) -> np.ndarray:
    """A tensor core's product as the test's own code computes it: inputs rounded, products
    exact, float32 sums in `order` (forward, backward, or NumPy's pairwise sum)."""
    if precision == "fp16":
        ra, rb = half_of(a), half_of(b)
    elif precision == "tf32":
        mask = np.uint32(0xFFFFE000)
        ra, rb = [((x.view(np.uint32) + np.uint32(0x1000)) & mask).view(np.float32)
                  for x in (a, b)]
    else:
        ra, rb = a, b
    products = ra[:, :, None] * rb[None, :, :]
    if order == "backward":
        products = products[:, ::-1, :]
    if order == "pairwise":
        return products.sum(axis=1, dtype=np.float32)
    return np.cumsum(products, axis=1, dtype=np.float32)[:, -1, :]


SIZES = [(1, 1, 1), (3, 17, 5), (13, 300, 7), (2, 2049, 3)]
MAGNITUDES = {"unit": 1.0, "tiny": 1e-6, "large": 1e3, "mixed": None}


@pytest.mark.parametrize("order", ["forward", "backward", "pairwise"])
@pytest.mark.parametrize("magnitude", list(MAGNITUDES))
@pytest.mark.parametrize("precision", ["fp32", "tf32", "fp16"])
def test_the_bound_holds_for_emulated_tensor_cores(precision, magnitude, order):
    """"tiny" inputs are half's subnormals (below 6.1e-5): there the relative bound alone fails
    and eta's terms carry it."""
    for m, k, n in SIZES:
        rng = np.random.default_rng(m * 1000 + k)
        a = rng.standard_normal((m, k))
        b = rng.standard_normal((k, n))
        if MAGNITUDES[magnitude] is None:   # every row and column its own scale
            a *= 10.0 ** rng.uniform(-5, 3, (m, 1))
            b *= 10.0 ** rng.uniform(-5, 1, (1, n))
        else:
            a *= MAGNITUDES[magnitude]
        a, b = a.astype(np.float32), b.astype(np.float32)
        c = emulated(a, b, precision, order).astype(np.float64)
        exact = a.astype(np.float64) @ b.astype(np.float64)
        bound = np.asarray(ex.gemm_error_bound(a, b, precision))
        assert bound.shape == (m, n), f"gemm_error_bound of {m}x{k} @ {k}x{n}: shape " \
            f"{bound.shape}, expected {(m, n)}"
        over = np.abs(c - exact) - bound
        i = np.unravel_index(over.argmax(), over.shape)
        assert over.max() <= 0, (
            f"{precision}, {magnitude} inputs, {m}x{k} @ {k}x{n}, float32 sums {order}: C{i} is "
            f"{abs(c - exact)[i]:.3g} from the exact product, over your bound {bound[i]:.3g}")


@pytest.mark.parametrize("precision", ["tf32", "fp16"])
def test_the_bound_is_tight_for_one_product(precision):
    """1 + 3 * 2^-11 is a tie for both (TF32 away from zero, half to even: both go up by
    2^-11): the product's error is about 2 u, what the bound allows, and not much less."""
    a = f32(1 + 3 * 2 ** -11).reshape(1, 1)
    rounded = np.float64(1 + 2 ** -9)
    error = rounded ** 2 - np.float64(a[0, 0]) ** 2
    bound = float(np.asarray(ex.gemm_error_bound(a, a, precision))[0, 0])
    assert error <= bound <= 1.1 * error, (
        f"{precision}: one product of (1 + 3 * 2^-11)^2 is off by {error:.4g} after rounding; "
        f"your bound says {bound:.4g} (expected between that and 10% more)")


def test_half_overflow_makes_its_rows_and_columns_unbounded():
    a = np.ones((3, 4), np.float32)
    b = np.ones((4, 5), np.float32)
    a[1, 2] = 7e4           # above 65504: inf as half, fine in float32 and TF32
    b[0, 3] = -65520        # rounds to -inf as half
    b[2, 4] = 65519         # rounds to 65504: still a half
    for precision, rows, cols in (("fp16", [1], [3]), ("tf32", [], []), ("fp32", [], [])):
        bound = np.asarray(ex.gemm_error_bound(a, b, precision))
        want = np.zeros((3, 5), bool)
        want[rows, :] = True
        want[:, cols] = True
        assert (np.isinf(bound) == want).all(), (
            f"{precision}: the bound should be inf exactly at rows {rows} and columns {cols} "
            f"(inputs that overflow {precision}); inf at {np.argwhere(np.isinf(bound)).tolist()}")
        assert not np.isnan(bound).any(), f"{precision}: NaN in the bound"


def test_inf_and_nan_inputs_promise_nothing():
    a = np.ones((2, 3), np.float32)
    a[0, 1] = np.nan
    b = np.ones((3, 2), np.float32)
    b[2, 1] = np.inf
    bound = np.asarray(ex.gemm_error_bound(a, b, "fp32"))
    want = np.array([[np.inf, np.inf], [12 * U32 * 3 + 3 * 2.0 ** -149, np.inf]])
    check_array(bound, want, "gemm_error_bound with a NaN in A's row 0 and an inf in B's "
                "column 1", rtol=1e-12)


# --- the engine's layers, inside your bound --------------------------------------------------

def linear_under(precision: str, mode: str, tmp_path):
    """A linear layer (x 9 x 70 times W^T, W 33 x 70, a bias) on OpenCL at `precision`: its
    output, x, W, the bias and what the layer says it computes in."""
    import kuiper
    from kuiper.course.lessons import require_opencl
    from kuiper.layers.opencl_gemm import mma_sets
    from kuiper.testing import write_operator_model

    require_opencl()
    rng = np.random.default_rng(17)
    x = rng.standard_normal((9, 70)).astype(np.float32)
    w = (rng.standard_normal((33, 70)) * 0.1).astype(np.float32)
    bias = rng.standard_normal(33).astype(np.float32)
    path = write_operator_model(tmp_path, "nn.Linear", [x], params={
        "in_features": 70, "out_features": 33, "bias": True}, weights={"weight": w,
                                                                      "bias": bias})
    cores = mma_sets.emulated_tensor_cores() if mode == "emulated" else contextlib.nullcontext()
    with cores, tensor_cores_preferred():
        graph = kuiper.load(path, backend="opencl", precision=precision)
        (y,) = graph.forward(x)
    layer = next(op.layer for op in graph.order if op.type == "nn.Linear")
    return np.asarray(y, np.float64), x, w, bias, layer.computes


def check_within_your_bound(y, x, w, bias, precision: str, what: str):
    exact = x.astype(np.float64) @ w.T.astype(np.float64) + bias
    bound = np.asarray(ex.gemm_error_bound(x, np.ascontiguousarray(w.T), precision))
    bound = bound + 2 * U32 * np.abs(exact)          # one more float32 sum: the bias
    over = np.abs(y - exact) - bound
    i = np.unravel_index(over.argmax(), over.shape)
    assert over.max() <= 0, f"{what}: y{i} is {abs(y - exact)[i]:.3g} from the exact " \
        f"product, over your {precision} bound {bound[i]:.3g} (plus the bias's rounding)"


def test_half_weights_on_this_device_stay_within_your_bound(tmp_path):
    """Every OpenCL device stores the weights as half under fp16; without tensor cores the
    portable kernels then compute in float32 (layer.computes says "fp32, half weight")."""
    y, x, w, bias, computes = linear_under("fp16", "device", tmp_path)
    assert computes in ("fp32, half weight", "fp16, half weight"), computes
    check_within_your_bound(y, x, w, bias, "fp16", f"nn.Linear at fp16 ({computes})")


@pytest.mark.parametrize("precision", ["tf32", "fp16"])
def test_the_emulated_tensor_core_kernel_stays_within_your_bound(precision, tmp_path):
    """gemm_mma.h built with -DMMA_EMULATED=1 on any device: the fragments, the rounding and
    the tiles the GPU runs, each mma replaced by float arithmetic."""
    y, x, w, bias, computes = linear_under(precision, "emulated", tmp_path)
    assert computes.startswith(precision), computes
    check_within_your_bound(y, x, w, bias, precision, f"nn.Linear on emulated {precision} "
                            "tensor cores")


@pytest.mark.parametrize("precision", ["tf32", "fp16"])
def test_the_real_tensor_cores_stay_within_your_bound(precision, tmp_path):
    from kuiper.course.lessons import require_opencl
    from kuiper.opencl.device.runtime import OpenCLRuntime
    from kuiper.opencl.device.tensor_cores import tensor_cores

    require_opencl()
    runtime = OpenCLRuntime.shared()
    if precision not in tensor_cores(runtime.device):
        pytest.skip(f"{runtime.name} has no {precision} tensor cores Kuiper can reach: the "
                    "mma.sync of clkernels/gemm_mma.h is NVIDIA's PTX, and "
                    "kuiper/opencl/device/tensor_cores.py probes NVIDIA GPUs only (the "
                    "emulated kernel was checked above)")
    y, x, w, bias, computes = linear_under(precision, "device", tmp_path)
    assert computes.startswith(precision), f"the layer computes in {computes}, not on the " \
        f"{precision} tensor cores"
    check_within_your_bound(y, x, w, bias, precision, f"nn.Linear on {runtime.name}'s "
                            f"{precision} tensor cores")
