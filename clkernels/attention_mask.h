// attention_mask.h: an attention score after its masks, for every attention kernel: the fused
// ones (attention_fused.cl, a work-item per query row; attention_blocks.cl, a work-item per
// block of query rows) and the unfused chain's masked_softmax (attention.cl, up to two masks),
// so that they all read a mask the same way.
//
// A mask's kind: 0 none, 1 a float added to the score, 2 a bool that keeps the key where true
// (SDPA's attn_mask), 3 a bool that drops it where true (MultiheadAttention's masks); a bool
// mask's elements are uchar. The fused kernels take one mask, of kind MASK and element type MT
// (float, or uchar for a bool); masked_softmax takes two (MASK1, MT1 and MASK2, MT2).
// CAUSAL: query i sees keys 0..i only. SAFE: a row whose every score is masked gives zeros
// (SDPA) instead of NaN (MultiheadAttention).

#ifndef KUIPER_ATTENTION_MASK_H
#define KUIPER_ATTENTION_MASK_H

#define NO_MASK 0
#define ADD_MASK 1
#define KEEP_MASK 2
#define DROP_MASK 3

#ifndef MASK
#define MASK NO_MASK
#endif
#ifndef MT
#define MT float
#endif
#ifndef CAUSAL
#define CAUSAL 0
#endif
#ifndef SAFE
#define SAFE 0
#endif

// A score after one mask element of kind `kind`: `add` is the element of a float mask, `flag`
// the element of a bool one (only the one the kind reads matters).
inline float mask_score(const float score, const int kind, const float add, const uchar flag)
{
    if (kind == ADD_MASK)
        return score + add;
    if (kind == KEEP_MASK)
        return flag ? score : -INFINITY;
    if (kind == DROP_MASK)
        return flag ? -INFINITY : score;
    return score;
}

// A score after element `at` of `mask`, a mask of kind `kind`. The kind is a build option:
// the compiler keeps one branch, and reads no mask where the kind is NO_MASK.
#define MASK_APPLIED(score, kind, mask, at)                                   \
    mask_score((score), (kind), (kind) == ADD_MASK ? (float)(mask)[at] : 0.0f, \
               (kind) >= KEEP_MASK ? (uchar)(mask)[at] : 0)

// The fused kernels' one mask (MASK, MT).
inline float attention_masked(const float score, __global const MT *mask, const int at)
{
    return MASK_APPLIED(score, MASK, mask, at);
}

#endif  // KUIPER_ATTENTION_MASK_H
