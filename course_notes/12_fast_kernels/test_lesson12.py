"""Lesson 12: a tiled, register-blocked GEMM kernel: right on awkward sizes, and faster.

The speed is measured on YOUR device, as a ratio: the naive kernel's median device time over
yours, the two timed in turn (interleaved) on the same matrices, on a product big enough to
keep the device busy (kuiper/course/tiled_gemm.py: speedup). Never a number of
seconds: those depend on the machine.
"""

import numpy as np
import pytest

from kuiper.core.errors import KuiperError
from kuiper.course import tiled_gemm
from kuiper.course.lessons import check_array, implementation, require_opencl

REFERENCE = {
    "launch_sizes": "kuiper.course.tiled_gemm_answer:launch_sizes",
    "tiled_gemm_source": "kuiper.course.tiled_gemm_answer:tiled_gemm_source",
}
ex = implementation(__file__, REFERENCE)
# What `kuiper course check` says before it starts (2-core laptop CPU, PoCL): most of it
# times your kernel against the naive one.
CHECK_TIME = "about a minute"

# Your kernel must be at least this many times faster than gemm_naive, TILE=32 and WPT=8.
# Measured here with the reference kernel (tiled_gemm_answer.py), ratio of medians of 9 interleaved
# runs, sizes as `speedup` picks them:
#   PoCL 3.0 on a 2-core Intel Xeon, 512^3:         3.2x  (naive 4.7, tiled 15 GFLOP/s)
#   NVIDIA H100 (OpenCL, driver 580), 4096^3:       2.4x  (naive 5.4, tiled 12.7 TFLOP/s)
# and, on the H100, local-memory tiling alone (TILE=16, WPT=1) only 1.2x: the GPU's caches
# already serve the naive kernel well, and it takes register blocking (WPT) to pass. A
# student-style variant that stores its A tile transposed (As[tx][r], padded to TILE + 1)
# reached 1.8x on PoCL (its stores are scattered across the vector lanes); the naive kernel
# dressed up as gemm_tiled (WPT rows each, no local memory), 0.9-1.0x.
MIN_SPEEDUP = 1.4


@pytest.mark.parametrize("m, n, tile, wpt, expected", [
    (100, 70, 32, 8, ((96, 16), (32, 4))),
    (64, 64, 32, 8, ((64, 8), (32, 4))),
    (1, 1, 16, 4, ((16, 4), (16, 4))),
    (33, 17, 16, 1, ((32, 48), (16, 16))),
    (300, 257, 64, 8, ((320, 40), (64, 8))),
])
def test_launch_sizes(m, n, tile, wpt, expected):
    got = ex.launch_sizes(m, n, tile, wpt)
    assert tuple(map(tuple, got)) == expected, (
        f"launch_sizes({m}, {n}, tile={tile}, wpt={wpt}) = {got}, expected {expected} "
        "(global = work-items, dimension 0 along the N columns; local = (TILE, TILE // WPT))")


@pytest.mark.parametrize("tile, wpt", [(32, 5), (16, 0), (0, 1)])
def test_launch_sizes_rejects_a_wpt_that_does_not_divide_the_tile(tile, wpt):
    with pytest.raises(KuiperError, match="WPT"):
        ex.launch_sizes(64, 64, tile, wpt)


@pytest.fixture(scope="module")
def source():
    # called first: an untouched stub fails even without an OpenCL device
    return ex.tiled_gemm_source()


@pytest.fixture(scope="module")
def runtime(source):
    require_opencl()
    from kuiper.opencl.device.runtime import OpenCLRuntime

    return OpenCLRuntime(profiling=True)


def run_tiled(runtime, source, a_host, b_host, tile, wpt, spare=64):
    """C of your kernel; C is filled with a marker first, and `spare` more marker elements
    follow it, so that a missing or out-of-bounds store shows."""
    m, n = a_host.shape[0], b_host.shape[1]
    a, b = runtime.to_device(a_host), runtime.to_device(b_host)
    c = runtime.to_device(np.full(m * n + spare, 7.0, np.float32))
    c_view = c[:m * n].reshape(m, n)
    run = tiled_gemm.bind_gemm(runtime, source, "gemm_tiled", a, b, c_view,
                               {"TILE": tile, "WPT": wpt},
                               tiled_gemm.launch_sizes(m, n, tile, wpt))
    run()
    out = c.get()
    return out[:m * n].reshape(m, n), out[m * n:]


@pytest.mark.parametrize("m, n, k, tile, wpt", [
    (1, 1, 1, 8, 1),           # one element, a tile that sticks out everywhere
    (37, 53, 29, 8, 1),        # tiling alone, nothing a multiple of anything
    (100, 70, 130, 16, 4),     # K over several slabs, with a partial last slab
    (65, 33, 97, 32, 8),       # the configuration the speed test uses
    (32, 64, 64, 32, 8),       # exact multiples of the tile
    (5, 200, 3, 16, 16),       # WPT = TILE: one work-item computes a whole column
    (300, 257, 513, 32, 4),
])
def test_tiled_gemm_matches_numpy(runtime, source, m, n, k, tile, wpt):
    rng = np.random.default_rng(m * 1000 + n + k)
    a = rng.standard_normal((m, k), dtype=np.float32)
    b = rng.standard_normal((k, n), dtype=np.float32)
    c, after = run_tiled(runtime, source, a, b, tile, wpt)
    want = (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float32)
    what = f"C = A ({m}x{k}) @ B ({k}x{n}), TILE={tile}, WPT={wpt}"
    check_array(c, want, what, rtol=1e-4)
    check_array(after, np.full(after.shape, 7.0, np.float32),
                f"{what}: memory after C (work-items outside C must not write)")


def test_tiled_gemm_is_faster_than_the_naive_one(runtime, source):
    device = runtime.device.name.lower()
    if "oclgrind" in device:
        pytest.skip("Oclgrind simulates every work-item: its times say nothing about speed")
    measured = tiled_gemm.speedup(runtime, source)
    print(f"\n{runtime.name}: {measured}")
    assert measured.ratio >= MIN_SPEEDUP, (
        f"your gemm_tiled is {measured.ratio:.2f}x as fast as gemm_naive on {runtime.name} "
        f"({measured}); it should be at least {MIN_SPEEDUP}x. Does each work-item keep WPT "
        "sums in registers and load each B value from local memory once per k? On a CPU "
        "(PoCL), work-items along dimension 0 become the lanes of vector instructions: keep "
        "their local-memory reads and writes at consecutive addresses (indexed by tx last).")
