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
//    buffer afterwards (or to the one buffer, point 7), already rounded to tf32
//    (cvt.rna.tf32.f32: to nearest, ties away from zero) or converted to half (vstore_half: to
//    nearest even), so each value is converted once, not once per warp that reads it. Per step
//    of k every warp loads MMA_FRAG_M fragments of A and MMA_FRAG_N of B from local memory and
//    issues MMA_FRAG_M x MMA_FRAG_N mma. The store applies the bias and the fused epilogue
//    (epilogue.h) exactly like gemm_tiled.h. Edges: loads outside the matrices are zeros (zeros
//    add nothing to the sums), stores are guarded, so any M, N, K works with any parameter set.
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
// 6. ldmatrix (-DMMA_LDMATRIX=1, the GPU only). In words, point 2's fragments are pieces of 8
//    rows x 4 words of the slab: rows g and g + 8, words t and t + 4. The PTX instruction
//    `ldmatrix.sync.aligned.m8n8.x4` loads four such pieces for the whole warp at once (lanes 0-7
//    give the addresses of the first piece's 8 rows, lanes 8-15 the second's, and so on), and
//    hands each lane exactly the word the scalar load would: one instruction for a fragment of A
//    (four scalar loads) or for two fragments of B (four). It reads the same words, so the
//    emulation keeps the scalar loads. Each row it reads starts on 16 bytes: MMA_LDW is a
//    multiple of 4 words and the buffers are aligned.
// 7. The stores to local memory. Where a vector of MMA_VEC values runs along k (A stored M x K,
//    B stored N x K: linear.cl's layout) it is one row's consecutive words, written with one
//    vector store (vstore4 of tf32 words, vstorea_half4 of halves). Where it runs along m or n
//    (B stored K x N: the convolutions' layout), a work-item loads MMA_VEC vectors at MMA_VEC
//    consecutive k, a square, and writes its columns: MMA_VEC vector stores again (one value
//    per store was 1.6-2x slower on an H200 at 4096^3). With one buffer (-DMMA_BUFFERS=1) the
//    next slab is stored after a barrier that waits for every warp to finish reading the
//    buffer: two barriers per slab instead of one, for half the local memory (a 128 x 128 tile
//    walks k 32 at a time in the 48 KB NVIDIA's OpenCL gives a work-group).
// 8. cp.async (-DMMA_ASYNC=1, TF32 only). Points 3 and 7 move every value twice through the
//    work-item: a global load into a register, then a conversion and a store to local memory,
//    and the registers holding the next slab are not available to the accumulators. Since
//    Ampere, `cp.async` copies 4 or 16 bytes from global to local memory without a register:
//    the work-item only issues it (`cp.async.commit_group` closes a batch, `cp.async.wait_group
//    n` waits until at most n batches are still in flight). So the slabs are copied as they lie
//    in memory, MMA_STAGES of them in flight in a ring of local buffers: while the tensor cores
//    work on slab s, slabs s + 1 .. s + MMA_STAGES - 1 are on their way. Two consequences:
//    - an operand stored along m or n (A stored K x M, B stored K x N: the convolutions' B) is
//      kept that way, [k][row], rows MMA_LDT = tile + 8 words apart (8 mod 32 for the sets'
//      tiles, multiples of 32: the lanes of a fragment load, k = t and row = g, hit 32
//      different banks), and its fragments are read a
//      word at a time (ldmatrix's transposing form moves 16-bit values, not 32-bit ones);
//    - the values arrive as float32, not tf32: each fragment word is rounded (cvt.rna, as in
//      point 3) when it is loaded from local memory. (Adding half of the dropped bits' unit and
//      letting the tensor cores drop the 13 low bits ran 2-6% faster on an H200 and gave the same
//      bits on numbers, but the add carries a NaN's mantissa into its sign: NVIDIA's NaN
//      0x7fffffff became -0; guarded against inf and NaN it ran no faster than cvt, 10% slower
//      on 4 warps. Not rounding at all, the tensor cores truncating, is the fastest, at 4096^3
//      119-127 TFLOP/s against 112-118 on 4 warps, 125-129 against 68-74 on 8, but biased:
//      mma_sets.py.)
//    A 16-byte copy needs a 16-byte-aligned source: a chunk of 4 values that is not (a row
//    length that is not a multiple of 4) goes as four 4-byte copies; a chunk past the matrix's
//    edge copies only its valid values and the hardware fills the rest with zeros (the copy's
//    source size). The emulation copies with plain loads and stores, into the same layout.
//
// -D options (the host's parameter sets): MMA_F16 (0: TF32, 1: FP16), MMA_TILE_M / _N / _K,
// MMA_WARPS_M / _N, MMA_VEC (1, 2 or 4), MMA_LDMATRIX, MMA_BUFFERS, MMA_ASYNC, MMA_STAGES,
// MMA_EMULATED. Names apart from gemm_tiled.h's, which is compiled into the same program with
// its own defaults.

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
#ifndef MMA_LDMATRIX   // fragments loaded by ldmatrix (point 6); the emulation ignores it
#define MMA_LDMATRIX 0
#endif
#ifndef MMA_BUFFERS    // local buffers of each slab: 2 (one barrier per slab) or 1 (two)
#define MMA_BUFFERS 2
#endif
#ifndef MMA_ASYNC      // slabs copied by cp.async, MMA_STAGES in flight (point 8)
#define MMA_ASYNC 0
#endif
#ifndef MMA_STAGES
#define MMA_STAGES 2
#endif
#if MMA_ASYNC && (MMA_F16 || HALF_A || HALF_B)
#error "MMA_ASYNC copies float32 slabs as they lie in memory: TF32 only, no half operands"
#endif
#if MMA_ASYNC && (MMA_STAGES < 2 || MMA_STAGES > 4)
#error "MMA_STAGES: 2, 3 or 4 slabs in flight"
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
#define MMA_USE_LDMATRIX (MMA_LDMATRIX && !MMA_EMULATED)
#if MMA_USE_LDMATRIX && MMA_FRAG_N % 2
#error "MMA_LDMATRIX loads B's fragments two at a time: MMA_WARP_N must be a multiple of 16"
#endif

