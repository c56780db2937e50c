// gemm_blocked.h: the CPU GEMM (included by gemm.h, which documents the arguments).
//
// Good for: CPU devices (PoCL). The selector (layers/opencl_conv/selector.py) uses it on
// every device of type CPU. A CPU has no scratchpad to manage (its caches do that job) and runs
// a work-group as a loop over its work-items, cut in pieces at every barrier: the GPU kernel's
// local-memory tiles cost more than they save there (20x slower under PoCL). What a CPU needs:
//
// 1. SIMD. Each work-item computes an 8 x BLOCK_N block of C as eight vector registers, one per
//    row (BLOCK_N = 8: float8, AVX2; 16: float16, AVX-512). Per step of k it loads BLOCK_N
//    consecutive values of a B row as one vector, broadcasts each of the 8 A values and does 8
//    vector multiply-adds: 8 x BLOCK_N multiply-adds for 8 + 1 loads, like a BLAS micro-kernel.
//    BLOCK_N = 32 keeps two float16 per row (16 registers): 16 multiply-adds for 8 + 2 loads.
//    A core that loads 2 values and issues 2 FMAs per cycle waits on the loads of the 8x16
//    loop, not on the 8x32 loop's (gemm_params.py has the measurements).
// 2. Cache blocking of K (BLOCK_K > 0). Without it one work-item walks the whole of K before
//    the next starts, so the panel of B it read (K rows) is gone from the cache when its
//    neighbour needs the same panel: at 2048^3 that halves the speed. With it, the work-items
//    of a group walk K together, BLOCK_K rows at a time, separated by a barrier: PoCL then runs
//    every work-item of the group over one chunk before the next chunk, so the group's slabs of
//    A (8*GM x BLOCK_K) and B (BLOCK_K x BLOCK_N*GN) are read from the cache by all of them.
//    The C blocks stay in the work-items' registers (PoCL keeps them across the barrier).
// 3. Work-group order (M_FASTEST): consecutive work-groups take consecutive row blocks of C,
//    so the panel of B they share stays in the L2 cache while A (a layer's weight, small)
//    streams past it.
// 4. Packed B (PACKED_B=1; im2col_gemm's column matrix, written that way by conv2d.cl's
//    im2col_packed): B is stored in strips of BLOCK_N columns, each strip K rows of BLOCK_N
//    consecutive values, its columns padded with zeros to a whole strip. A work-item's panel
//    is then one contiguous run. Unpacked, its K rows lie N values apart: when N * 4 bytes is
//    a multiple of 4096 (YOLOv5s's 160 x 160 = 25600 pixels) every row falls in the same
//    L1-cache set, and the 64 x 25600 x 288 product ran at 197 GFLOP/s instead of 273.
//
// Edges: row/column indices are clamped into the matrices (the extra results are computed and
// thrown away), so every work-item reaches every barrier; stores are guarded.

#ifndef KUIPER_GEMM_BLOCKED_H
#define KUIPER_GEMM_BLOCKED_H

#include "index_math.h"   // imin(): PoCL's min() of ints is a call (index_math.h says why)

#ifndef BLOCK_N
#define BLOCK_N 8
#endif
#ifndef KUIPER_CPU_DEVICE
#define KUIPER_CPU_DEVICE 0 // 1 on CPU devices (the runtime's device options)
#endif
#ifndef BLOCK_K
#define BLOCK_K 0           // 0: no K blocking, one pass over K (small K)
#endif
#ifndef PACKED_B
#define PACKED_B 0          // 1: B packed in strips of BLOCK_N columns (4. above)
#endif
#ifndef M_FASTEST
#define M_FASTEST 0
#endif
#ifndef MR
#define MR 8                // rows of C per work-item: 8, 6 or 4 (5. below)
#endif

// FOR_ROWS(X): X(i) for each row i of a work-item's block.
#if MR == 8
#define FOR_ROWS(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7)
#elif MR == 6
#define FOR_ROWS(X) X(0) X(1) X(2) X(3) X(4) X(5)
#elif MR == 4
#define FOR_ROWS(X) X(0) X(1) X(2) X(3)
#else
#error "gemm_blocked: MR must be 8, 6 or 4"
#endif

