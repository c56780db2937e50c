"""Two matrix products written to be read, and a fair way to time one against the other.

Lesson 12 (course_notes/12_fast_kernels) starts here: the engine's own fast GEMM
(clkernels/gemm.h) has edge cases, transposes, groups and a bias to care about; these two
kernels have none of that, so the idea shows.

Both kernels compute C (M x N) = A (M x K) @ B (K x N), row-major, with the same arguments:

    __kernel void NAME(const int M, const int N, const int K,
                       __global const float *A, __global const float *B, __global float *C)

- `gemm_naive`: one work-item per element of C. Each multiply-add loads one value of A and
  one of B from global memory: about 2 loads per multiply-add, whatever the sizes.
- `gemm_tiled`: a work-group computes a TILE x TILE tile of C. It walks K one TILE-wide slab
  at a time, copies the slab of A and the slab of B into local memory (each value read from
  global memory once per work-group instead of once per multiply-add), and every work-item
  then computes WPT outputs of one column of the tile from local memory, keeping the WPT
  running sums in registers ("register blocking": one B value loaded, WPT multiply-adds).

TILE and WPT are compile-time constants (`-D TILE=32 -D WPT=8`), so the compiler can unroll
the loops and size the local arrays; `launch_sizes` gives the matching NDRange.
`speedup` times the two kernels on the same device, interleaved, and returns a ratio.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from kuiper.core.errors import KuiperError

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


def tiled_gemm_source() -> str:
    """The OpenCL C source of `gemm_tiled`: local-memory tiles and WPT outputs per work-item.

    Compiled with `-D TILE=... -D WPT=...` (WPT divides TILE) and launched as `launch_sizes`
    says: work-groups of TILE x TILE/WPT work-items, one TILE x TILE tile of C each.
    """
    return r"""
// gemm_tiled: C = A @ B (row-major, M x K times K x N) by TILE x TILE tiles of C.
//
// A work-group of TILE x (TILE / WPT) work-items owns one TILE x TILE tile of C. For each
// TILE-wide slab of K it copies a TILE x TILE block of A and one of B into local memory, then
// computes from there: each value of A and B comes from global memory once per work-group
// instead of once per multiply-add. Work-item (tx, ty) owns column tx of the tile, rows
// ty, ty + RTS, ty + 2*RTS, ...: WPT sums kept in registers, so each B value it loads from
// local memory feeds WPT multiply-adds. Sizes are -D constants: the loops unroll.

#define RTS (TILE / WPT)    // work-items along the rows of a tile

__kernel void gemm_tiled(const int M, const int N, const int K,
                         __global const float *A, __global const float *B, __global float *C)
{
    const int tx = get_local_id(0);                 // column inside the tile
    const int ty = get_local_id(1);                 // first row inside the tile
    const int col = get_group_id(0) * TILE + tx;    // column of C
    const int row0 = get_group_id(1) * TILE + ty;   // first row of C

    __local float As[TILE][TILE];   // As[r][k]: rows of the tile, a slab of K
    __local float Bs[TILE][TILE];   // Bs[k][c]: a slab of K, columns of the tile

    float sum[WPT];
    for (int w = 0; w < WPT; ++w)
        sum[w] = 0.0f;

    for (int k0 = 0; k0 < K; k0 += TILE) {
        // Cooperative load: every work-item copies WPT values of A and WPT of B. Neighbouring
        // work-items (tx) read neighbouring addresses. Outside the matrices load 0, which adds
        // nothing to the sums: any M, N, K works.
        for (int w = 0; w < WPT; ++w) {
            const int r = ty + w * RTS;
            const int a_row = get_group_id(1) * TILE + r, a_col = k0 + tx;
            const int b_row = k0 + r;
            As[r][tx] = (a_row < M && a_col < K) ? A[a_row * K + a_col] : 0.0f;
            Bs[r][tx] = (b_row < K && col < N) ? B[b_row * N + col] : 0.0f;
        }
        barrier(CLK_LOCAL_MEM_FENCE);               // the whole slab is in local memory

        for (int k = 0; k < TILE; ++k) {
            const float b = Bs[k][tx];              // one load, WPT multiply-adds
            for (int w = 0; w < WPT; ++w)
                sum[w] += As[ty + w * RTS][k] * b;
        }
        barrier(CLK_LOCAL_MEM_FENCE);               // everyone is done before the next slab
    }

    for (int w = 0; w < WPT; ++w) {
        const int row = row0 + w * RTS;
        if (row < M && col < N)
            C[row * N + col] = sum[w];
    }
}
"""


def launch_sizes(m: int, n: int, tile: int, wpt: int) -> tuple[tuple[int, int], tuple[int, int]]:
    """(global size, local size) of `gemm_tiled` for an M x N result: one work-group of
    TILE x TILE/WPT work-items per TILE x TILE tile, the tiles covering C (rounded up)."""
    if tile < 1 or wpt < 1 or tile % wpt:
        raise KuiperError(f"gemm_tiled: WPT ({wpt}) must divide TILE ({tile}), both >= 1")
    tiles_n, tiles_m = -(-n // tile), -(-m // tile)
    return (tiles_n * tile, tiles_m * (tile // wpt)), (tile, tile // wpt)


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
