// gemm_mma.h: the tensor-core GEMM (included by gemm.h under -DGEMM_MMA=1; gemm.h documents
// the arguments, which are the same as every other GEMM family's).
//
// Good for: NVIDIA GPUs (Ampere and later: A100, H100, H200) under precision "tf32" or "fp16",
// where it is about 7x (TF32) and 15x (FP16) ahead of the FMA units on paper. The selector offers
// it only where kuiper/opencl/device/tensor_cores.py's probe built and ran it correctly on the
// device; everywhere else the portable families of gemm.h run, and `-DMMA_EMULATED=1` builds
// this same kernel anywhere (PoCL, Oclgrind) for the tests.
//
// 1. What a warp-level mma does. A GPU runs work-items in groups of 32 that execute together,
//    a *warp* (NVIDIA's name; work-items 0-31 of a work-group, x fastest, are warp 0). The
//    instruction
//
//        mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32   d, a, b, c     (TF32)
//        mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32    d, a, b, c     (FP16)
//
//    is executed by the whole warp at once and computes ONE small matrix product,
//    D (16 x 8) = A (16 x K) @ B (K x 8) + C, K = 8 (TF32) or 16 (FP16), on the tensor cores:
//    1024 (2048) multiply-adds for one instruction, where an FMA unit does one. No work-item
//    holds a whole matrix: each holds a *fragment*, a few registers, and the 32 fragments
//    together are the matrix. The inputs are rounded to TF32 (10 bits of mantissa, the range of
//    float) or converted to half (10 bits, range 6e-5 .. 65504); the products are exact and are
//    summed in float.
//
// 2. The fragment layouts (PTX ISA, "Matrix Fragments for mma.m16n8k8 / mma.m16n8k16"), with
//    lane = the work-item's index in its warp, g = lane / 4 (its group, 0..7), t = lane % 4:
//
//      TF32, m16n8k8: four registers of A, each one tf32 value (as a 32-bit word),
//          a0 = A[g][t]      a1 = A[g + 8][t]      a2 = A[g][t + 4]      a3 = A[g + 8][t + 4]
//        two of B:   b0 = B[t][g]         b1 = B[t + 4][g]
//      FP16, m16n8k16: four registers of A, each TWO halves side by side along k (the lower 16
//        bits hold the smaller k), so a register is A[row][2t .. 2t+1]:
//          a0 = A[g][2t..]   a1 = A[g + 8][2t..]   a2 = A[g][2t + 8..]   a3 = A[g + 8][2t + 8..]
//        two of B:   b0 = B[2t..2t+1][g]  b1 = B[2t + 8..2t + 9][g]
//      C and D, both: four floats, c0 = C[g][2t]  c1 = C[g][2t + 1]  c2 = C[g + 8][2t]
//        c3 = C[g + 8][2t + 1]
//
//    The same pattern holds for both: a work-item's registers of A and B lie along k, so the
//    tiles below are kept in local memory with k contiguous (As[m][k], Bs[n][k]): a fragment is
//    then one 32-bit word per register, and the 32 lanes of a warp read 32 different banks
//    (rows MMA_LDW words apart, MMA_LDW = 4 mod 8: row g starts 4g banks further on, t adds
//    0..3).
//
// 3. The kernel. A work-group of MMA_WARPS_M x MMA_WARPS_N warps computes an MMA_TILE_M x
//    MMA_TILE_N tile of C; each warp an MMA_WARP_M x MMA_WARP_N piece of it, as MMA_FRAG_M x
//    MMA_FRAG_N mma tiles of 16 x 8 whose C fragments stay in registers (acc). K is walked
//    MMA_TILE_K at a time, double-buffered like gemm_tiled.h: while the tensor cores work on
//    slab s, the loads of slab s + 1 are in flight to registers (MMA_VEC consecutive values at
//    once, along whichever axis is contiguous in memory), and are written to the other local
//    buffer afterwards, already rounded to tf32 (cvt.rna.tf32.f32: to nearest, ties away from
//    zero) or converted to half (vstore_half: to nearest even), so each value is converted once,
//    not once per warp that reads it. Per step of k every warp loads MMA_FRAG_M fragments of A
//    and MMA_FRAG_N of B from local memory and issues MMA_FRAG_M x MMA_FRAG_N mma. The store
//    applies the bias and the fused epilogue (epilogue.h) exactly like gemm_tiled.h. Edges:
//    loads outside the matrices are zeros (zeros add nothing to the sums), stores are guarded,
//    so any M, N, K works with any parameter set.
//
// 4. Why inline PTX, and why it stays optional. OpenCL C has no tensor-core instruction (and
//    NVIDIA's OpenCL has no cl_khr_fp16 nor subgroups). PTX is NVIDIA's virtual instruction set,
//    and NVIDIA's OpenCL compiler accepts `asm volatile("...")` with PTX inside, as CUDA does:
//    the one way to reach the tensor cores from OpenCL. No other vendor's compiler knows PTX
//    (AMD's and Intel's tensor units have their own, different instructions), PoCL and Oclgrind
//    cannot build it, and an NVIDIA driver could stop accepting it. So: gemm.h compiles this file
//    only under -DGEMM_MMA=1; the probe (tensor_cores.py) builds and runs this kernel in a child
//    process once per device and driver, and checks its result exactly (small integers: exact in
//    tf32 and half); only where it passed do the parameter sets reach the selector, the cost model
//    and `kuiper tune` (layers/opencl_gemm/mma_sets.py). Everywhere else nothing changes.
//
// 5. The emulation (-DMMA_EMULATED=1), for testing this kernel where there are no tensor cores.
//    Each mma is replaced by a function that does what the warp does: every lane writes its
//    fragments of A and B to its warp's scratch in local memory at their (row, column) places,
//    a barrier, then every lane computes its four values of D from the scratch with float FMAs
//    (the inputs already hold tf32 / half values: exactly the products the tensor cores form),
//    and a barrier before the scratch is used again. Everything else, the tiles, the rounding,
//    the fragment loads and the index arithmetic, is the code the GPU runs, so the tests of the
//    emulation under PoCL and Oclgrind check the layouts and the edges; only the instruction is
//    swapped. (The barriers hold the whole work-group, a superset of the warp: every lane calls
//    the same mma in the same order.)
//
// -D options (the host's parameter sets): MMA_F16 (0: TF32, 1: FP16), MMA_TILE_M / _N / _K,
// MMA_WARPS_M / _N, MMA_VEC (1, 2 or 4), MMA_EMULATED. Names apart from gemm_tiled.h's, which is
// compiled into the same program with its own defaults.