// How each operand's slab lies in local memory: along k, [row][k] with rows MMA_LDW words apart
// (points 2 and 7), or, copied by cp.async from an operand stored along m or n, [k][row] with
// rows MMA_LDT_M / MMA_LDT_N words apart (point 8)
#define MMA_A_ALONG_K (!MMA_ASYNC || !TRANS_A)
#define MMA_B_ALONG_K (!MMA_ASYNC || TRANS_B)
#define MMA_LDT_M (MMA_TILE_M + 8)
#define MMA_LDT_N (MMA_TILE_N + 8)
#if MMA_A_ALONG_K
#define MMA_A_WORDS (MMA_TILE_M * MMA_LDW)
#else
#define MMA_A_WORDS (MMA_TILE_K * MMA_LDT_M)
#endif
#if MMA_B_ALONG_K
#define MMA_B_WORDS (MMA_TILE_N * MMA_LDW)
#else
#define MMA_B_WORDS (MMA_TILE_K * MMA_LDT_N)
#endif
#define MMA_RING (MMA_ASYNC ? MMA_STAGES : MMA_BUFFERS)   // local buffers of each operand

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

// MMA_VEC values x[0..] at (row, k .. k + MMA_VEC - 1) of a slab in local memory (`rows` is As
// or Bs of one buffer), rounded to tf32 or converted to half (to nearest even): consecutive
// words (or halves) of one row, written with one vector store (point 7). k is a multiple of
// MMA_VEC.
inline void mma_put_along_k(__local uint *rows, const int row, const int k, const float *x)
{
#if MMA_F16
    __local half *p = (__local half *)rows + row * (2 * MMA_LDW) + k;
#if MMA_VEC == 4
    vstorea_half4(vload4(0, x), 0, p);   // to nearest even, 8-byte aligned
#elif MMA_VEC == 2
    vstorea_half2(vload2(0, x), 0, p);
#else
    vstore_half(x[0], 0, p);
#endif
#else
    __local uint *p = rows + row * MMA_LDW + k;
#if MMA_VEC == 4   // x read as one vector: four scalar reads of mma_put_transposed's gathered
                   // column were built wrong by PoCL 3.0 (wrong sums in the emulated tests)
    const float4 v = vload4(0, x);
    vstore4((uint4)(mma_tf32(v.s0), mma_tf32(v.s1), mma_tf32(v.s2), mma_tf32(v.s3)), 0, p);
#elif MMA_VEC == 2
    const float2 v = vload2(0, x);
    vstore2((uint2)(mma_tf32(v.s0), mma_tf32(v.s1)), 0, p);
#else
    p[0] = mma_tf32(x[0]);
#endif
#endif
}

