// Fused attention for CPU devices: softmax(Q K^T * scale + masks) V with a work-item per block
// of ROWS query rows, the online softmax (online_softmax.h) of attention_fused.cl, and no
// local memory, no barrier.
//
// What it is good for, and when it is picked: every fused attention on a CPU device (PoCL);
// layers/opencl/attention.py picks it there (`fused_kernel`) and attention_fused.cl's
// `attention_rows` elsewhere. attention_rows gives each work-item one query row and shares tiles
// of K and V through local memory between barriers: right for a GPU, where the work-items of a
// group are SIMD lanes. PoCL runs a work-group as a loop over its work-items, cut at every
// barrier, keeping every work-item's registers (its query, its output row) in memory across it:
// on ViT-S/16's attention (6 heads of 64, 197 tokens) that reached about 1.5 GFLOP/s. Here the
// SIMD lanes are explicit vector types inside one work-item, as in gemm_blocked.h:
//
// 1. Scores, keys as the lanes. S_tile (ROWS x TK) = Q_block (ROWS x HD) @ K^T (HD x TK): for
//    each head dim d, one vector of KW consecutive keys of K^T's row d (K given transposed:
//    key j of dim d at k[d * k_row + j]) times each row's q[d] broadcast, ROWS multiply-adds
//    per vector load, like a GEMM micro-kernel. The layer hands K^T over: in place when the
//    model computes Q @ K^T itself (kuiper/passes/fuse_attention.py), else written once per
//    inference by `keys_transposed` below (HD x S per head, a few hundred KB for a ViT).
// 2. The online softmax, per row and tile of TK keys: the tile's maximum m', exp(s - m') as
//    vectors (PoCL compiles exp() of a float8/float16 to SIMD code, exp() of a float to a call
//    per value), the running sum l and the rescaling e^(m - m') of the row's output.
// 3. Output, head dims as the lanes. O_block += P_tile (ROWS x TK) @ V_tile (TK x HV): per key,
//    one vector of VV values of V's row and each row's p broadcast. The block's outputs live in
//    private memory (L1), one run of VV dims at a time in registers across the tile.
//
// Masks, causal masking and keys past S are applied to the scores of the tiles that need them
// (a scalar pass over the tile): the other tiles run without a test. With CAUSAL a block stops
// at the tile holding its last row's diagonal. A NaN score reaches the output through exp()
// (torch's softmax of a row with a NaN is NaN everywhere); SAFE gives zeros for a row whose
// every key is masked (SDPA) where MultiheadAttention gives NaN, as attention_fused.cl does.
//
// Rows of Q, V and O are contiguous, head h's first element at base[bh] of an offset table, rows
// `row` floats apart (attention_fused.cl says why). Build options: HD, HV (head sizes), ROWS
// (query rows per work-item), KW (keys per score vector: 8 or 16, the device's SIMD width),
// NKV (score vectors per tile: TK = KW * NKV keys), VV (values per output vector: 16, 8, 4 or
// 1, dividing HV), MASK and MT (attention_mask.h), CAUSAL, SAFE.

#include "attention_mask.h"   // MASK, MT, attention_masked(), CAUSAL and SAFE
#include "online_softmax.h"   // SCORE_MAX, online_softmax_base() and _correction()
#include "index_math.h"   // imin(): PoCL's min() of ints is a call

#ifndef ROWS
#define ROWS 4
#endif
#ifndef KW
#define KW 8
#endif
#ifndef NKV
#define NKV 4
#endif
#ifndef VV
#define VV 1
#endif
#define TK (KW * NKV)     // keys per tile
#define OV (HV / VV)      // output vectors per row

// Vectors read and written one value at a time: the compiler merges the values into one
// unaligned vector access, where vloadn / vstoren are a function call in PoCL (gemm_blocked.h).
#define LOAD_8(p) (float8)((p)[0], (p)[1], (p)[2], (p)[3], (p)[4], (p)[5], (p)[6], (p)[7])
#define LOAD_16(p) (float16)(LOAD_8(p), LOAD_8((p) + 8))
#define LOAD_4(p) (float4)((p)[0], (p)[1], (p)[2], (p)[3])
#define LOAD_1(p) ((p)[0])

#if KW == 16
#define floatK float16
#define LOAD_K LOAD_16
#else
#define floatK float8
#define LOAD_K LOAD_8
#endif

