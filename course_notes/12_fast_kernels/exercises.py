"""Lesson 12 exercises: the NDRange of a tiled GEMM, and the tiled GEMM kernel itself.

Fill in the functions, then run `kuiper course check 12`. The tests build your kernel with
pyopencl, check it against NumPy on awkward sizes, and time it against the naive kernel of
kuiper/course/tiled_gemm.py (naive_gemm_source) on your own device. The answers are in
kuiper/course/tiled_gemm_answer.py: try first.
"""

from __future__ import annotations


def launch_sizes(m: int, n: int, tile: int, wpt: int) -> tuple[tuple[int, int], tuple[int, int]]:
    """(global size, local size) that launch gemm_tiled for an M x N result C.

    One work-group per TILE x TILE tile of C, the tiles covering all of C (the last row and
    column of tiles may stick out). A work-group has TILE work-items along dimension 0 (the
    columns of its tile) and TILE // WPT along dimension 1 (each one computes WPT rows). The
    global size counts work-items, not tiles. When WPT does not divide TILE (or either is
    below 1) raise kuiper.KuiperError, naming gemm_tiled, WPT and TILE.
    Example: launch_sizes(100, 70, 32, 8) == ((96, 16), (32, 4)).
    """
    raise NotImplementedError("lesson 12: write launch_sizes")


def tiled_gemm_source() -> str:
    """The OpenCL C source of a kernel with exactly this signature:

        __kernel void gemm_tiled(const int M, const int N, const int K,
                                 __global const float *A, __global const float *B,
                                 __global float *C)

    It computes C (M x N) = A (M x K) @ B (K x N), all row-major, for any M, N, K >= 1. It is
    compiled with `-D TILE=t -D WPT=w` and launched as launch_sizes(M, N, TILE, WPT) says:
    work-group (get_group_id(0), get_group_id(1)) owns the TILE x TILE tile of C whose
    top-left element is at column get_group_id(0) * TILE, row get_group_id(1) * TILE.
    Work-item (tx, ty) = (get_local_id(0), get_local_id(1)) computes column tx of the tile,
    rows ty, ty + TILE/WPT, ty + 2*TILE/WPT, ... (WPT rows).

    1. Walk K one TILE-wide slab at a time. For each slab, the work-group copies the
       TILE x TILE block of A and the TILE x TILE block of B it needs into two
       `__local float [TILE][TILE]` arrays (each work-item copies WPT values of each;
       load 0.0f where the block sticks out of the matrix), then waits at
       barrier(CLK_LOCAL_MEM_FENCE).
    2. Each work-item accumulates its WPT sums from local memory, in a `float sum[WPT]`
       array (registers): per k, load its one B value once and use it WPT times.
    3. A second barrier before the next slab overwrites the local arrays.
    4. At the end, write the sums that fall inside C, and nothing outside it.

    The test checks the result against NumPy for several sizes, TILE and WPT, and that with
    TILE=32, WPT=8 your kernel is clearly faster than the naive one (see the test for how
    much, and how it is measured).
    """
    raise NotImplementedError("lesson 12: return the tiled GEMM kernel's source from "
                              "tiled_gemm_source()")