// A square of MMA_VEC x MMA_VEC values, x[r * MMA_VEC + e] = the value at k + r of row row0 + e
// (loaded along the rows), written as MMA_VEC rows of consecutive k (point 7).
inline void mma_put_transposed(__local uint *rows, const int row0, const int k, const float *x)
{
    for (int e = 0; e < MMA_VEC; ++e) {
        float along_k[MMA_VEC];
        for (int r = 0; r < MMA_VEC; ++r)
            along_k[r] = x[r * MMA_VEC + e];
        mma_put_along_k(rows, row0 + e, k, along_k);
    }
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

// Four pieces of 8 rows x 4 words of local memory for the warp in one instruction (point 6);
// `p`: the row this lane gives the address of. The "memory" clobber keeps it after the barrier
// that published the slab.
inline void mma_ldmatrix(uint *r0, uint *r1, uint *r2, uint *r3, __local const uint *p)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(*r0), "=r"(*r1), "=r"(*r2), "=r"(*r3)
                 : "r"((uint)(size_t)p)
                 : "memory");
}
#endif

// --- cp.async (point 8) ---------------------------------------------------------------------

#if MMA_ASYNC
// src[0 .. valid - 1] into dst[0 ..] and zeros up to 4 values, without a register on the way
// (valid 0: only zeros; src is then not read)
inline void mma_copy4(__local uint *dst, __global const float *src, const int valid)
{
#if MMA_EMULATED
    for (int e = 0; e < 4; ++e)
        dst[e] = e < valid ? as_uint(src[e]) : 0u;
#else
    const uint to = (uint)(size_t)dst;
    if (((size_t)src & 15) == 0) {   // one 16-byte copy; the source size says how much is real
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;"
                     : : "r"(to), "l"(src), "r"(4 * valid) : "memory");
    } else {                         // a row length that is not a multiple of 4: by float
        for (int e = 0; e < 4; ++e)
            asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;"
                         : : "r"(to + 4 * e), "l"(src + (e < valid ? e : 0)),
                             "r"(e < valid ? 4 : 0) : "memory");
    }
#endif
}

// Close the batch of copies this work-item has issued since the last one (one batch per slab)
inline void mma_async_commit(void)
{
#if !MMA_EMULATED
    asm volatile("cp.async.commit_group;" : : : "memory");
#endif
}

// Wait until at most MMA_STAGES - 2 of this work-item's batches are in flight: the oldest one,
// the slab about to be used, has landed (the count is an immediate operand, hence the cases)
inline void mma_async_wait(void)
{
#if !MMA_EMULATED
#if MMA_STAGES == 2
    asm volatile("cp.async.wait_group 0;" : : : "memory");
#elif MMA_STAGES == 3
    asm volatile("cp.async.wait_group 1;" : : : "memory");
#else
    asm volatile("cp.async.wait_group 2;" : : : "memory");
#endif
#endif
}

