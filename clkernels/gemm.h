// gemm.h: the tiled matrix product behind conv1d, conv2d, conv_transpose2d and linear.
//
//     C[z] (M x N) = A[z % groups] (M x K) @ B[z] (K x N)  (+ bias)      for z = 0 .. Z-1
//
// z runs over (image, group) pairs: a grouped convolution is `groups` independent GEMMs that
// share one weight matrix per group across the batch, hence A's index z % groups.
// Row-major everywhere; TRANS_A=1 means A is stored K x M (the transposed convolution reads
// its weight that way), TRANS_B=1 that B is stored N x K (a linear layer's weight).
//
// How it is fast. A work-group of 16 x 16 work-items computes a 64 x 64 tile of C: each
// work-item owns a 4 x 4 block of it, kept in registers ("register blocking"). The K axis is
// walked 16 at a time: the work-group copies a 64 x 16 slab of A and a 16 x 64 slab of B into
// local memory (each element read from global memory once per tile instead of once per
// multiply), waits at a barrier, then every work-item does 16 x 4 x 4 multiply-adds from local
// memory, reusing each loaded A value 4 times and each B value 4 times from registers.
// A work-item's outputs sit LOCAL_M rows / LOCAL_N columns apart (not side by side), so that
// neighbouring work-items read neighbouring local-memory words.
//
// Edges: loads outside the matrices write zeros into the tiles (they add nothing to the sums)
// and stores are guarded, so any M, N, K works and nothing is ever read out of bounds.
//
// The including file may set TRANS_A / TRANS_B before #include "gemm.h". The Python side
// (layers/opencl/linear.py: GEMM_TILE, GEMM_LOCAL) must agree with the tile sizes below.

#ifndef KUIPER_GEMM_H
#define KUIPER_GEMM_H

#ifndef TRANS_A
#define TRANS_A 0
#endif
#ifndef TRANS_B
#define TRANS_B 0
#endif

#define TILE_M 64
#define TILE_N 64
#define TILE_K 16
#define WPT_M 4                       // rows of C per work-item
#define WPT_N 4                       // columns of C per work-item
#define LOCAL_M (TILE_M / WPT_M)      // 16 work-items along M
#define LOCAL_N (TILE_N / WPT_N)      // 16 work-items along N
#define THREADS (LOCAL_M * LOCAL_N)   // 256 work-items per group

// bias_mode: 0 = no bias (`bias` is not read), 1 = bias[g * M + row] (a conv's output
// channel: group g owns channels g*M .. g*M+M-1), 2 = bias[column] (a linear layer).
__kernel __attribute__((reqd_work_group_size(LOCAL_N, LOCAL_M, 1)))
void gemm(const int M, const int N, const int K,
          __global const float *A, const int a_group_stride,
          __global const float *B, const int b_batch_stride,
          __global float *C, const int c_batch_stride,
          __global const float *bias, const int bias_mode, const int groups)
{
    const int tn = get_local_id(0);
    const int tm = get_local_id(1);
    const int tid = tm * LOCAL_N + tn;
    const int n0 = get_group_id(0) * TILE_N;
    const int m0 = get_group_id(1) * TILE_M;
    const int z = get_group_id(2);
    const int g = z % groups;
    A += g * a_group_stride;
    B += z * b_batch_stride;
    C += z * c_batch_stride;

    __local float As[TILE_K][TILE_M];   // As[k][m]: a work-item reads a row of k
    __local float Bs[TILE_K][TILE_N];   // Bs[k][n]

    float acc[WPT_M][WPT_N];
    for (int i = 0; i < WPT_M; ++i)
        for (int j = 0; j < WPT_N; ++j)
            acc[i][j] = 0.0f;

    for (int k0 = 0; k0 < K; k0 += TILE_K) {
        // Cooperative loads, 4 elements per work-item per tile. Consecutive work-items take
        // consecutive addresses of the stored matrix (coalesced reads on a GPU).
        for (int l = tid; l < TILE_K * TILE_M; l += THREADS) {
#if TRANS_A
            const int m = l % TILE_M, k = l / TILE_M;       // stored K x M: m is contiguous
#else
            const int k = l % TILE_K, m = l / TILE_K;       // stored M x K: k is contiguous
#endif
            const int gm = m0 + m, gk = k0 + k;
            float v = 0.0f;
            if (gm < M && gk < K) {
#if TRANS_A
                v = A[gk * M + gm];
#else
                v = A[gm * K + gk];
#endif
            }
            As[k][m] = v;
        }
        for (int l = tid; l < TILE_K * TILE_N; l += THREADS) {
#if TRANS_B
            const int k = l % TILE_K, n = l / TILE_K;       // stored N x K: k is contiguous
#else
            const int n = l % TILE_N, k = l / TILE_N;       // stored K x N: n is contiguous
#endif
            const int gn = n0 + n, gk = k0 + k;
            float v = 0.0f;
            if (gn < N && gk < K) {
#if TRANS_B
                v = B[gn * K + gk];
#else
                v = B[gk * N + gn];
#endif
            }
            Bs[k][n] = v;
        }
        barrier(CLK_LOCAL_MEM_FENCE);

        for (int k = 0; k < TILE_K; ++k) {
            float a[WPT_M], b[WPT_N];
            for (int i = 0; i < WPT_M; ++i)
                a[i] = As[k][tm + i * LOCAL_M];
            for (int j = 0; j < WPT_N; ++j)
                b[j] = Bs[k][tn + j * LOCAL_N];
            for (int i = 0; i < WPT_M; ++i)
                for (int j = 0; j < WPT_N; ++j)
                    acc[i][j] = mad(a[i], b[j], acc[i][j]);
        }
        barrier(CLK_LOCAL_MEM_FENCE);   // the next slab overwrites the tiles
    }

    for (int i = 0; i < WPT_M; ++i) {
        const int gm = m0 + tm + i * LOCAL_M;
        if (gm >= M)
            break;
        for (int j = 0; j < WPT_N; ++j) {
            const int gn = n0 + tn + j * LOCAL_N;
            if (gn >= N)
                break;
            float v = acc[i][j];
            if (bias_mode == 1)
                v += bias[g * M + gm];
            else if (bias_mode == 2)
                v += bias[gn];
            C[gm * N + gn] = v;
        }
    }
}

#endif  // KUIPER_GEMM_H
