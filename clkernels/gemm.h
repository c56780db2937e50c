// gemm.h: the matrix product behind conv1d, conv2d, conv_transpose2d and linear.
//
//     C[z] (M x N) = A[z % groups] (M x K) @ B[z] (K x N)  (+ bias)      for z = 0 .. Z-1
//
// z runs over (image, group) pairs: a grouped convolution is `groups` independent GEMMs that
// share one weight matrix per group across the batch, hence A's index z % groups.
// Row-major everywhere; TRANS_A=1 means A is stored K x M (the transposed convolution reads
// its weight that way), TRANS_B=1 that B is stored N x K (a linear layer's weight).
// bias_mode: 0 = no bias (`bias` is not read), 1 = bias[g * M + row] (a conv's output
// channel: group g owns channels g*M .. g*M+M-1), 2 = bias[column] (a linear layer).
//
// Two kernels with the same arguments; the host picks one per device (layers/opencl_helpers/gemm.py):
//
// gemm_tiled, for GPUs. A work-group of 16 x 16 work-items computes a 64 x 64 tile of C: each
// work-item owns a 4 x 4 block of it, kept in registers ("register blocking"). The K axis is
// walked 16 at a time: the work-group copies a 64 x 16 slab of A and a 16 x 64 slab of B into
// local memory (each element read from global memory once per tile instead of once per
// multiply), waits at a barrier, then every work-item does 16 x 4 x 4 multiply-adds from local
// memory, reusing each loaded A value 4 times and each B value 4 times from registers.
// A work-item's outputs sit LOCAL_M rows / LOCAL_N columns apart (not side by side), so that
// neighbouring work-items read neighbouring local-memory words.
//
// gemm_blocked, for CPUs. A CPU has no fast scratchpad to manage (its caches do that job) and
// runs a work-group as a loop over work-items, cut in pieces at every barrier: local-memory
// tiling costs more than it saves there (20x slower under PoCL). What a CPU needs is SIMD: each
// work-item computes an 8 x 8 block of C as eight float8 registers, one per row. Per step of
// k it loads 8 consecutive values of a B row as one vector, broadcasts each of the 8 A values
// and does 8 vector multiply-adds: 64 multiply-adds for 9 loads, like a BLAS micro-kernel.
//
// Edges, in both: nothing is ever read out of bounds. gemm_tiled loads zeros outside the
// matrices; gemm_blocked clamps row/column indices into range (the extra results are computed
// and thrown away); stores are guarded, so any M, N, K works.
//
// The including file may set TRANS_A / TRANS_B before #include "gemm.h". The host side
// (layers/opencl_helpers/gemm.py) must agree with the tile sizes below.

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

__kernel __attribute__((reqd_work_group_size(LOCAL_N, LOCAL_M, 1)))
void gemm_tiled(const int M, const int N, const int K,
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
                    acc[i][j] += a[i] * b[j];
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

// ---------------------------------------------------------------------------------------------
// gemm_blocked: one work-item = an 8 x 8 block of C. Global size (ceil(N/8), ceil(M/8), Z),
// rounded up to the work-group size (extra work-items return at once).

#if TRANS_A
#define A_AT(row, k) A[(k) * M + (row)]
#else
#define A_AT(row, k) A[(row) * K + (k)]
#endif
#if TRANS_B
#define B_AT(k, col) B[(col) * K + (k)]
#else
#define B_AT(k, col) B[(k) * N + (col)]
#endif

// c_i += A[row r_i, k] * bv for the 8 rows: eight float8 multiply-adds. Written as a*b+c, not
// mad(): -cl-mad-enable lets the compiler fuse it into one FMA instruction, whereas PoCL turns
// mad() on vectors into a function call (3x slower).
#define FMA_ROW(i, k) c##i += (float8)(A_AT(r##i, k)) * bv
#define FMA_ROWS(k) FMA_ROW(0, k); FMA_ROW(1, k); FMA_ROW(2, k); FMA_ROW(3, k); \
                    FMA_ROW(4, k); FMA_ROW(5, k); FMA_ROW(6, k); FMA_ROW(7, k)

// Store the 8 values of one row of the block, or the part of them left of column N.
inline void store8(__global float *row, const int n, const int N, const float8 v)
{
    const float r[8] = {v.s0, v.s1, v.s2, v.s3, v.s4, v.s5, v.s6, v.s7};
    const int count = min(8, N - n);
    for (int j = 0; j < count; ++j)
        row[n + j] = r[j];
}

#define STORE_ROW(i) if (m0 + i < M) store8(C + (m0 + i) * N, n, N, c##i + \
    (bias_mode == 1 ? (float8)(bias[g * M + m0 + i]) : (bias_mode == 2 ? bc : (float8)(0.0f))))

__kernel void gemm_blocked(const int M, const int N, const int K,
                           __global const float *A, const int a_group_stride,
                           __global const float *B, const int b_batch_stride,
                           __global float *C, const int c_batch_stride,
                           __global const float *bias, const int bias_mode, const int groups)
{
    const int n = get_global_id(0) * 8;
    const int m0 = get_global_id(1) * 8;
    const int z = get_global_id(2);
    if (n >= N || m0 >= M)
        return;
    const int g = z % groups;
    A += g * a_group_stride;
    B += z * b_batch_stride;
    C += z * c_batch_stride;
    // Rows and columns this work-item reads, clamped into the matrices at the edges.
    const int r0 = m0, r1 = min(m0 + 1, M - 1), r2 = min(m0 + 2, M - 1), r3 = min(m0 + 3, M - 1),
              r4 = min(m0 + 4, M - 1), r5 = min(m0 + 5, M - 1), r6 = min(m0 + 6, M - 1),
              r7 = min(m0 + 7, M - 1);
    const int q0 = n, q1 = min(n + 1, N - 1), q2 = min(n + 2, N - 1), q3 = min(n + 3, N - 1),
              q4 = min(n + 4, N - 1), q5 = min(n + 5, N - 1), q6 = min(n + 6, N - 1),
              q7 = min(n + 7, N - 1);
    float8 c0 = 0.0f, c1 = 0.0f, c2 = 0.0f, c3 = 0.0f, c4 = 0.0f, c5 = 0.0f, c6 = 0.0f,
           c7 = 0.0f;
#if !TRANS_B
    if (n + 8 <= N) {   // the common case: 8 consecutive B values are one vector load
        for (int k = 0; k < K; ++k) {
            // 8 scalar loads the compiler merges into one vector load (PoCL compiles vload8
            // to a function call, which costs as much as the whole FMA block)
            __global const float *b = B + k * N + n;
            const float8 bv = (float8)(b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]);
            FMA_ROWS(k);
        }
    } else
#endif
    {                   // last column block, or B stored transposed: gather 8 values
        for (int k = 0; k < K; ++k) {
            const float8 bv = (float8)(B_AT(k, q0), B_AT(k, q1), B_AT(k, q2), B_AT(k, q3),
                                       B_AT(k, q4), B_AT(k, q5), B_AT(k, q6), B_AT(k, q7));
            FMA_ROWS(k);
        }
    }
    float8 bc = 0.0f;
    if (bias_mode == 2)
        bc = (float8)(bias[q0], bias[q1], bias[q2], bias[q3], bias[q4], bias[q5], bias[q6],
                      bias[q7]);
    STORE_ROW(0); STORE_ROW(1); STORE_ROW(2); STORE_ROW(3);
    STORE_ROW(4); STORE_ROW(5); STORE_ROW(6); STORE_ROW(7);
}

#endif  // KUIPER_GEMM_H