// Chunk v of a slab, 4 values along the operand's contiguous axis: the slab's rows ("outer",
// `ld` words apart in local memory) are the matrix's rows (`stride` values apart in memory), the
// chunk is at (outer, inner) = (v / per_row, 4 (v % per_row)) of the slab, at (outer0 + outer,
// inner0 + inner) of the matrix, and only its values inside outer_limit x inner_limit are read
inline void mma_copy_chunk(__local uint *slab, const int ld, const int per_row, const int v,
                           __global const float *matrix, const int stride, const int outer0,
                           const int inner0, const int outer_limit, const int inner_limit)
{
    const int outer = v / per_row, inner = (v % per_row) * 4;
    const int go = outer0 + outer, gi = inner0 + inner;
    const int valid = go < outer_limit ? clamp(inner_limit - gi, 0, 4) : 0;
    mma_copy4(slab + outer * ld + inner, valid ? matrix + go * stride + gi : matrix, valid);
}

// ... for each operand's layout: A stored K x M ([k][m]) or M x K ([m][k]), B stored N x K
// ([n][k]) or K x N ([k][n])
#if TRANS_A
#define MMA_A_CHUNK_COPY(v, k0, buf) \
    mma_copy_chunk(As[buf], MMA_LDT_M, MMA_TILE_M / 4, v, A, M, k0, m0, K, M)
#else
#define MMA_A_CHUNK_COPY(v, k0, buf) \
    mma_copy_chunk(As[buf], MMA_LDW, MMA_TILE_K / 4, v, A, K, m0, k0, M, K)
#endif
#if TRANS_B
#define MMA_B_CHUNK_COPY(v, k0, buf) \
    mma_copy_chunk(Bs[buf], MMA_LDW, MMA_TILE_K / 4, v, B, K, n0, k0, N, K)
#else
#define MMA_B_CHUNK_COPY(v, k0, buf) \
    mma_copy_chunk(Bs[buf], MMA_LDT_N, MMA_TILE_N / 4, v, B, N, k0, n0, K, N)
#endif
#define MMA_A_SLAB_CHUNKS (MMA_TILE_M * MMA_TILE_K / 4)
#define MMA_B_SLAB_CHUNKS (MMA_TILE_N * MMA_TILE_K / 4)
#define MMA_A_CHUNKS ((MMA_A_SLAB_CHUNKS + MMA_THREADS - 1) / MMA_THREADS)   // per work-item
#define MMA_B_CHUNKS ((MMA_B_SLAB_CHUNKS + MMA_THREADS - 1) / MMA_THREADS)
#endif  // MMA_ASYNC

// --- the slabs: global memory -> registers -> local memory ---------------------------------

// Each work-item moves *units* of a slab: where an operand is stored along k (A stored M x K, B
// stored N x K), a unit is one vector of MMA_VEC values along k; where it is stored along m or n,
// a unit is MMA_VEC such vectors at k .. k + MMA_VEC - 1, a square written transposed (point 7).
// MMA_x_POS(v, ...): the slab position of unit v's first value; MMA_x_FETCH_UNIT: its loads
// (zeros outside the matrix, and for a unit past the slab's last, `valid` false);
// MMA_x_PUT_UNIT: its stores to local memory.
#if TRANS_A   // stored K x M
#define MMA_A_UNIT (MMA_VEC * MMA_VEC)
#define MMA_A_POS(v, m, k)                                 \
    m = ((v) % (MMA_TILE_M / MMA_VEC)) * MMA_VEC;          \
    k = ((v) / (MMA_TILE_M / MMA_VEC)) * MMA_VEC
#define MMA_A_FETCH_UNIT(gm, gk, valid, x)                                                    \
    for (int r = 0; r < MMA_VEC; ++r)                                                         \
        LOAD_A_VECTOR(A + A_INDEX(min(gm, M - 1), min((gk) + r, K - 1)),                      \
                      (valid) && (gk) + r < K ? M - (gm) : 0, MMA_VEC, (x) + r * MMA_VEC)
#define MMA_A_PUT_UNIT(buf, m, k, x) mma_put_transposed(As[buf], m, k, x)
#else         // stored M x K
#define MMA_A_UNIT MMA_VEC
#define MMA_A_POS(v, m, k) \
    k = ((v) % (MMA_TILE_K / MMA_VEC)) * MMA_VEC; m = (v) / (MMA_TILE_K / MMA_VEC)