#ifndef KUIPER_GEMM_MMA_H
#define KUIPER_GEMM_MMA_H

#ifndef MMA_F16
#define MMA_F16 0
#endif
#ifndef MMA_TILE_M
#define MMA_TILE_M 64
#endif
#ifndef MMA_TILE_N
#define MMA_TILE_N 64
#endif
#ifndef MMA_TILE_K
#define MMA_TILE_K 16
#endif
#ifndef MMA_WARPS_M
#define MMA_WARPS_M 2
#endif
#ifndef MMA_WARPS_N
#define MMA_WARPS_N 2
#endif
#ifndef MMA_VEC
#define MMA_VEC 4
#endif
#ifndef MMA_EMULATED
#define MMA_EMULATED 0
#endif

// Unrolled on the GPU (the fragments and accumulators must be registers); the emulation is left
// rolled, which keeps its compile time down (PoCL: seconds per program, not tens of them)
#if MMA_EMULATED
#define MMA_UNROLL
#else
#define MMA_UNROLL _Pragma("unroll")
#endif

#define MMA_WARPS (MMA_WARPS_M * MMA_WARPS_N)
#define MMA_THREADS (32 * MMA_WARPS)
#define MMA_WARP_M (MMA_TILE_M / MMA_WARPS_M)   // rows of C per warp: MMA_FRAG_M mma tiles of 16
#define MMA_WARP_N (MMA_TILE_N / MMA_WARPS_N)   // columns of C per warp: MMA_FRAG_N mma tiles of 8
#define MMA_FRAG_M (MMA_WARP_M / 16)
#define MMA_FRAG_N (MMA_WARP_N / 8)
#if MMA_F16
#define MMA_K 16                      // k of one mma
#define MMA_PER_WORD 2             // halves per 32-bit word of local memory
#else
#define MMA_K 8
#define MMA_PER_WORD 1
#endif
#define MMA_KW (MMA_TILE_K / MMA_PER_WORD)   // words per row of a slab
#define MMA_LDW (MMA_KW + 4)                 // ... with 4 spare ones: conflict-free fragments
// vectors of MMA_VEC values each work-item loads per slab (rounded up; the extra are skipped)
#define MMA_A_VECTORS ((MMA_TILE_M * MMA_TILE_K / MMA_VEC + MMA_THREADS - 1) / MMA_THREADS)
#define MMA_B_VECTORS ((MMA_TILE_N * MMA_TILE_K / MMA_VEC + MMA_THREADS - 1) / MMA_THREADS)

