// The non-GEMM parts of attention (the two products run on matmul.cl's bgemm).
//
// masked_softmax: one work-group per row of scores (one query position of one head),
// softmax over the keys, in place, after applying up to two masks and an optional causal mask.
// Mask k (k = 1, 2) element for (row r, key c) is at mK[mK_row[r] + c * mK_cs]; the per-row
// offset tables are built on the host, so any broadcast of a mask over batch/heads works.
// Build options (the mask kinds: attention_mask.h):
//   MASK1, MASK2: 0 none, 1 float (added), 2 bool (true = keep, SDPA), 3 bool (true = drop, MHA)
//   MT1, MT2:     element types of the masks (float or uchar)
//   CAUSAL:       query l of each block of `length` rows only sees keys 0..l
//   SAFE:         a row whose every score is masked gives zeros instead of NaN
//   WG:           local size (a power of two)

#include "local_reduce.h"
#include "attention_mask.h"   // the mask kinds, mask_score() and MASK_APPLIED; CAUSAL, SAFE

// Defaults, so that the file also builds without options (for head_mean alone).
#ifndef WG
#define WG 64
#endif
#ifndef MASK1
#define MASK1 NO_MASK
#endif
#ifndef MASK2
#define MASK2 NO_MASK
#endif
#ifndef MT1
#define MT1 float
#endif
#ifndef MT2
#define MT2 float
#endif

// The masked score of (row r, key c); `m1`, `m2` are only read when their mask exists.
#define MASKED(v, r, c)                                                                      \
    MASK_APPLIED(MASK_APPLIED((CAUSAL && (c) > (r) % length) ? -INFINITY : (v), MASK1, m1,   \
                              m1_row[r] + (c) * m1_cs),                                      \
                 MASK2, m2, m2_row[r] + (c) * m2_cs)

__kernel void masked_softmax(__global float *s, const int cols, const int length,
                             __global const MT1 *m1, __global const int *m1_row, const int m1_cs,
                             __global const MT2 *m2, __global const int *m2_row, const int m2_cs)
{
    const int r = get_group_id(0);
    const int l = get_local_id(0);
    __global float *row = s + (long)r * cols;
    __local float scratch[WG];

    float m = -INFINITY;
    for (int c = l; c < cols; c += WG)
        m = fmax(m, MASKED(row[c], r, c));
    m = wg_max(scratch, m);

    float sum = 0.0f;
    for (int c = l; c < cols; c += WG)
        sum += exp(MASKED(row[c], r, c) - m);
    sum = wg_sum(scratch, sum);

    const bool empty = SAFE && m == -INFINITY;   // every key masked
    for (int c = l; c < cols; c += WG)
        row[c] = empty ? 0.0f : exp(MASKED(row[c], r, c) - m) / sum;
}

// Attention weights averaged over heads: w[n, i] = mean over h of p[n, h, i], where i runs
// over the length * source scores of one head.
__kernel void head_mean(__global const float *p, __global float *w, const int heads,
                        const int per_head, const int total)
{
    const int g = get_global_id(0);
    if (g >= total)
        return;
    const int n = g / per_head, i = g % per_head;
    float acc = 0.0f;
    for (int h = 0; h < heads; ++h)
        acc += p[((long)n * heads + h) * per_head + i];
    w[g] = acc / (float)heads;
}
