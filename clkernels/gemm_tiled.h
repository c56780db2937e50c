// gemm_tiled.h: the GPU GEMM (included by gemm.h, which documents the arguments).
//
// Good for: GPUs, where a work-group's local memory is a fast scratchpad shared by its
// work-items. The selector (layers/opencl_conv/selector.py) uses it on every device that
// is not a CPU; the cost model or `kuiper tune` picks the tile sizes, all -D options:
//
//   TILE_M x TILE_N  the tile of C one work-group computes (32..256 x 32..128)
//   WPT_M x WPT_N    the block of C one work-item keeps in registers (4x4 .. 16x8): a work-group
//                    has (TILE_M/WPT_M) x (TILE_N/WPT_N) work-items
//   TILE_K           how much of K one slab covers (8..32)
//   VEC              1, 2 or 4: global loads of VEC consecutive floats at once
//   LDS_VEC          0: a work-item's outputs sit TILE/WPT apart (below); 1: in runs of 4
//                    side by side, read from local memory as float4 (4x fewer local loads;
//                    WPT % 4 == 0), the runs 4*LOCAL apart (below)
//   SPLIT_K, K_SLICE split-K (gemm_split_k.h): the launch has SPLIT_K times more work-groups
//                    along z, each walking K_SLICE values of K (a multiple of TILE_K) and
//                    storing raw sums to slice `s` of C, a scratch buffer; gemm_split_k_reduce
//                    adds the slices, the bias and the epilogue. Only for Z = 1.
//
// How it works. The K axis is walked one slab at a time: the work-group copies a TILE_M x TILE_K
// slab of A and a TILE_K x TILE_N slab of B into local memory, so each element is read from
// global memory once per tile instead of once per multiply-add, and every work-item then does
// TILE_K x WPT_M x WPT_N multiply-adds from local memory, reusing each A value WPT_N times and
// each B value WPT_M times from registers ("register blocking"). Two slabs live in local memory
// (double buffering): while the work-items multiply slab t, their loads of slab t+1 are already
// in flight into registers, and are written to the other buffer afterwards: one barrier per
// slab instead of two, and the global-memory latency hides behind the arithmetic.
// A work-item's outputs sit TILE_M/WPT_M rows and TILE_N/WPT_N columns apart, not side by
// side, so that neighbouring work-items read neighbouring local-memory words (no bank
// conflicts) and store neighbouring columns of C (coalesced writes). With LDS_VEC the same idea
// holds for runs of 4: work-item tn reads columns 4tn..4tn+3 as one float4, then the run
// 4*LOCAL_N further on, so the float4 reads of neighbouring work-items are neighbours too
// (their stores of C are then 4 columns apart, not adjacent: the L2 cache merges them).
// (Its whole block side by side put their float4 reads 8 words apart: two-way bank conflicts,
// and 256x128x8 16x8 blocks ran at 34.0 TFLOP/s instead of 38.4.)
//
// Measured on an NVIDIA H100 80GB HBM3 (NVIDIA OpenCL, driver 580.159.04, fp32 peak ~67
// TFLOP/s), median of 10 kernel times from profiling events, TFLOP/s at 4096^3 (the table of
// every set, with convolution shapes, is in layers/opencl_gemm/parameter_sets.py):
//
//   TILE_MxTILE_NxTILE_K  WPT   VEC LDS_VEC  A stored M x K   A stored K x M (TRANS_A)
//   256x128x8             16x8  4   1        38.4             42.8  (64% of peak)
//   128x128x16            8x8   4   1        35.8             39.0
//   128x128x16            8x8   4   0        32.0
//   128x128x16            8x8   1   0        19.5                   (scalar global loads)
//   64x64x16              4x4   1   0        24.1                   (the old gemm_tiled:
//                                                                     17.9, single-buffered)
//
// With A stored K x M the A slab's float4 loads run along m and land in local memory as they
// are; stored M x K each one is scattered into four rows. Convolutions store their weight
// M x K (their A), transposed convolutions K x M.
// Tile sizes matter most for the shape: wide tiles leave SMs idle on small problems (ResNet-18
// stage 4 at batch 1: 0.35 TFLOP/s with 128x128, 1.24 with 32x32), which is why the cost
// model (layers/opencl_gemm/cost.py) counts work-groups per compute unit. The full
// table is in layers/opencl_gemm/parameter_sets.py.

#ifndef KUIPER_GEMM_TILED_H
#define KUIPER_GEMM_TILED_H

#ifndef VEC
#define VEC 1
#endif
#ifndef LDS_VEC
#define LDS_VEC 0
#endif
#ifndef SPLIT_K
#define SPLIT_K 1
#endif