// --- one value into local memory: rounded to tf32, or converted to half --------------------

#if !MMA_F16
// The tf32 value nearest to x (ties away from zero) as a 32-bit word: a float whose 13 lowest
// mantissa bits are 0.
inline uint mma_tf32(const float x)
{
#if MMA_EMULATED
    const uint bits = as_uint(x);
    if ((bits & 0x7f800000u) == 0x7f800000u)   // inf and NaN stay what they are
        return bits;
    return (bits + 0x1000u) & 0xffffe000u;      // half of the dropped bits' unit: away from 0
#else
    uint word;
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(word) : "f"(x));
    return word;
#endif
}
#endif

// Element (row, k) of a slab in local memory (`rows` is As or Bs of one buffer).
inline void mma_put(__local uint *rows, const int row, const int k, const float x)
{
#if MMA_F16
    vstore_half(x, row * (2 * MMA_LDW) + k, (__local half *)rows);   // to nearest even
#else
    rows[row * MMA_LDW + k] = mma_tf32(x);
#endif
}

// --- the warp's lane, and one mma -----------------------------------------------------------

inline int mma_lane(void)
{
#if MMA_EMULATED
    return get_local_id(0) % 32;
#else
    uint lane;
    asm volatile("mov.u32 %0, %%laneid;" : "=r"(lane));
    return (int)lane;
#endif
}

#if MMA_EMULATED
// Scratch words per warp: A's 16 rows of 8 words (8 tf32 values, or 16 halves), B's 8 columns of
// 8 words (its values along k, as the fragments hold them).
#define MMA_SCRATCH (16 * 8 + 8 * 8)

// c += A @ B for one 16 x 8 x MMA_K tile, as the warp's mma would (point 5 above). `s`: this
// warp's scratch. Every work-item of the group calls it, in the same order.
inline void mma_sync(float c[4], const uint a[4], const uint b[2], __local uint *s, const int lane)
{
    const int g = lane / 4, t = lane % 4;
    __local uint *sa = s, *sb = s + 16 * 8;   // sa[row][word], sb[column][word]
    // the fragment layouts of point 2, in words: the same for both precisions
    sa[g * 8 + t] = a[0];
    sa[(g + 8) * 8 + t] = a[1];
    sa[g * 8 + t + 4] = a[2];
    sa[(g + 8) * 8 + t + 4] = a[3];
    sb[g * 8 + t] = b[0];
    sb[g * 8 + t + 4] = b[1];
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int i = 0; i < 4; ++i) {
        const int row = g + (i >= 2 ? 8 : 0), col = 2 * t + (i & 1);
        float sum = c[i];
        for (int k = 0; k < MMA_K; ++k) {
#if MMA_F16
            const float x = vload_half(row * 16 + k, (__local half *)sa);
            const float y = vload_half(col * 16 + k, (__local half *)sb);
#else
            const float x = as_float(sa[row * 8 + k]);
            const float y = as_float(sb[col * 8 + k]);
#endif
            sum = fma(x, y, sum);
        }
        c[i] = sum;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
}
#define MMA_OP(c, a, b) mma_sync(c, a, b, scratch + warp * MMA_SCRATCH, lane)

#else   // the tensor cores, through inline PTX

inline void mma_sync(float c[4], const uint a[4], const uint b[2])
{
    float d0, d1, d2, d3;
#if MMA_F16
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                 "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%11,%12,%13};"
                 : "=f"(d0), "=f"(d1), "=f"(d2), "=f"(d3)
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]),
                   "f"(c[0]), "f"(c[1]), "f"(c[2]), "f"(c[3]));
#else
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "
                 "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%11,%12,%13};"
                 : "=f"(d0), "=f"(d1), "=f"(d2), "=f"(d3)
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]),
                   "f"(c[0]), "f"(c[1]), "f"(c[2]), "f"(c[3]));
#endif
    c[0] = d0;
    c[1] = d1;
    c[2] = d2;
    c[3] = d3;
}
#define MMA_OP(c, a, b) mma_sync(c, a, b)
#endif

// --- the slabs: global memory -> registers -> local memory ---------------------------------