#define MMA_A_FETCH_UNIT(gm, gk, valid, x)                                                    \
    LOAD_A_VECTOR(A + A_INDEX(min(gm, M - 1), min(gk, K - 1)),                                \
                  (valid) && (gm) < M ? K - (gk) : 0, MMA_VEC, x)
#define MMA_A_PUT_UNIT(buf, m, k, x) mma_put_along_k(As[buf], m, k, x)
#endif
#if TRANS_B   // stored N x K
#define MMA_B_UNIT MMA_VEC
#define MMA_B_POS(v, k, n) \
    k = ((v) % (MMA_TILE_K / MMA_VEC)) * MMA_VEC; n = (v) / (MMA_TILE_K / MMA_VEC)
#define MMA_B_FETCH_UNIT(gk, gn, valid, x)                                                    \
    LOAD_B_VECTOR(B + B_INDEX(min(gk, K - 1), min(gn, N - 1)),                                \
                  (valid) && (gn) < N ? K - (gk) : 0, MMA_VEC, x)
#define MMA_B_PUT_UNIT(buf, k, n, x) mma_put_along_k(Bs[buf], n, k, x)
#else         // stored K x N
#define MMA_B_UNIT (MMA_VEC * MMA_VEC)
#define MMA_B_POS(v, k, n)                                 \
    n = ((v) % (MMA_TILE_N / MMA_VEC)) * MMA_VEC;          \
    k = ((v) / (MMA_TILE_N / MMA_VEC)) * MMA_VEC
#define MMA_B_FETCH_UNIT(gk, gn, valid, x)                                                    \
    for (int r = 0; r < MMA_VEC; ++r)                                                         \
        LOAD_B_VECTOR(B + B_INDEX(min((gk) + r, K - 1), min(gn, N - 1)),                      \
                      (valid) && (gk) + r < K ? N - (gn) : 0, MMA_VEC, (x) + r * MMA_VEC)
#define MMA_B_PUT_UNIT(buf, k, n, x) mma_put_transposed(Bs[buf], n, k, x)
#endif
// units per slab, and per work-item (rounded up; the extra are skipped)
#define MMA_A_SLAB_UNITS (MMA_TILE_M * MMA_TILE_K / MMA_A_UNIT)
#define MMA_B_SLAB_UNITS (MMA_TILE_N * MMA_TILE_K / MMA_B_UNIT)
#define MMA_A_UNITS ((MMA_A_SLAB_UNITS + MMA_THREADS - 1) / MMA_THREADS)
#define MMA_B_UNITS ((MMA_B_SLAB_UNITS + MMA_THREADS - 1) / MMA_THREADS)

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

    // MMA_RING buffers of each slab (tf32 words, or pairs of halves; float32 words under
    // MMA_ASYNC), laid out as MMA_A_WORDS says; 16-byte aligned for the vector stores, ldmatrix
    // and the 16-byte copies (points 6 to 8)
    __local uint As[MMA_RING][MMA_A_WORDS] __attribute__((aligned(16)));
    __local uint Bs[MMA_RING][MMA_B_WORDS] __attribute__((aligned(16)));
#if MMA_EMULATED
    __local uint scratch[MMA_WARPS * MMA_SCRATCH];
#endif
#if !MMA_ASYNC
    float ra[MMA_A_UNITS * MMA_A_UNIT], rb[MMA_B_UNITS * MMA_B_UNIT];   // the next slab
#endif

    float acc[MMA_FRAG_M][MMA_FRAG_N][4];
    for (int i = 0; i < MMA_FRAG_M; ++i)
        for (int j = 0; j < MMA_FRAG_N; ++j)
            for (int e = 0; e < 4; ++e)
                acc[i][j][e] = 0.0f;

