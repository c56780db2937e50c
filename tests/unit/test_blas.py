"""kuiper.layers.cpu_helpers.blas: the direct sgemm call (C = A @ B or C += A @ B) on strided
NumPy views."""

import os
import subprocess
import sys

import numpy as np
import pytest
from numpy.lib.stride_tricks import as_strided

from kuiper.layers.cpu_helpers import blas

needs_blas = pytest.mark.skipif(
    not blas.available(),
    reason="NumPy's BLAS exposes no cblas_sgemm this module knows (the conv layers then use "
           "im2col only)")


def reference(a, b):
    return a.astype(np.float64) @ b.astype(np.float64)


@needs_blas
def test_overwrite_then_accumulate_on_strided_views(rng):
    big_a = rng.standard_normal((9, 20)).astype(np.float32)
    big_b = rng.standard_normal((13, 40)).astype(np.float32)
    a = big_a[1:8, 3:14]          # (7, 11), leading dimension 20
    b = big_b[2:13, 5:22]         # (11, 17), leading dimension 40
    canvas = rng.standard_normal((10, 30)).astype(np.float32)
    before = canvas.copy()
    c = canvas[2:9, 4:21]         # (7, 17), leading dimension 30

    blas.gemm_into(a, b, c, accumulate=False)
    np.testing.assert_allclose(c, reference(a, b), rtol=1e-5, atol=1e-5)
    blas.gemm_into(a, b, c, accumulate=True)
    np.testing.assert_allclose(c, 2 * reference(a, b), rtol=1e-5, atol=1e-5)

    outside = np.ones(canvas.shape, bool)
    outside[2:9, 4:21] = False
    assert np.array_equal(canvas[outside], before[outside]), "wrote outside the output view"


@needs_blas
def test_sizes_of_one(rng):
    a = rng.standard_normal((1, 5)).astype(np.float32)
    b = rng.standard_normal((5, 1)).astype(np.float32)
    c = np.zeros((1, 1), np.float32)
    blas.gemm_into(a, b, c, accumulate=False)
    np.testing.assert_allclose(c, reference(a, b), rtol=1e-5)


@needs_blas
def test_layouts_blas_cannot_read_are_refused(rng):
    x = rng.standard_normal(64).astype(np.float32)
    ok = x[:16].reshape(4, 4)
    out = np.zeros((4, 4), np.float32)
    overlapping = as_strided(x, (4, 8), (4, 4))       # each row starts one element later
    with pytest.raises(ValueError, match="overlap"):
        blas.gemm_into(overlapping, np.zeros((8, 4), np.float32), out, accumulate=False)
    with pytest.raises(ValueError, match="contiguous rows"):
        blas.gemm_into(x[::2][:16].reshape(4, 4)[:, ::2], ok[:2], out, accumulate=False)
    with pytest.raises(ValueError, match="float32"):
        blas.gemm_into(ok.astype(np.float64), ok, out, accumulate=False)
    with pytest.raises(ValueError, match="do not match"):
        blas.gemm_into(ok, ok[:3], out, accumulate=False)
    frozen = np.zeros((4, 4), np.float32)
    frozen.flags.writeable = False
    with pytest.raises(ValueError, match="writeable"):
        blas.gemm_into(ok, ok, frozen, accumulate=False)


def test_without_direct_blas_convolutions_fall_back_to_im2col():
    """KUIPER_DIRECT_BLAS=0 (or a NumPy whose BLAS is not found): no taps, same results."""
    code = """
import numpy as np, torch, torch.nn.functional as F
from kuiper.layers.cpu_helpers import blas, tap_gemm
from kuiper.layers.cpu.conv2d import ConvNd
from kuiper.testing import assert_close, run_operator
assert not blas.available() and not tap_gemm.available()
ConvNd.lowering = "taps"  # asked for, but not available: im2col runs
rng = np.random.default_rng(0)
x = rng.standard_normal((1, 32, 12, 11)).astype(np.float32)
w = rng.standard_normal((8, 32, 3, 3)).astype(np.float32)
params = {"in_channels": 32, "out_channels": 8, "kernel_size": (3, 3), "padding": (1, 1),
          "bias": False}
(y,) = run_operator("nn.Conv2d", [x], params=params, weights={"weight": w})
assert_close(y, F.conv2d(torch.from_numpy(x), torch.from_numpy(w), padding=1).numpy())
print("ok")
"""
    env = {**os.environ, "KUIPER_DIRECT_BLAS": "0"}
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr


def numpys_blas() -> dict | None:
    """threadpoolctl's entry for the BLAS inside NumPy's own install (None: NumPy has none
    threadpoolctl knows, e.g. Apple's Accelerate)."""
    import threadpoolctl

    return next((lib for lib in threadpoolctl.threadpool_info()
                 if lib["user_api"] == "blas" and blas._is_numpys(lib["filepath"])), None)


@needs_blas
def test_the_library_used_is_numpys_as_threadpoolctl_reports_it():
    numpys = numpys_blas()
    assert numpys is not None, "available() but threadpoolctl reports no BLAS inside NumPy"
    assert os.path.samefile(blas.library(), numpys["filepath"]), (blas.library(), numpys)


def test_numpys_blas_comes_first_whatever_else_is_loaded():
    site = os.path.dirname(os.path.dirname(np.__file__))
    numpys = os.path.join(site, "numpy.libs", "libscipy_openblas64_-x.so")
    libraries = [
        {"user_api": "blas", "internal_api": "mkl", "filepath": "/opt/a/libmkl_rt.so.2"},
        {"user_api": "openmp", "internal_api": "openmp", "filepath": "/usr/lib/libgomp.so.1"},
        {"user_api": "blas", "internal_api": "openblas", "filepath": numpys},
    ]
    assert blas._blas_paths(libraries) == [numpys, "/opt/a/libmkl_rt.so.2"]
    assert blas._blas_paths([]) == []


def test_no_blas_listed_by_threadpoolctl_means_not_available():
    """blas.py decides at import, so the check runs in a fresh interpreter whose threadpoolctl
    reports no library at all."""
    code = """
import threadpoolctl
threadpoolctl.threadpool_info = lambda: []
from kuiper.layers.cpu_helpers import blas, tap_gemm
assert not blas.available() and blas.library() is None and not tap_gemm.available()
print("ok")
"""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr
