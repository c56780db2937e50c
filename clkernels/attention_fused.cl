// Fused attention: softmax(Q K^T * scale + masks) V in one kernel, the score matrix never
// written to memory (the FlashAttention idea, written for OpenCL without subgroups).
//
// What it is good for: GPUs, every attention whose head size fits the registers (HD, HV <=
// 256): scaled_dot_product_attention, nn.MultiheadAttention and kuiper.fused_attention
// (layers/opencl/attention.py) pick it on a device that is not a CPU, unless a caller wants the
// attention weights themselves (MultiheadAttention's second output), which only the unfused
// chain (matmul.cl's bgemm + attention.cl's masked_softmax) writes out. CPU devices take its
// sibling attention_blocks.cl (a work-item per block of query rows, no barrier), about 20x
// faster there.
//
// How: a work-group holds WG query rows of one (batch, head) `bh`, one row per work-item, its
// query (times `scale`) and its output accumulator in registers. The keys go by in tiles of BK:
// the group copies a tile of K and of V into local memory once, then every work-item computes
// its BK scores and folds them into its row with the *online softmax* (online_softmax.h: a
// running maximum m, sum l and output o per row, rescaled by e^(m - m') whenever the maximum
// grows to m') and divides by l at the end. On a CPU device (PoCL) the work-items
// of a group are the SIMD lanes: every lane reads the same key from local memory (a broadcast),
// and the loops over the head dim are unrolled (HD and HV are build options).
//
// A work-item's head dims go by in float4s (VW=4). On a GPU the work-items of a warp are the
// SIMD lanes; on a CPU device PoCL vectorizes the group's work-items, each lane a query row,
// every lane reading the same key from local memory.
//
// Rows of Q, K, V and O are contiguous (column stride 1); row b*h's first element is at
// base[bh] of a per-(batch, head) offset table, rows `row` floats apart, so heads cut out of a
// projected (tokens, 3E) buffer, broadcast batch dims and grouped-query K/V heads all work
// without a copy. With K_TRANSPOSED, K is given as K^T, rows of `S` keys, one per head dim
// (k_row is then the distance between two dims' rows): the matmul(Q, K^T) of an attention
// written out by hand (kuiper/passes/fuse_attention.py). The mask (MASK: 0 none, 1 float
// added, 2 bool keep, 3 bool drop) is read at mask[mask_base[bh] + i * mask_row + j *
// mask_col]; CAUSAL lets query i see keys 0..i; with SAFE a row whose every score is masked
// gives zeros (SDPA) instead of NaN (MultiheadAttention).
//
// Key split (KSPLIT > 1, GPUs): when there are few query rows (ViT-S at batch 1: 6 heads of 197
// rows, 1182 work-items for a GPU that runs 270,000 at once) one work-item per row leaves the
// device nearly empty, each walking all S keys alone. With KSPLIT, KSPLIT work-items share a
// row (the group is WG x KSPLIT): work-item `part` takes keys part, part + KSPLIT, ... of every
// tile with its own m, l and o, and at the end the KSPLIT partial results are merged through
// local memory the same way the online softmax merges tiles (each rescaled by e^(m_p - M),
// M the largest m_p), every work-item writing 1/KSPLIT of the row's output.
// layers/opencl/attention.py (`fused_parameters`) picks WG, BK and KSPLIT per device.
//
// Build options: HD, HV (head sizes of Q/K and of V), VW (4 when both are multiples of 4: the
// head dims read as float4, else 1), BK (keys per tile), WG (rows per work-group), KSPLIT
// (work-items per row, dividing BK), MASK, MT (the mask's element type), CAUSAL, SAFE,
// K_TRANSPOSED.

