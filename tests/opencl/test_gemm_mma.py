"""The tensor-core GEMM (clkernels/gemm_mma.h), every parameter set forced, on awkward shapes.

Each test runs twice: "emulated" (-DMMA_EMULATED=1: each mma.sync replaced by float arithmetic
on the same fragments, so the tiles, roundings, fragment layouts and index arithmetic are
those the GPU runs) on any OpenCL device, PoCL and Oclgrind included; and "ptx" (the real
mma.sync through inline PTX), which runs where the probe (kuiper/opencl/device/tensor_cores.py)
found tensor cores and skips elsewhere, saying so. On an NVIDIA GPU both run.

Shapes have tails of 1 to 15 past whole tiles in M, N and K (and are smaller than one tile),
every layout gemm.h is built with (conv2d: A stored M x K; conv_transpose2d: K x M; linear: B
stored N x K), groups and batches, both bias modes, a fused epilogue, and weights stored as half
(precision fp16). Results are checked against NumPy with the bounds of mma_harness.py.
"""

from __future__ import annotations

import numpy as np
import pytest

from kuiper.core.errors import KuiperError
from kuiper.layers.opencl_gemm import launch as gemm
from kuiper.layers.opencl_gemm import mma_sets
from kuiper.passes.epilogue import Epilogue
from kuiper.testing import assert_close
from tests.conftest import opencl_available
from tests.opencl import mma_harness as h
from tests.opencl.conv_harness import activation_operator

pytestmark = pytest.mark.skipif(not opencl_available(), reason="no OpenCL device")

LAYOUTS = [("conv2d", False, False), ("conv_transpose2d", True, False), ("linear", False, True)]
MODES = ["emulated", "ptx"]
ALL_MMA_SETS = h.ALL_MMA_SETS   # every parameter set, and the TF32 register path


@pytest.fixture(scope="module")
def runtime():
    from kuiper.opencl.device.runtime import OpenCLRuntime

    return OpenCLRuntime.shared()


def label(params: dict) -> str:
    return mma_sets.describe(params).replace(" ", "_")


def forced(params: dict, mode: str, runtime) -> dict:
    """The set as the mode runs it, or a skip saying why it cannot here."""
    chosen = h.mode_params(params, mode, runtime)
    if mma_sets.local_bytes(chosen) > int(runtime.device.local_mem_size):
        pytest.skip(f"{mma_sets.describe(chosen)} needs {mma_sets.local_bytes(chosen)} bytes of "
                    f"local memory, {runtime.name} has {int(runtime.device.local_mem_size)}")
    return chosen


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("params", ALL_MMA_SETS, ids=label)
@pytest.mark.parametrize("layout", LAYOUTS, ids=lambda t: t[0])
def test_every_mma_set_on_awkward_shapes(runtime, rng, params, layout, mode):
    chosen = forced(params, mode, runtime)
    precision = mma_sets.precision_of(params)
    stem, trans_a, trans_b = layout
    for m, n, k in h.awkward_shapes(params):
        c, a, b, _ = h.run(runtime, stem, trans_a, trans_b, m, n, k, chosen, rng)
        h.check_precision_bounds(c, a, b, trans_a, trans_b, 1, precision,
                                 what=f"{stem} {mma_sets.describe(chosen)} M,N,K={m},{n},{k}")


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("params", ALL_MMA_SETS, ids=label)
def test_groups_batch_bias_and_half_weights(runtime, rng, params, mode):
    """z = batch x groups products, A shared per group, a bias per row (a convolution, its
    weight A stored as half under fp16) and per column (a linear layer, its weight B)."""
    chosen = forced(params, mode, runtime)
    precision = mma_sets.precision_of(params)
    half = precision == "fp16"
    m, n, k, groups, batch = 33, 70, 45, 3, 2
    for bias_mode, stem, trans_b in ((gemm.BIAS_PER_ROW, "conv2d", False),
                                     (gemm.BIAS_PER_COLUMN, "linear", True)):
        c, a, b, bias = h.run(runtime, stem, False, trans_b, m, n, k, chosen, rng,
                              groups=groups, batch=batch, bias_mode=bias_mode,
                              half_a=half and stem == "conv2d", half_b=half and stem == "linear")
        if bias_mode == gemm.BIAS_PER_ROW:
            extra = np.stack([bias[(i % groups) * m:(i % groups + 1) * m, None]
                              for i in range(groups * batch)]) * np.ones((1, 1, n))
        else:
            extra = np.broadcast_to(bias, (groups * batch, m, n))
        h.check_precision_bounds(c, a, b, False, trans_b, groups, precision, extra,
                                 what=f"{mma_sets.describe(chosen)} bias mode {bias_mode}")


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("params", [mma_sets.MMA_PARAMETER_SETS["tf32"][-1],
                                    mma_sets.MMA_PARAMETER_SETS["fp16"][-1]], ids=label)