#define LOCAL_M (TILE_M / WPT_M)      // work-items along M
#define LOCAL_N (TILE_N / WPT_N)      // work-items along N
#define THREADS (LOCAL_M * LOCAL_N)
// vectors of VEC floats each work-item loads per slab (rounded up; the extra ones are skipped)
#define A_VECTORS ((TILE_M * TILE_K / VEC + THREADS - 1) / THREADS)
#define B_VECTORS ((TILE_K * TILE_N / VEC + THREADS - 1) / THREADS)
#if LDS_VEC   // rows stay 16-byte aligned for float4 reads; 4 spare columns shift the banks
#define PAD 4
#else         // a spare column per local row: fewer bank conflicts when the slabs are stored
#define PAD 1
#endif
// Where a work-item's i-th row / j-th column of its block lies in the tile.
#if LDS_VEC     // runs of 4 side by side, the runs 4*LOCAL apart
#define ROW_OF(i) (((i) / 4) * (LOCAL_M * 4) + tm * 4 + (i) % 4)
#define COL_OF(j) (((j) / 4) * (LOCAL_N * 4) + tn * 4 + (j) % 4)
#else
#define ROW_OF(i) (tm + (i) * LOCAL_M)
#define COL_OF(j) (tn + (j) * LOCAL_N)
#endif

// Vector v of A's slab starting at (m0, k0): where it is in the slab (m, k of its first
// element) follows the stored order, so consecutive work-items read consecutive addresses.
#if TRANS_A   // stored K x M: the VEC elements run along m
#define A_SLAB_POS(v, m, k) m = ((v) % (TILE_M / VEC)) * VEC; k = (v) / (TILE_M / VEC)
#define A_COUNT(gm, gk) ((gk) < K ? M - (gm) : 0)
#define A_PUT(buf, m, k, e, value) As[buf][k][(m) + (e)] = value
#else         // stored M x K: the VEC elements run along k
#define A_SLAB_POS(v, m, k) k = ((v) % (TILE_K / VEC)) * VEC; m = (v) / (TILE_K / VEC)
#define A_COUNT(gm, gk) ((gm) < M ? K - (gk) : 0)
#define A_PUT(buf, m, k, e, value) As[buf][(k) + (e)][m] = value
#endif
#if TRANS_B   // stored N x K: the VEC elements run along k
#define B_SLAB_POS(v, k, n) k = ((v) % (TILE_K / VEC)) * VEC; n = (v) / (TILE_K / VEC)
#define B_COUNT(gk, gn) ((gn) < N ? K - (gk) : 0)
#define B_PUT(buf, k, n, e, value) Bs[buf][(k) + (e)][n] = value
#else         // stored K x N: the VEC elements run along n
#define B_SLAB_POS(v, k, n) n = ((v) % (TILE_N / VEC)) * VEC; k = (v) / (TILE_N / VEC)
#define B_COUNT(gk, gn) ((gk) < K ? N - (gn) : 0)
#define B_PUT(buf, k, n, e, value) Bs[buf][k][(n) + (e)] = value
#endif