// VW: the SIMD width of one vector of a C row; NV: vectors per row (BLOCK_N = NV * VW).
#if BLOCK_N == 32
#define VW 16
#define NV 2
#else
#define VW BLOCK_N
#define NV 1
#endif

#define U_ROW8(q) (ushort8)((q)[0], (q)[1], (q)[2], (q)[3], (q)[4], (q)[5], (q)[6], (q)[7])
#define U_ROW16(q) (ushort16)(U_ROW8(q), U_ROW8((q) + 8))
#if VW == 16
#define floatB float16
#define F_ROW(p) (float16)(p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7], \
                           p[8], p[9], p[10], p[11], p[12], p[13], p[14], p[15])
#define H_ROW(p) kuiper_half_to_float16(U_ROW16((__global const ushort *)(p)))
#define B_GATHER(k, o) (float16)(B_AT(k, q[o]), B_AT(k, q[o + 1]), B_AT(k, q[o + 2]),     \
    B_AT(k, q[o + 3]), B_AT(k, q[o + 4]), B_AT(k, q[o + 5]), B_AT(k, q[o + 6]),            \
    B_AT(k, q[o + 7]), B_AT(k, q[o + 8]), B_AT(k, q[o + 9]), B_AT(k, q[o + 10]),           \
    B_AT(k, q[o + 11]), B_AT(k, q[o + 12]), B_AT(k, q[o + 13]), B_AT(k, q[o + 14]),        \
    B_AT(k, q[o + 15]))
#define EPILOGUE_B kuiper_epilogue16
#define STORE_B STORE_16
#else
#define floatB float8
// 8 scalar loads the compiler merges into one vector load (PoCL compiles vload8 to a function
// call, which costs as much as the whole multiply-add block)
#define F_ROW(p) (float8)(p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7])
#define H_ROW(p) kuiper_half_to_float8(U_ROW8((__global const ushort *)(p)))
#define B_GATHER(k, o) (float8)(B_AT(k, q[o]), B_AT(k, q[o + 1]), B_AT(k, q[o + 2]),      \
    B_AT(k, q[o + 3]), B_AT(k, q[o + 4]), B_AT(k, q[o + 5]), B_AT(k, q[o + 6]),            \
    B_AT(k, q[o + 7]))
#define EPILOGUE_B kuiper_epilogue8
#define STORE_B STORE_8
#endif
// A row piece of B (half storage: its 16-bit values loaded one by one, which the compiler merges,
// and converted as a vector, gemm.h), or of floats (the bias)
#if HALF_B
#define B_ROW H_ROW
#else
#define B_ROW F_ROW
#endif

// c_i (and d_i, the second vector when NV = 2) += A[row r_i, k] * B's row piece, for the 8
// rows: eight (sixteen) vector multiply-adds. Written as a*b+c, not mad(): -cl-mad-enable
// lets the compiler fuse it into one FMA instruction, whereas PoCL turns mad() on vectors into
// a function call (3x slower).
// The rows' multiply-adds read `k`, the loop's variable. A stored as half (a convolution's
// weight under fp16): with 8 rows, the 8 values of a step of k are converted together, as one
// vector (gemm.h), then broadcast: 8 conversions one at a time cost more than the
// multiply-adds; with 6 or 4 rows, one at a time.
#if NV == 2
#define FMA_A(i, value) { const floatB a = (floatB)(value); c##i += a * bv; d##i += a * bw; }
#else
#define FMA_A(i, value) c##i += (floatB)(value) * bv
#endif
#define FMA_ROW(i) FMA_A(i, A_FROM(a##i, k));
#if HALF_A && MR == 8
#define FMA_ROWS {                                                                          \
    const float8 av = kuiper_half_to_float8((ushort8)(A_BITS(a0, k), A_BITS(a1, k),           \
        A_BITS(a2, k), A_BITS(a3, k), A_BITS(a4, k), A_BITS(a5, k), A_BITS(a6, k),             \
        A_BITS(a7, k)));                                                                       \
    FMA_A(0, av.s0); FMA_A(1, av.s1); FMA_A(2, av.s2); FMA_A(3, av.s3);                        \
    FMA_A(4, av.s4); FMA_A(5, av.s5); FMA_A(6, av.s6); FMA_A(7, av.s7); }
