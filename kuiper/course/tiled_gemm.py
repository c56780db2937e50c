"""A matrix product written to be read, and a fair way to time one kernel against another.

Lesson 12 (course_notes/12_fast_kernels) starts here: the engine's own fast GEMM
(clkernels/gemm.h) has edge cases, transposes, groups and a bias to care about; the naive kernel
here has none of that, so the idea shows. The lesson's exercise is its tiled twin, `gemm_tiled`;
the answer is kept apart, in tiled_gemm_answer.py: read it after yours passes.

Both kernels compute C (M x N) = A (M x K) @ B (K x N), row-major, with the same arguments:

    __kernel void NAME(const int M, const int N, const int K,
                       __global const float *A, __global const float *B, __global float *C)

- `gemm_naive`: one work-item per element of C. Each multiply-add loads one value of A and
  one of B from global memory: about 2 loads per multiply-add, whatever the sizes.
- `gemm_tiled` (the exercise): a work-group computes a TILE x TILE tile of C from slabs of A and
  B staged in local memory, each work-item WPT outputs of one column kept in registers.

`speedup` times the two on the same device, interleaved, and returns a ratio.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from kuiper.core.errors import KuiperError
from kuiper.course.tiled_gemm_answer import launch_sizes

NAIVE_LOCAL = 16  # gemm_naive runs in 16 x 16 work-groups (any size works)
SPEED_TILE, SPEED_WPT = 32, 8  # what `speedup` times: a good choice on PoCL and on an H100


def naive_gemm_source() -> str:
    """The OpenCL C source of `gemm_naive`: one work-item per element of C."""
    return r"""
// gemm_naive: one work-item computes one element of C = A @ B (row-major, M x K times K x N).
// Every multiply-add loads one value of A and one of B from global memory.
__kernel void gemm_naive(const int M, const int N, const int K,
                         __global const float *A, __global const float *B, __global float *C)
{
    const int col = get_global_id(0);   // dimension 0 = the fastest index: neighbouring
    const int row = get_global_id(1);   // work-items read neighbouring B and write neighbouring C
    if (row >= M || col >= N)           // the NDRange is rounded up: extra work-items stop here
        return;
    float sum = 0.0f;
    for (int k = 0; k < K; ++k)
        sum += A[row * K + k] * B[k * N + col];
    C[row * N + col] = sum;
}
"""


def naive_launch_sizes(m: int, n: int) -> tuple[tuple[int, int], tuple[int, int]]:
    """(global size, local size) of `gemm_naive`: one work-item per element, rounded up."""
    up = lambda v: -(-v // NAIVE_LOCAL) * NAIVE_LOCAL  # noqa: E731
    return (up(n), up(m)), (NAIVE_LOCAL, NAIVE_LOCAL)


@dataclass
class GemmRun:
    """One kernel bound to A, B, C, ready to launch; `__call__` runs it once and returns
    its device time in seconds (from the profiling event: the host's overhead not counted)."""

    runtime: object
    kernel: object
    global_size: tuple[int, int]
    local_size: tuple[int, int]

    def __call__(self) -> float:
        if not self.runtime.profiling:  # else pyopencl's own error, which does not say why
            raise KuiperError("timing a GEMM kernel needs a queue with profiling on: "
                              "OpenCLRuntime(profiling=True)")
        cl = self.runtime.cl
        event = cl.enqueue_nd_range_kernel(self.runtime.queue, self.kernel, self.global_size,
                                           self.local_size)
        event.wait()
        return (event.profile.end - event.profile.start) * 1e-9


def bind_gemm(runtime, source: str, name: str, a, b, c, defines: dict[str, int],
              sizes: tuple[tuple[int, int], tuple[int, int]]) -> GemmRun:
    """Build `source` with `-D NAME=value` for each of `defines` (once per source and defines;
    KernelBuildError with the compiler's log if it does not compile), take kernel `name` from
    it and bind the device arrays a (M x K), b (K x N), c (M x N)."""
    options = [f"-D{key}={value}" for key, value in defines.items()]
    label = " ".join([name, *options])
    program = runtime.program_from_source(source, options, label)
    kernel = runtime.kernel_of(program, name, label)
    m, k = a.shape
    n = b.shape[1]
    kernel.set_args(np.int32(m), np.int32(n), np.int32(k), a.data, b.data, c.data)
    return GemmRun(runtime, kernel, *sizes)


def interleaved_medians(runs: dict[str, Callable[[], float]], rounds: int) -> dict[str, float]:
    """Median time of each run, timed in `rounds` rounds of one call each, in turn.

    Interleaving is what makes a ratio trustworthy on a shared machine: a busy phase of the
    machine slows every kernel of that round, not all the runs of one kernel."""
    times: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(rounds):
        for name, run in runs.items():
            times[name].append(run())
    return {name: statistics.median(t) for name, t in times.items()}


@dataclass
class Speedup:
    """What `speedup` measured: the problem size, both medians (seconds) and their ratio."""

    size: int
    naive: float
    tiled: float

    @property
    def ratio(self) -> float:
        return self.naive / self.tiled

    def __str__(self) -> str:
        flops = 2 * self.size ** 3
        return (f"{self.size}^3 GEMM: naive {self.naive * 1e3:.2f} ms "
                f"({flops / self.naive / 1e9:.1f} GFLOP/s), tiled {self.tiled * 1e3:.2f} ms "
                f"({flops / self.tiled / 1e9:.1f} GFLOP/s): {self.ratio:.2f}x")


def speedup(runtime, tiled_source: str, rounds: int = 9, tile: int = SPEED_TILE,
            wpt: int = SPEED_WPT, busy_seconds: float = 0.02) -> Speedup:
    """How many times faster `tiled_source`'s gemm_tiled is than gemm_naive on `runtime`'s
    device (its queue must have profiling on): a ratio of medians of interleaved runs.

    The problem is square, and grows (512, 1024, ... 4096) until the naive kernel takes at least
    `busy_seconds`: a tiny product mostly measures the launch, not the kernel, and the
    device's speed decides where "big enough" starts (a CPU at 512, a GPU later). Below 512,
    all three matrices fit in a CPU core's cache, and the ratios measured there varied more.
    """
    size = 512
    while True:
        rng = np.random.default_rng(size)
        a = runtime.to_device(rng.standard_normal((size, size), dtype=np.float32))
        b = runtime.to_device(rng.standard_normal((size, size), dtype=np.float32))
        c = runtime.empty((size, size))
        naive = bind_gemm(runtime, naive_gemm_source(), "gemm_naive", a, b, c, {},
                          naive_launch_sizes(size, size))
        tiled = bind_gemm(runtime, tiled_source, "gemm_tiled", a, b, c,
                          {"TILE": tile, "WPT": wpt}, launch_sizes(size, size, tile, wpt))
        tiled()  # a first launch of each outside the timing (lazy compilation, caches)
        # the best of 3: a busy moment of a shared machine must not stop the growth too early
        if min(naive() for _ in range(3)) >= busy_seconds or size >= 4096:
            break
        size *= 2
    times = interleaved_medians({"naive": naive, "tiled": tiled}, rounds)
    return Speedup(size, times["naive"], times["tiled"])