__kernel __attribute__((reqd_work_group_size(LOCAL_N, LOCAL_M, 1)))
void gemm_tiled(GEMM_ARGS)
{
    const int tn = get_local_id(0);
    const int tm = get_local_id(1);
    const int tid = tm * LOCAL_N + tn;
    const int n0 = get_group_id(0) * TILE_N;
    const int m0 = get_group_id(1) * TILE_M;
#if SPLIT_K > 1   // z is the slice of K (the host splits only Z = 1 products)
    const int z = 0;
    const int k_begin = get_group_id(2) * K_SLICE;
    const int k_end = min(K, k_begin + K_SLICE);
    C += get_group_id(2) * M * N;     // this slice's partial sums
#else
    const int z = get_group_id(2);
    const int k_begin = 0, k_end = K;
#endif
    const int g = z % groups;
    A += g * a_group_stride;
    B += z * b_batch_stride;
    C += z * c_batch_stride;

    __local float As[2][TILE_K][TILE_M + PAD] __attribute__((aligned(16)));   // [buf][k][m]
    __local float Bs[2][TILE_K][TILE_N + PAD] __attribute__((aligned(16)));   // [buf][k][n]
    float ra[A_VECTORS * VEC], rb[B_VECTORS * VEC];   // the next slab, on its way

    float acc[WPT_M][WPT_N];
#pragma unroll
    for (int i = 0; i < WPT_M; ++i)
#pragma unroll
        for (int j = 0; j < WPT_N; ++j)
            acc[i][j] = 0.0f;

// Global -> registers: this work-item's vectors of the slab starting at k0.
#define FETCH_SLAB(k0)                                                                      \
    for (int l = 0; l < A_VECTORS; ++l) {                                                   \
        const int v = tid + l * THREADS;                                                    \
        int m, k;                                                                           \
        A_SLAB_POS(v, m, k);                                                                \
        const int gm = m0 + m, gk = (k0) + k;                                               \
        const int count = v < TILE_M * TILE_K / VEC ? A_COUNT(gm, gk) : 0;                  \
        LOAD_A_VECTOR(A + A_INDEX(min(gm, M - 1), min(gk, K - 1)), count, VEC, ra + l * VEC); \
    }                                                                                       \
    for (int l = 0; l < B_VECTORS; ++l) {                                                   \
        const int v = tid + l * THREADS;                                                    \
        int k, n;                                                                           \
        B_SLAB_POS(v, k, n);                                                                \
        const int gk = (k0) + k, gn = n0 + n;                                               \
        const int count = v < TILE_K * TILE_N / VEC ? B_COUNT(gk, gn) : 0;                  \
        LOAD_B_VECTOR(B + B_INDEX(min(gk, K - 1), min(gn, N - 1)), count, VEC, rb + l * VEC); \
    }
// Registers -> local buffer `buf`.
#define STORE_SLAB(buf)                                                                     \
    for (int l = 0; l < A_VECTORS; ++l) {                                                   \
        const int v = tid + l * THREADS;                                                    \
        int m, k;                                                                           \
        A_SLAB_POS(v, m, k);                                                                \
        if (v < TILE_M * TILE_K / VEC)                                                      \
            for (int e = 0; e < VEC; ++e)                                                   \
                A_PUT(buf, m, k, e, ra[l * VEC + e]);                                       \
    }                                                                                       \
    for (int l = 0; l < B_VECTORS; ++l) {                                                   \
        const int v = tid + l * THREADS;                                                    \
        int k, n;                                                                           \
        B_SLAB_POS(v, k, n);                                                                \
        if (v < TILE_K * TILE_N / VEC)                                                      \
            for (int e = 0; e < VEC; ++e)                                                   \
                B_PUT(buf, k, n, e, rb[l * VEC + e]);                                       \
    }

    // Slabs never straddle k_end inside K: a slice's length is a multiple of TILE_K.
    const int slabs = (k_end - k_begin + TILE_K - 1) / TILE_K;
    FETCH_SLAB(k_begin);
    STORE_SLAB(0);
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int t = 0; t < slabs; ++t) {
        const int cur = t & 1;
        if (t + 1 < slabs) {
            // loads in flight during the multiply-adds below
            FETCH_SLAB(k_begin + (t + 1) * TILE_K);
        }
#pragma unroll
        for (int k = 0; k < TILE_K; ++k) {
            float a[WPT_M], b[WPT_N];
#if LDS_VEC
#pragma unroll
            for (int i = 0; i < WPT_M; i += 4)
                vstore4(*(__local const float4 *)&As[cur][k][ROW_OF(i)], 0, a + i);
#pragma unroll
            for (int j = 0; j < WPT_N; j += 4)
                vstore4(*(__local const float4 *)&Bs[cur][k][COL_OF(j)], 0, b + j);
#else
#pragma unroll
            for (int i = 0; i < WPT_M; ++i)
                a[i] = As[cur][k][ROW_OF(i)];
#pragma unroll
            for (int j = 0; j < WPT_N; ++j)
                b[j] = Bs[cur][k][COL_OF(j)];
#endif
#pragma unroll
            for (int i = 0; i < WPT_M; ++i)
#pragma unroll
                for (int j = 0; j < WPT_N; ++j)
                    acc[i][j] += a[i] * b[j];
        }
        if (t + 1 < slabs) {
            STORE_SLAB(cur ^ 1);   // the other buffer: read in slab t-1, free since its barrier
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
#undef FETCH_SLAB
#undef STORE_SLAB

#pragma unroll
    for (int i = 0; i < WPT_M; ++i) {
        const int gm = m0 + ROW_OF(i);
        if (gm >= M)
            break;
#pragma unroll
        for (int j = 0; j < WPT_N; ++j) {
            const int gn = n0 + COL_OF(j);
            if (gn >= N)
                break;
#if SPLIT_K > 1   // raw sums: gemm_split_k_reduce adds the bias and the epilogue
            C[gm * N + gn] = acc[i][j];
#else
            const float v = acc[i][j] + BIAS_OF(g, gm, gn);
            C[gm * N + gn] = kuiper_epilogue(v, residual, z * c_batch_stride + gm * N + gn);
#endif
        }
    }
}

#endif  // KUIPER_GEMM_TILED_H