#else
#define FMA_ROWS FOR_ROWS(FMA_ROW)
#endif

// Store the VW values of one vector of a row of the block (those left of column N), each
// through the epilogue; `index` is the flat output index of the first value. A whole vector
// goes through the epilogue as one (epilogue.h says why), with its bias: one per row (a
// convolution's channel) or one per column (a linear layer's, loaded as a vector); the last,
// partial column block goes one value at a time.
inline void store_row(__global float *row, const int n, const int N, const floatB v,
                      const float row_bias, __global const float *bias, const int bias_mode,
                      __global const float *residual, const int index)
{
    const int count = imin(VW, N - n);
    if (count == VW) {    // a whole vector: the epilogue runs on it (activation.h says why)
        floatB b = (floatB)(row_bias);
        if (bias_mode == 2) {  // a linear layer's bias, one per column
            __global const float *column_bias = bias + n;
            b = F_ROW(column_bias);
        }
        const floatB w = EPILOGUE_B(v + b, residual, index);
        __global float *out = row + n;
        STORE_B(out, w);
        return;
    }
    float r[VW];           // the last, partial column block: one value at a time
#if VW == 16
    vstore16(v, 0, r);
#else
    vstore8(v, 0, r);
#endif
    for (int j = 0; j < count; ++j) {
        const float b = bias_mode == 2 ? bias[n + j] : row_bias;
        row[n + j] = kuiper_epilogue(r[j] + b, residual, index + j);
    }
}

#define STORE_PIECE(i, v, o) \
    store_row(C + (m0 + i) * N, n + (o), N, v, bias_mode == 1 ? bias[g * M + m0 + i] : 0.0f, \
              bias, bias_mode, residual, z * c_batch_stride + (m0 + i) * N + n + (o))
#if NV == 2
#define STORE_ROW(i) \
    if (active && m0 + i < M) { STORE_PIECE(i, c##i, 0); STORE_PIECE(i, d##i, VW); }
#else
#define STORE_ROW(i) if (active && m0 + i < M) STORE_PIECE(i, c##i, 0);
#endif
// A row of A (clamped into A): a pointer to its first value, and its accumulators. Value k of
// the row is A_FROM(a_i, k). (Pointers made before the loop, not `A_AT(row, k)` in it: with the
// row indices known to the compiler, LLVM 14 computed the six A_INDEX(row, k) of a 6x16 block
// in one vector register per step of k and spilled an accumulator to make room for it, 1.7x
// slower on ViT-S's linear layers.)
#if TRANS_A
#define A_K_STEP M          // A stored K x M: a row's values lie M apart
#else
#define A_K_STEP 1
#endif
#define ROW_INDEX(i) __global const A_ELEM *a##i = A + A_INDEX(imin(m0 + i, M - 1), 0);
#define A_BITS(p, k) ((__global const ushort *)(p))[(k) * A_K_STEP]
#if HALF_A
#define A_FROM(p, k) kuiper_half_to_float(A_BITS(p, k))
#else
#define A_FROM(p, k) (p)[(k) * A_K_STEP]
#endif
#if NV == 2
#define ROW_ACC(i) floatB c##i = 0.0f, d##i = 0.0f;
#else
#define ROW_ACC(i) floatB c##i = 0.0f;
#endif

// One step of k: B's row piece as one vector load (two when NV = 2), or gathered value by value
// (clamped columns), then the MR rows' multiply-adds.
#if PACKED_B
#define B_PIECE(k) (B + (k) * BLOCK_N)
#else
#define B_PIECE(k) (B + (k) * N + n)
#endif
#if NV == 2
#define VECTOR_STEP(k) { \
    const floatB bv = B_ROW(B_PIECE(k)); const floatB bw = B_ROW((B_PIECE(k) + VW)); FMA_ROWS }
#define GATHER_STEP(k) { const floatB bv = B_GATHER(k, 0); const floatB bw = B_GATHER(k, VW); \
    FMA_ROWS }