#ifndef VW
#define VW 1
#endif
#if VW == 4
#define VT float4
#define VLOAD(p, i) vload4((i), (p))
#define VSTORE(v, p, i) vstore4((v), (i), (p))
#define VDOT(a, b) dot((a), (b))
#else
#define VT float
#define VLOAD(p, i) ((p)[i])
#define VSTORE(v, p, i) ((p)[i] = (v))
#define VDOT(a, b) ((a) * (b))
#endif
#define QV (HD / VW)   // vectors per query / key row
#define OV (HV / VW)   // vectors per value / output row

#include "attention_mask.h"   // MASK, MT, attention_masked(), CAUSAL and SAFE
#include "online_softmax.h"   // SCORE_MAX, online_softmax_correction()

#ifndef K_TRANSPOSED
#define K_TRANSPOSED 0
#endif

#ifndef KSPLIT
#define KSPLIT 1
#endif
#define THREADS (WG * KSPLIT)   // work-items of a group, all of them copying the tiles
#define KEYS (BK / KSPLIT)      // keys of a tile each work-item scores
#define TILE_VECTORS (BK * (QV + OV))
#define MERGE_VECTORS (KSPLIT > 1 ? KSPLIT * WG * OV : 0)
#define LOCAL_VECTORS (TILE_VECTORS > MERGE_VECTORS ? TILE_VECTORS : MERGE_VECTORS)