@pytest.mark.parametrize("residual_first", [True, False])
def test_epilogue_in_the_store(runtime, rng, params, mode, residual_first):
    """silu(C + bias + r) or silu(C + bias) + r, r read at the flat output index, as
    gemm_tiled.h stores."""
    chosen = forced(params, mode, runtime)
    rounding = h.ROUND[mma_sets.precision_of(params)]
    m, n, k, groups, batch = 19, 37, 23, 2, 2
    residual = rng.standard_normal((groups * batch, m, n)).astype(np.float32)
    epilogue = Epilogue.around(activation=activation_operator("nn.SiLU"), residual="r",
                               residual_first=residual_first)
    c, a, b, bias = h.run(runtime, "conv2d", False, False, m, n, k, chosen, rng, groups=groups,
                          batch=batch, bias_mode=gemm.BIAS_PER_ROW, epilogue=epilogue,
                          residual=residual)
    a_list, b_list = h.as_products(a, b, False, False, groups)
    plain = np.stack([rounding(x.astype(np.float32)).astype(np.float64)
                      @ rounding(y.astype(np.float32)).astype(np.float64)
                      for x, y in zip(a_list, b_list)])
    plain += np.stack([bias[(i % groups) * m:(i % groups + 1) * m, None]
                       for i in range(groups * batch)])

    def silu(x):
        return x / (1.0 + np.exp(-x))

    expected = silu(plain + residual) if residual_first else silu(plain) + residual
    assert_close(c, expected, what=f"{mma_sets.describe(chosen)} with the epilogue")


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("params", [mma_sets.MMA_PARAMETER_SETS["tf32"][-1], h.TF32_REGISTER_PATH,
                                    mma_sets.MMA_PARAMETER_SETS["fp16"][-1]], ids=label)
@pytest.mark.parametrize("layout", LAYOUTS, ids=lambda t: t[0])
def test_nan_and_infinity_reach_the_output(runtime, rng, params, mode, layout):
    """A NaN in A makes its row of C NaN, an infinity its row non-finite, whatever their bits:
    NVIDIA's NaN 0x7fffffff and its negative (a rounding by an integer add once turned them
    into zeros), a quiet NaN, +inf. The other rows stay finite."""
    chosen = forced(params, mode, runtime)
    stem, trans_a, trans_b = layout
    m, n, k = 21, 19, 37
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((n, k) if trans_b else (k, n)).astype(np.float32)
    special = np.array([0x7FFFFFFF, 0xFFFFFFFF, 0x7FC00000, 0x7F800000], np.uint32).view(np.float32)
    for row, value in enumerate(special):
        a[row * 5, 3 + row] = value
    da = runtime.to_device(np.ascontiguousarray(a.T) if trans_a else a)
    db, dc = runtime.to_device(b), runtime.empty((m, n))
    launch = gemm.weight_gemm_launch(h.GemmLayer(runtime, stem), m, n, k, da.data, 0, db.data,
                                     0, dc.data, 0, params=chosen)
    runtime.cl.enqueue_nd_range_kernel(runtime.queue, launch.kernel, launch.global_size,
                                       launch.local_size)
    c = dc.get()
    what = f"{stem} {mma_sets.describe(chosen)}"
    for row in range(3):
        assert np.isnan(c[row * 5]).all(), f"{what}: row {row * 5} should be NaN: {c[row * 5]}"
    assert not np.isfinite(c[15]).any(), f"{what}: the infinity's row: {c[15]}"
    others = [r for r in range(m) if r not in (0, 5, 10, 15)]
    assert np.isfinite(c[others]).all(), what


def test_a_tensor_core_set_where_the_probe_found_none_is_a_clear_error(runtime, rng):
    """Forcing a real mma set on a device without tensor cores names the probe and the
    emulated alternative (a KuiperError, not a compiler's log of PTX it cannot read)."""
    params = mma_sets.MMA_PARAMETER_SETS["tf32"][-1]
    if mma_sets.why_not(params, runtime.device) is None:
        pytest.skip(f"{runtime.name} has tf32 tensor cores: nothing to refuse")
    with pytest.raises(KuiperError, match="tensor_cores.py.*MMA_EMULATED"):
        h.run(runtime, "linear", False, True, 8, 8, 8, params, rng)


@pytest.mark.parametrize("precision", ["tf32", "fp16"])
def test_ptx_on_nvidia_whatever_the_probe_says(runtime, rng, monkeypatch, precision):
    """On an NVIDIA device, the real kernel runs even where the probe said no, so that a
    build error (the compiler's log) or a wrong fragment layout fails here with a diagnosis
    instead of only turning the tensor cores off: for a wrong result, where in the 16 x 8 mma
    tile the wrong values sit (by row % 16 and column % 8)."""
    if "nvidia" not in runtime.device.platform.name.lower():
        pytest.skip(f"{runtime.name} is not an NVIDIA device: no PTX to try")
    monkeypatch.setattr(mma_sets, "tensor_cores", lambda device: frozenset(("tf32", "fp16")))
    params = mma_sets.MMA_PARAMETER_SETS[precision][-1]
    m, n, k = 37, 29, 45
    c, a, b, _ = h.run(runtime, "linear", False, True, m, n, k, params, rng)
    rounding = h.ROUND[precision]
    want = rounding(a[0]).astype(np.float64) @ rounding(b[0]).astype(np.float64).T
    bad = np.argwhere(np.abs(c[0] - want) > 1e-3 * (1 + np.abs(want)))
    where = sorted({(int(r) % 16, int(col) % 8) for r, col in bad})
    assert not len(bad), (f"{len(bad)} of {m * n} wrong; (row % 16, col % 8) of the wrong "
                          f"ones: {where[:40]}")
