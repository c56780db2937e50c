"""The teaching GEMMs of lesson 12 (kuiper/course/tiled_gemm.py) beyond what the
lesson's own tests check: the naive kernel is right too, the timing refuses a queue without
profiling, and `interleaved_medians` really interleaves."""

from __future__ import annotations

import numpy as np
import pytest

from kuiper.core.errors import KuiperError
from kuiper.course import tiled_gemm
from tests.conftest import opencl_available

needs_opencl = pytest.mark.skipif(not opencl_available(), reason="no OpenCL device")


@pytest.fixture(scope="module")
def runtime():
    from kuiper.opencl.device.runtime import OpenCLRuntime

    return OpenCLRuntime(profiling=True)


@needs_opencl
@pytest.mark.parametrize("m, n, k", [(1, 1, 1), (17, 33, 5), (70, 150, 129)])
def test_the_naive_kernel_matches_numpy(runtime, m, n, k):
    rng = np.random.default_rng(m + n + k)
    a_host = rng.standard_normal((m, k), dtype=np.float32)
    b_host = rng.standard_normal((k, n), dtype=np.float32)
    a, b, c = runtime.to_device(a_host), runtime.to_device(b_host), runtime.empty((m, n))
    run = tiled_gemm.bind_gemm(runtime, tiled_gemm.naive_gemm_source(), "gemm_naive", a, b, c,
                               {}, tiled_gemm.naive_launch_sizes(m, n))
    assert run() > 0  # a device time, in seconds
    np.testing.assert_allclose(c.get(), a_host.astype(np.float64) @ b_host, rtol=1e-4,
                               atol=1e-4)


@needs_opencl
def test_timing_without_profiling_is_a_kuiper_error():
    from kuiper.opencl.device.runtime import OpenCLRuntime

    plain = OpenCLRuntime(profiling=False)
    a = plain.to_device(np.ones((4, 4), np.float32))
    run = tiled_gemm.bind_gemm(plain, tiled_gemm.naive_gemm_source(), "gemm_naive", a, a,
                               plain.empty((4, 4)), {}, tiled_gemm.naive_launch_sizes(4, 4))
    with pytest.raises(KuiperError, match="profiling=True"):
        run()


@needs_opencl
def test_a_source_without_the_kernel_names_what_it_has(runtime):
    a = runtime.to_device(np.ones((4, 4), np.float32))
    with pytest.raises(KuiperError, match="gemm_tiled.*gemm_naive"):
        tiled_gemm.bind_gemm(runtime, tiled_gemm.naive_gemm_source(), "gemm_tiled", a, a,
                             runtime.empty((4, 4)), {}, tiled_gemm.naive_launch_sizes(4, 4))


def test_interleaved_medians_alternate_the_runs_and_take_medians():
    calls = []

    def fake(name, times):
        it = iter(times)
        return lambda: calls.append(name) or next(it)

    medians = tiled_gemm.interleaved_medians(
        {"a": fake("a", [3.0, 1.0, 100.0]), "b": fake("b", [2.0, 2.0, 2.0])}, rounds=3)
    assert calls == ["a", "b", "a", "b", "a", "b"]      # never all of one, then the other
    assert medians == {"a": 3.0, "b": 2.0}               # one outlier (100) does not count


def test_speedup_reports_rates_and_the_ratio():
    measured = tiled_gemm.Speedup(size=512, naive=0.06, tiled=0.02)
    assert measured.ratio == pytest.approx(3.0)
    assert "512^3" in str(measured) and "3.00x" in str(measured)
    assert "4.5 GFLOP/s" in str(measured)                # 2 * 512^3 / 0.06 s