// Global -> registers: this work-item's units of the slab starting at k0.
#define MMA_FETCH(k0)                                                                         \
    for (int l = 0; l < MMA_A_UNITS; ++l) {                                                   \
        const int v = tid + l * MMA_THREADS;                                                  \
        int m, k;                                                                             \
        MMA_A_POS(v, m, k);                                                                   \
        MMA_A_FETCH_UNIT(m0 + m, (k0) + k, v < MMA_A_SLAB_UNITS, ra + l * MMA_A_UNIT);        \
    }                                                                                         \
    for (int l = 0; l < MMA_B_UNITS; ++l) {                                                   \
        const int v = tid + l * MMA_THREADS;                                                  \
        int k, n;                                                                             \
        MMA_B_POS(v, k, n);                                                                   \
        MMA_B_FETCH_UNIT((k0) + k, n0 + n, v < MMA_B_SLAB_UNITS, rb + l * MMA_B_UNIT);        \
    }
// Registers -> local buffer `buf`, each value rounded to tf32 or converted to half.
#define MMA_STORE(buf)                                                                        \
    for (int l = 0; l < MMA_A_UNITS; ++l) {                                                   \
        const int v = tid + l * MMA_THREADS;                                                  \
        int m, k;                                                                             \
        MMA_A_POS(v, m, k);                                                                   \
        if (v < MMA_A_SLAB_UNITS)                                                             \
            MMA_A_PUT_UNIT(buf, m, k, ra + l * MMA_A_UNIT);                                   \
    }                                                                                         \
    for (int l = 0; l < MMA_B_UNITS; ++l) {                                                   \
        const int v = tid + l * MMA_THREADS;                                                  \
        int k, n;                                                                             \
        MMA_B_POS(v, k, n);                                                                   \
        if (v < MMA_B_SLAB_UNITS)                                                             \
            MMA_B_PUT_UNIT(buf, k, n, rb + l * MMA_B_UNIT);                                   \
    }

// cp.async: this work-item's chunks of the slab starting at k0, into ring buffer `buf`
#define MMA_ISSUE(k0, buf)                                                                    \
    for (int l = 0; l < MMA_A_CHUNKS; ++l) {                                                  \
        const int v = tid + l * MMA_THREADS;                                                  \
        if (v < MMA_A_SLAB_CHUNKS)                                                            \
            MMA_A_CHUNK_COPY(v, k0, buf);                                                     \
    }                                                                                         \
    for (int l = 0; l < MMA_B_CHUNKS; ++l) {                                                  \
        const int v = tid + l * MMA_THREADS;                                                  \
        if (v < MMA_B_SLAB_CHUNKS)                                                            \
            MMA_B_CHUNK_COPY(v, k0, buf);                                                     \
    }                                                                                         \
    mma_async_commit();   /* one batch per slab, empty ones included: wait_group counts them */

    const int slabs = (K + MMA_TILE_K - 1) / MMA_TILE_K;
#if MMA_ASYNC
    for (int s = 0; s < MMA_STAGES - 1; ++s) {   // the first MMA_STAGES - 1 slabs on their way
        if (s < slabs) {
            MMA_ISSUE(s * MMA_TILE_K, s);
        } else {
            mma_async_commit();
        }
    }
#else
    MMA_FETCH(0);
    MMA_STORE(0);
    barrier(CLK_LOCAL_MEM_FENCE);
