"""The answer to lesson 12's exercises: the tiled GEMM kernel and its NDRange.

Kept apart from tiled_gemm.py, which the lesson asks you to read first: open this file after
`kuiper course check 12` passes, and compare. (The project's own test run checks these two
functions with the lesson's tests: the answer is known to pass them.)

TILE and WPT are compile-time constants (`-D TILE=32 -D WPT=8`), so the compiler can unroll
the loops and size the local arrays; `launch_sizes` gives the matching NDRange.
"""

from __future__ import annotations

from kuiper.core.errors import KuiperError


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