#if VV == 16
#define floatV float16
#define LOAD_V LOAD_16
#elif VV == 8
#define floatV float8
#define LOAD_V LOAD_8
#elif VV == 4
#define floatV float4
#define LOAD_V LOAD_4
#else
#define floatV float
#define LOAD_V LOAD_1
#endif

// Horizontal maximum and sum of a score vector (NaN never wins the maximum: SCORE_MAX).
inline float hmax_k(const floatK v)
{
#if KW == 16
    const float8 a = SCORE_MAX(v.lo, v.hi);
#else
    const float8 a = v;
#endif
    const float4 b = SCORE_MAX(a.lo, a.hi);
    const float2 c = SCORE_MAX(b.lo, b.hi);
    return SCORE_MAX(c.x, c.y);
}

inline float hsum_k(const floatK v)
{
#if KW == 16
    const float8 a = v.lo + v.hi;
#else
    const float8 a = v;
#endif
    const float4 b = a.lo + a.hi;
    const float2 c = b.lo + b.hi;
    return c.x + c.y;
}

__kernel __attribute__((reqd_work_group_size(1, 1, 1)))
void attention_blocks(__global const float *q, __global const int *q_base, const int q_row,
                      __global const float *k, __global const int *k_base, const int k_row,
                      __global const float *v, __global const int *v_base, const int v_row,
                      __global float *o, __global const int *o_base, const int o_row,
                      const int L, const int S, const float scale,
                      __global const MT *mask, __global const int *mask_base, const int mask_row,
                      const int mask_col)
{
    const int bh = get_global_id(1);
    const int i0 = get_global_id(0) * ROWS;        // the block's first query row
    const int last = imin(i0 + ROWS, L) - 1;        // and its last
    // Rows past L compute a copy of the last row and store nothing: no test in the loops.
    int row[ROWS];
    #pragma unroll
    for (int r = 0; r < ROWS; ++r)
        row[r] = imin(i0 + r, last);

    float qs[ROWS][HD];                                  // the block's queries, times scale
    float sc[ROWS][TK] __attribute__((aligned(64)));     // one tile of scores, then of p
    float out[ROWS][HV] __attribute__((aligned(64)));    // the block's output accumulators
    float m[ROWS], l[ROWS], correction[ROWS];
    const __global float *qp = q + q_base[bh];
    #pragma unroll
    for (int r = 0; r < ROWS; ++r) {
        for (int d = 0; d < HD; ++d)
            qs[r][d] = qp[row[r] * q_row + d] * scale;
        for (int d = 0; d < HV; ++d)
            out[r][d] = 0.0f;
        m[r] = -INFINITY;
        l[r] = 0.0f;
    }
    const __global float *kp = k + k_base[bh];
    const __global float *vp = v + v_base[bh];
    const int end = CAUSAL ? imin(S, last + 1) : S;   // keys any row of the block may see

    for (int s0 = 0; s0 < end; s0 += TK) {
        // 1. scores: a vector of KW keys at a time, ROWS multiply-adds per load
        for (int c = 0; c < NKV; ++c) {
            const int j0 = s0 + c * KW;
            floatK acc[ROWS];
            #pragma unroll
            for (int r = 0; r < ROWS; ++r)
                acc[r] = (floatK)(0.0f);
            if (j0 + KW <= S) {
                for (int d = 0; d < HD; ++d) {
                    const __global float *kd = kp + d * k_row + j0;
                    const floatK kv = LOAD_K(kd);
                    #pragma unroll
                    for (int r = 0; r < ROWS; ++r)
                        acc[r] += (floatK)(qs[r][d]) * kv;
                }
            } else if (j0 < S) {   // the last, partial vector: keys clamped, masked below
                int key[KW];
                #pragma unroll
                for (int t = 0; t < KW; ++t)
                    key[t] = imin(j0 + t, S - 1);
                for (int d = 0; d < HD; ++d) {
                    const __global float *kd = kp + d * k_row;
                    float kv[KW] __attribute__((aligned(64)));
                    #pragma unroll
                    for (int t = 0; t < KW; ++t)
                        kv[t] = kd[key[t]];
                    #pragma unroll
                    for (int r = 0; r < ROWS; ++r)
                        acc[r] += (floatK)(qs[r][d]) * *(floatK *)kv;
                }
            }
            #pragma unroll
            for (int r = 0; r < ROWS; ++r)
                *(floatK *)&sc[r][c * KW] = acc[r];
        }
        // masks, the causal diagonal and keys past S: only the tiles that have them
        if (MASK != 0 || s0 + TK > S || (CAUSAL && s0 + TK - 1 > i0)) {
            #pragma unroll
            for (int r = 0; r < ROWS; ++r) {
                for (int j = 0; j < TK; ++j) {
                    const int key = s0 + j;
                    float s = sc[r][j];
#if MASK != 0
                    if (key < S)
                        s = attention_masked(s, mask, mask_base[bh] + row[r] * mask_row
                                                      + key * mask_col);
#endif
                    if (key >= S || (CAUSAL && key > row[r]))
                        s = -INFINITY;
                    sc[r][j] = s;
                }
            }
        }
        // 2. the online softmax: p = e^(s - m') in place of the scores, l and the rescaling
        #pragma unroll
        for (int r = 0; r < ROWS; ++r) {
            floatK top = (floatK)(-INFINITY);
            for (int c = 0; c < NKV; ++c)
                top = SCORE_MAX(*(floatK *)&sc[r][c * KW], top);
            const float m_new = SCORE_MAX(hmax_k(top), m[r]);
            // every key so far masked: subtract 0 (e^-inf = 0 for them, a NaN stays NaN)
            const float base = online_softmax_base(m_new);
            correction[r] = online_softmax_correction(m[r], m_new);   // 0 on the first tile
            floatK sum = (floatK)(0.0f);
            for (int c = 0; c < NKV; ++c) {
                const floatK p = exp(*(floatK *)&sc[r][c * KW] - (floatK)(base));
                *(floatK *)&sc[r][c * KW] = p;
                sum += p;
            }
            l[r] = l[r] * correction[r] + hsum_k(sum);
            m[r] = m_new;
        }
        // 3. out = out * correction + P V, VV dims of every row at a time, keys up to S only
        const int keys = imin(TK, S - s0);
        for (int dc = 0; dc < OV; ++dc) {
            floatV acc[ROWS];
            #pragma unroll
            for (int r = 0; r < ROWS; ++r)
                acc[r] = *(floatV *)&out[r][dc * VV] * correction[r];
            const __global float *vd = vp + s0 * v_row + dc * VV;
            for (int j = 0; j < keys; ++j) {
                const __global float *vj = vd + j * v_row;
                const floatV vv = LOAD_V(vj);
                #pragma unroll
                for (int r = 0; r < ROWS; ++r)
                    acc[r] += (floatV)(sc[r][j]) * vv;
            }
            #pragma unroll
            for (int r = 0; r < ROWS; ++r)
                *(floatV *)&out[r][dc * VV] = acc[r];
        }
    }
    __global float *op = o + o_base[bh];
    #pragma unroll
    for (int r = 0; r < ROWS; ++r) {
        if (i0 + r > last)
            break;
#if SAFE
        // a row whose every key is masked: zeros; a NaN sum stays NaN
        const float inv = l[r] > 0.0f || l[r] != l[r] ? 1.0f / l[r] : 0.0f;
#else
        const float inv = 1.0f / l[r];   // a fully masked row: 0 * inf = NaN
#endif
        __global float *orow = op + (i0 + r) * o_row;
        for (int d = 0; d < HV; ++d)
            orow[d] = out[r][d] * inv;
    }
}

// K^T of every (batch, head) for attention_blocks: kt[bh * HD * S + d * S + j] = K_bh[j][d],
// K's value (j, d) at k_base[bh] + j * key_step + d * dim_step (a projection's rows: dim_step
// 1). A work-item per (dim, bh) writes one contiguous row of K^T.
__kernel void keys_transposed(__global const float *k, __global const int *k_base,
                              const int key_step, const int dim_step, __global float *kt,
                              const int S)
{
    const int d = get_global_id(0), bh = get_global_id(1);
    if (d >= HD)
        return;
    const __global float *src = k + k_base[bh] + d * dim_step;
    __global float *dst = kt + ((long)bh * HD + d) * S;
    for (int j = 0; j < S; ++j)
        dst[j] = src[j * key_step];
}