#else
#define VECTOR_STEP(k) { const floatB bv = B_ROW(B_PIECE(k)); FMA_ROWS }
#define GATHER_STEP(k) { const floatB bv = B_GATHER(k, 0); FMA_ROWS }
#endif

// One work-item = an MR x BLOCK_N block of C. Global size (ceil(N/BLOCK_N), ceil(M/MR), Z)
// rounded up to the work-group size, dims 0 and 1 swapped when M_FASTEST.
__kernel void gemm_blocked(GEMM_ARGS)
{
#if M_FASTEST
    const int n_wanted = get_global_id(1) * BLOCK_N, m_wanted = get_global_id(0) * MR;
#else
    const int n_wanted = get_global_id(0) * BLOCK_N, m_wanted = get_global_id(1) * MR;
#endif
    const int z = get_global_id(2);
    // Work-items past the edge compute a clamped copy and store nothing: with K blocking they
    // must still reach every barrier of their group.
    const bool active = n_wanted < N && m_wanted < M;
    const int n = imin(n_wanted, (N - 1) / BLOCK_N * BLOCK_N);
    const int m0 = imin(m_wanted, (M - 1) / MR * MR);
    const int g = z % groups;
    A += g * a_group_stride;
    B += z * b_batch_stride;
    C += z * c_batch_stride;
    // Rows and columns this work-item reads, clamped into the matrices at the edges.
    FOR_ROWS(ROW_INDEX)
    int q[BLOCK_N];
    for (int j = 0; j < BLOCK_N; ++j)
        q[j] = imin(n + j, N - 1);
    FOR_ROWS(ROW_ACC)
    // B's rows [0, k_vector) are read one vector per row, the rest gathered value by value
#if PACKED_B
    const int k_vector = K;         // B packed in strips of BLOCK_N columns, padded
    B += n * K;                     // this work-item's strip (n / BLOCK_N): K rows of BLOCK_N
#elif TRANS_B
    const int k_vector = 0;         // B stored transposed: always gather
#elif KUIPER_CPU_DEVICE
    // The common case, a whole block of columns: every row. The last, partial block (a 7 x 7 or
    // 14 x 14 image: N = 49 or 196, a quarter or a thirteenth of the work-items) loads whole
    // vectors too, as long as the vector ends inside B: its extra lanes read the next row's
    // first values, whose results are never stored. Gathered, one load per value, those
    // work-items took several times as long as the others. Row k's vector ends at
    // k * N + n + BLOCK_N <= K * N for k <= K - ceil((n + BLOCK_N) / N).
    const int k_vector = n + BLOCK_N <= N ? K : K + 1 - (n + BLOCK_N + N - 1) / N;
#else
    // Other devices (tests force this CPU kernel on GPUs): the partial block gathers every row,
    // in a loop of its own (NVIDIA's compiler summed wrongly when a vector loop and a gather
    // loop followed each other, as it did with K blocking's chunks)
    const int k_vector = n + BLOCK_N <= N ? K : 0;
#endif
#if BLOCK_K > 0
    for (int kc = 0; kc < K; kc += BLOCK_K) {
        const int k_end = imin(kc + BLOCK_K, K);
#else
    {
        const int kc = 0, k_end = K;
#endif
#if KUIPER_CPU_DEVICE
        const int k_split = imin(imax(k_vector, kc), k_end);
        for (int k = kc; k < k_split; ++k)
            VECTOR_STEP(k)
        for (int k = k_split; k < k_end; ++k)   // B transposed, or a partial block's last rows
            GATHER_STEP(k)
#else
        if (k_vector == K) {
            for (int k = kc; k < k_end; ++k)
                VECTOR_STEP(k)
        } else {
            for (int k = kc; k < k_end; ++k)
                GATHER_STEP(k)
        }
#endif
#if BLOCK_K > 0
        barrier(CLK_LOCAL_MEM_FENCE);   // the group walks K together (see 2. above)
#endif
    }
    FOR_ROWS(STORE_ROW)
}

#endif  // KUIPER_GEMM_BLOCKED_H