// Vector v of A's slab: its first element's (m, k) in the slab, along the axis stored
// contiguously, and how many of its values lie inside the matrix.
#if TRANS_A   // stored K x M: the vector runs along m
#define MMA_A_POS(v, m, k) \
    m = ((v) % (MMA_TILE_M / MMA_VEC)) * MMA_VEC; k = (v) / (MMA_TILE_M / MMA_VEC)
#define MMA_A_COUNT(gm, gk) ((gk) < K ? M - (gm) : 0)
#define MMA_A_PUT(buf, m, k, e, x) mma_put(As[buf], (m) + (e), k, x)
#else         // stored M x K: along k
#define MMA_A_POS(v, m, k) \
    k = ((v) % (MMA_TILE_K / MMA_VEC)) * MMA_VEC; m = (v) / (MMA_TILE_K / MMA_VEC)
#define MMA_A_COUNT(gm, gk) ((gm) < M ? K - (gk) : 0)
#define MMA_A_PUT(buf, m, k, e, x) mma_put(As[buf], m, (k) + (e), x)
#endif
#if TRANS_B   // stored N x K: along k
#define MMA_B_POS(v, k, n) \
    k = ((v) % (MMA_TILE_K / MMA_VEC)) * MMA_VEC; n = (v) / (MMA_TILE_K / MMA_VEC)
#define MMA_B_COUNT(gk, gn) ((gn) < N ? K - (gk) : 0)
#define MMA_B_PUT(buf, k, n, e, x) mma_put(Bs[buf], n, (k) + (e), x)
#else         // stored K x N: along n
#define MMA_B_POS(v, k, n) \
    n = ((v) % (MMA_TILE_N / MMA_VEC)) * MMA_VEC; k = (v) / (MMA_TILE_N / MMA_VEC)
#define MMA_B_COUNT(gk, gn) ((gk) < K ? N - (gn) : 0)
#define MMA_B_PUT(buf, k, n, e, x) mma_put(Bs[buf], (n) + (e), k, x)
#endif