#endif
    for (int s = 0; s < slabs; ++s) {
#if MMA_ASYNC
        const int cur = s % MMA_STAGES;
        mma_async_wait();               // this work-item's copies of slab s have landed,
        barrier(CLK_LOCAL_MEM_FENCE);   // everyone's too; and slab s - 1's buffer is free again
        const int next = s + MMA_STAGES - 1;
        if (next < slabs) {
            MMA_ISSUE(next * MMA_TILE_K, next % MMA_STAGES);
        } else {
            mma_async_commit();
        }
#else
        const int cur = MMA_BUFFERS == 2 ? (s & 1) : 0;
        if (s + 1 < slabs) {
            MMA_FETCH((s + 1) * MMA_TILE_K);   // in flight while the tensor cores work
        }
#endif
        __local const uint *as = As[cur], *bs = Bs[cur];
MMA_UNROLL
        for (int kw = 0; kw < MMA_KW; kw += MMA_K / MMA_PER_WORD) {   // one mma's k, in words
            uint fa[MMA_FRAG_M][4], fb[MMA_FRAG_N][2];
#if !MMA_A_ALONG_K   // [k][m] (point 8): a word at a time
MMA_UNROLL
            for (int i = 0; i < MMA_FRAG_M; ++i) {
                const int row = wm + i * 16 + g;
                fa[i][0] = as[(kw + t) * MMA_LDT_M + row];
                fa[i][1] = as[(kw + t) * MMA_LDT_M + row + 8];
                fa[i][2] = as[(kw + t + 4) * MMA_LDT_M + row];
                fa[i][3] = as[(kw + t + 4) * MMA_LDT_M + row + 8];
            }
#elif MMA_USE_LDMATRIX
MMA_UNROLL
            for (int i = 0; i < MMA_FRAG_M; ++i) {   // lane l: row l % 16, words 4 * (l / 16)
                __local const uint *p = as + (wm + i * 16 + lane % 16) * MMA_LDW + kw
                                        + 4 * (lane / 16);
                mma_ldmatrix(&fa[i][0], &fa[i][1], &fa[i][2], &fa[i][3], p);
            }
#else
MMA_UNROLL
            for (int i = 0; i < MMA_FRAG_M; ++i) {
                const int row = wm + i * 16 + g;
                fa[i][0] = as[row * MMA_LDW + kw + t];
                fa[i][1] = as[(row + 8) * MMA_LDW + kw + t];
                fa[i][2] = as[row * MMA_LDW + kw + t + 4];
                fa[i][3] = as[(row + 8) * MMA_LDW + kw + t + 4];
            }
#endif
#if !MMA_B_ALONG_K   // [k][n] (point 8): a word at a time
MMA_UNROLL
            for (int j = 0; j < MMA_FRAG_N; ++j) {
                const int col = wn + j * 8 + g;
                fb[j][0] = bs[(kw + t) * MMA_LDT_N + col];
                fb[j][1] = bs[(kw + t + 4) * MMA_LDT_N + col];
            }
#elif MMA_USE_LDMATRIX
MMA_UNROLL
            for (int j = 0; j < MMA_FRAG_N; j += 2) {   // columns of fragments j and j + 1
                __local const uint *p = bs + (wn + (j + lane / 16) * 8 + lane % 8) * MMA_LDW
                                        + kw + 4 * ((lane / 8) % 2);
                mma_ldmatrix(&fb[j][0], &fb[j][1], &fb[j + 1][0], &fb[j + 1][1], p);
            }
#else
MMA_UNROLL
            for (int j = 0; j < MMA_FRAG_N; ++j) {
                const int col = wn + j * 8 + g;
                fb[j][0] = bs[col * MMA_LDW + kw + t];
                fb[j][1] = bs[col * MMA_LDW + kw + t + 4];
            }
#endif
#if MMA_ASYNC   // float32 words as copied: rounded to tf32 here (point 8)
MMA_UNROLL
            for (int i = 0; i < MMA_FRAG_M; ++i)
MMA_UNROLL
                for (int r = 0; r < 4; ++r)
                    fa[i][r] = mma_tf32(as_float(fa[i][r]));
MMA_UNROLL
            for (int j = 0; j < MMA_FRAG_N; ++j)
MMA_UNROLL
                for (int r = 0; r < 2; ++r)
                    fb[j][r] = mma_tf32(as_float(fb[j][r]));
#endif
MMA_UNROLL
            for (int i = 0; i < MMA_FRAG_M; ++i)
MMA_UNROLL
                for (int j = 0; j < MMA_FRAG_N; ++j)
                    MMA_OP(acc[i][j], fa[i], fb[j]);
        }
#if !MMA_ASYNC
        if (s + 1 < slabs) {
#if MMA_BUFFERS == 1
            barrier(CLK_LOCAL_MEM_FENCE);   // every warp is done reading the one buffer
            MMA_STORE(0);
#else
            MMA_STORE(cur ^ 1);   // the other buffer: read in slab s-1, free since its barrier
#endif
        }
        barrier(CLK_LOCAL_MEM_FENCE);
#endif
    }
#undef MMA_FETCH
#undef MMA_STORE
#undef MMA_ISSUE

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