__kernel __attribute__((reqd_work_group_size(WG, KSPLIT, 1)))
void attention_rows(__global const float *q, __global const int *q_base, const int q_row,
                    __global const float *k, __global const int *k_base, const int k_row,
                    __global const float *v, __global const int *v_base, const int v_row,
                    __global float *o, __global const int *o_base, const int o_row,
                    const int L, const int S, const float scale,
                    __global const MT *mask, __global const int *mask_base, const int mask_row,
                    const int mask_col)
{
    // The K and V tiles; with KSPLIT, after the last tile, the rows' partial outputs (the
    // tiles are dead by then: the loop ends with a barrier), so both fit one allocation.
    __local VT shared[LOCAL_VECTORS];
    __local VT *kt = shared;
    __local VT *vt = shared + BK * QV;
#if KSPLIT > 1   // the partial results of a row's KSPLIT work-items, merged at the end
    __local float part_m[KSPLIT][WG], part_l[KSPLIT][WG];
    __local int part_nan[KSPLIT][WG];
    __local VT *part_o = shared;   // [part][row][vector]
#define PART_O(p, row, d) part_o[((p) * WG + (row)) * OV + (d)]
#endif
    const int bh = get_group_id(1);
    const int lid = get_local_id(0);
    const int part = get_local_id(1);              // which keys of each tile: part + n*KSPLIT
    const int tid = part * WG + lid;               // rank in the group, for the tile copies
    const int i = get_group_id(0) * WG + lid;      // this work-item's query row
    const bool live = i < L;

    VT qr[QV], acc[OV];
    const __global float *qp = q + q_base[bh] + (live ? i : 0) * q_row;
    for (int d = 0; d < QV; ++d)
        qr[d] = VLOAD(qp, d) * scale;
    for (int d = 0; d < OV; ++d)
        acc[d] = (VT)(0.0f);
    float m = -INFINITY, l = 0.0f;
    bool nan_score = false;   // torch's softmax of a row with a NaN is NaN everywhere

    const __global float *kp = k + k_base[bh];
    const __global float *vp = v + v_base[bh];
    for (int s0 = 0; s0 < S; s0 += BK) {
        // the group copies keys s0 .. s0+BK-1 of K and V into local memory (zeros past S)
#if K_TRANSPOSED
        // K given as K^T (head dim major, a matmul's operand): key j of dim d at kp[d * S + j].
        // Neighbouring work-items read neighbouring keys of one dim: coalesced reads.
        for (int t = tid; t < BK * HD; t += THREADS) {
            const int d = t / BK, j = t - d * BK;
            ((__local float *)kt)[j * HD + d] = s0 + j < S ? kp[d * k_row + s0 + j] : 0.0f;
        }
#else
        for (int t = tid; t < BK * QV; t += THREADS) {
            const int j = t / QV, d = t - j * QV;
            kt[t] = s0 + j < S ? VLOAD(kp + (s0 + j) * k_row, d) : (VT)(0.0f);
        }
#endif
        for (int t = tid; t < BK * OV; t += THREADS) {
            const int j = t / OV, d = t - j * OV;
            vt[t] = s0 + j < S ? VLOAD(vp + (s0 + j) * v_row, d) : (VT)(0.0f);
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        if (live) {
            float s[KEYS];
            float tile_max = m;
            for (int jj = 0; jj < KEYS; ++jj) {
                const int j = jj * KSPLIT + part;
                const int key = s0 + j;
                VT part = (VT)(0.0f);
                for (int d = 0; d < QV; ++d)
                    part += qr[d] * kt[j * QV + d];
#if VW == 4
                float sc = part.x + part.y + part.z + part.w;
#else
                float sc = part;
#endif
#if MASK != 0
                if (key < S)
                    sc = attention_masked(sc, mask, mask_base[bh] + i * mask_row + key * mask_col);
#endif
                if (key >= S || (CAUSAL && key > i))
                    sc = -INFINITY;
                s[jj] = sc;
                nan_score |= isnan(sc);
                tile_max = SCORE_MAX(sc, tile_max);   // NaN never wins: it reaches o below
            }
            if (tile_max != -INFINITY) {   // else every key so far is masked: nothing to add
                const float correction = online_softmax_correction(m, tile_max);   // 0 at first
                l *= correction;
                for (int d = 0; d < OV; ++d)
                    acc[d] *= correction;
                for (int jj = 0; jj < KEYS; ++jj) {
                    const float p = exp(s[jj] - tile_max);
                    const int j = jj * KSPLIT + part;
                    l += p;
                    for (int d = 0; d < OV; ++d)
                        acc[d] += p * vt[j * OV + d];
                }
                m = tile_max;
            }
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
#if KSPLIT > 1
    // Merge the row's KSPLIT partial (m, l, o) like two tiles of the online softmax: rescale
    // each by e^(m_p - M), M the largest; a part that saw only masked keys (m_p = -inf) adds 0.
    part_m[part][lid] = m;
    part_l[part][lid] = l;
    part_nan[part][lid] = nan_score;
    for (int d = 0; d < OV; ++d)
        PART_O(part, lid, d) = acc[d];
    barrier(CLK_LOCAL_MEM_FENCE);
    if (!live)
        return;
    float top = -INFINITY;
    for (int p = 0; p < KSPLIT; ++p)
        top = fmax(top, part_m[p][lid]);
    float weight[KSPLIT];
    l = 0.0f;
    nan_score = false;
    for (int p = 0; p < KSPLIT; ++p) {
        weight[p] = online_softmax_correction(part_m[p][lid], top);   // 0 where m_p = -inf
        l += part_l[p][lid] * weight[p];
        nan_score |= part_nan[p][lid];
    }
#else
    if (!live)
        return;
#endif
    __global float *op = o + o_base[bh] + i * o_row;
#if SAFE
    const float inv = l > 0.0f ? 1.0f / l : 0.0f;   // a fully masked row: zeros
#else
    const float inv = 1.0f / l;                     // a fully masked row: 0 * inf = NaN
#endif
    const float scale_out = nan_score ? NAN : inv;
#if KSPLIT > 1   // work-item `part` writes vectors part, part + KSPLIT, ... of the row
    for (int d = part; d < OV; d += KSPLIT) {
        VT sum = (VT)(0.0f);
        for (int p = 0; p < KSPLIT; ++p)
            sum += PART_O(p, lid, d) * weight[p];
        VSTORE(sum * scale_out, op, d);
    }
#else
    for (int d = 0; d < OV; ++d)
        VSTORE(acc[d] * scale_out, op, d);
#endif
}