__kernel __attribute__((reqd_work_group_size(MMA_THREADS, 1, 1)))
void gemm_mma(GEMM_ARGS)
{
    const int tid = get_local_id(0);
    const int warp = tid / 32, lane = mma_lane();
    const int g = lane / 4, t = lane % 4;                 // point 2 of the header
    const int wm = (warp / MMA_WARPS_N) * MMA_WARP_M;         // this warp's piece of the tile
    const int wn = (warp % MMA_WARPS_N) * MMA_WARP_N;
    const int n0 = get_group_id(0) * MMA_TILE_N;
    const int m0 = get_group_id(1) * MMA_TILE_M;
    const int z = get_group_id(2);
    const int grp = z % groups;
    A += grp * a_group_stride;
    B += z * b_batch_stride;
    C += z * c_batch_stride;

    // two buffers of each slab, k contiguous (tf32 words, or pairs of halves)
    __local uint As[2][MMA_TILE_M * MMA_LDW];
    __local uint Bs[2][MMA_TILE_N * MMA_LDW];
#if MMA_EMULATED
    __local uint scratch[MMA_WARPS * MMA_SCRATCH];
#endif
    float ra[MMA_A_VECTORS * MMA_VEC], rb[MMA_B_VECTORS * MMA_VEC];   // the next slab

    float acc[MMA_FRAG_M][MMA_FRAG_N][4];
    for (int i = 0; i < MMA_FRAG_M; ++i)
        for (int j = 0; j < MMA_FRAG_N; ++j)
            for (int e = 0; e < 4; ++e)
                acc[i][j][e] = 0.0f;

// Global -> registers: this work-item's vectors of the slab starting at k0.
#define MMA_FETCH(k0)                                                                         \
    for (int l = 0; l < MMA_A_VECTORS; ++l) {                                                 \
        const int v = tid + l * MMA_THREADS;                                                  \
        int m, k;                                                                             \
        MMA_A_POS(v, m, k);                                                                   \
        const int gm = m0 + m, gk = (k0) + k;                                                 \
        const int count = v < MMA_TILE_M * MMA_TILE_K / MMA_VEC ? MMA_A_COUNT(gm, gk) : 0;    \
        LOAD_A_VECTOR(A + A_INDEX(min(gm, M - 1), min(gk, K - 1)), count, MMA_VEC,            \
                      ra + l * MMA_VEC);                                                      \
    }                                                                                         \
    for (int l = 0; l < MMA_B_VECTORS; ++l) {                                                 \
        const int v = tid + l * MMA_THREADS;                                                  \
        int k, n;                                                                             \
        MMA_B_POS(v, k, n);                                                                   \
        const int gk = (k0) + k, gn = n0 + n;                                                 \
        const int count = v < MMA_TILE_K * MMA_TILE_N / MMA_VEC ? MMA_B_COUNT(gk, gn) : 0;    \
        LOAD_B_VECTOR(B + B_INDEX(min(gk, K - 1), min(gn, N - 1)), count, MMA_VEC,            \
                      rb + l * MMA_VEC);                                                      \
    }
// Registers -> local buffer `buf`, each value rounded to tf32 or converted to half.
#define MMA_STORE(buf)                                                                        \
    for (int l = 0; l < MMA_A_VECTORS; ++l) {                                                 \
        const int v = tid + l * MMA_THREADS;                                                  \
        int m, k;                                                                             \
        MMA_A_POS(v, m, k);                                                                   \
        if (v < MMA_TILE_M * MMA_TILE_K / MMA_VEC)                                            \
            for (int e = 0; e < MMA_VEC; ++e)                                                 \
                MMA_A_PUT(buf, m, k, e, ra[l * MMA_VEC + e]);                                 \
    }                                                                                         \
    for (int l = 0; l < MMA_B_VECTORS; ++l) {                                                 \
        const int v = tid + l * MMA_THREADS;                                                  \
        int k, n;                                                                             \
        MMA_B_POS(v, k, n);                                                                   \
        if (v < MMA_TILE_K * MMA_TILE_N / MMA_VEC)                                            \
            for (int e = 0; e < MMA_VEC; ++e)                                                 \
                MMA_B_PUT(buf, k, n, e, rb[l * MMA_VEC + e]);                                 \
    }

    const int slabs = (K + MMA_TILE_K - 1) / MMA_TILE_K;
    MMA_FETCH(0);
    MMA_STORE(0);
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = 0; s < slabs; ++s) {
        const int cur = s & 1;
        if (s + 1 < slabs) {
            MMA_FETCH((s + 1) * MMA_TILE_K);   // in flight while the tensor cores work
        }
        __local const uint *as = As[cur], *bs = Bs[cur];
MMA_UNROLL
        for (int kw = 0; kw < MMA_KW; kw += MMA_K / MMA_PER_WORD) {   // one mma's k, in words
            uint fa[MMA_FRAG_M][4], fb[MMA_FRAG_N][2];
MMA_UNROLL
            for (int i = 0; i < MMA_FRAG_M; ++i) {
                const int row = wm + i * 16 + g;
                fa[i][0] = as[row * MMA_LDW + kw + t];
                fa[i][1] = as[(row + 8) * MMA_LDW + kw + t];
                fa[i][2] = as[row * MMA_LDW + kw + t + 4];
                fa[i][3] = as[(row + 8) * MMA_LDW + kw + t + 4];
            }
MMA_UNROLL
            for (int j = 0; j < MMA_FRAG_N; ++j) {
                const int col = wn + j * 8 + g;
                fb[j][0] = bs[col * MMA_LDW + kw + t];
                fb[j][1] = bs[col * MMA_LDW + kw + t + 4];
            }
MMA_UNROLL
            for (int i = 0; i < MMA_FRAG_M; ++i)
MMA_UNROLL
                for (int j = 0; j < MMA_FRAG_N; ++j)
                    MMA_OP(acc[i][j], fa[i], fb[j]);
        }
        if (s + 1 < slabs) {
            MMA_STORE(cur ^ 1);   // the other buffer: read in slab s-1, free since its barrier
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
#undef MMA_FETCH
#undef MMA_STORE

    // C fragments -> C: values (g, 2t), (g, 2t+1), (g+8, 2t), (g+8, 2t+1) of each 16 x 8 tile
MMA_UNROLL
    for (int i = 0; i < MMA_FRAG_M; ++i)
MMA_UNROLL
        for (int j = 0; j < MMA_FRAG_N; ++j)
MMA_UNROLL
            for (int e = 0; e < 4; ++e) {
                const int gm = m0 + wm + i * 16 + g + (e >= 2 ? 8 : 0);
                const int gn = n0 + wn + j * 8 + 2 * t + (e & 1);
                if (gm < M && gn < N) {
                    const float v = acc[i][j][e] + BIAS_OF(grp, gm, gn);
                    C[gm * N + gn] = kuiper_epilogue(v, residual,
                                                     z * c_batch_stride + gm * N + gn);
                }
            }
}

#endif  // KUIPER_GEMM_MMA_H
