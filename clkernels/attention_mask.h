// attention_mask.h: an attention score after its mask, for both fused attention kernels
// (attention_fused.cl, a work-item per query row; attention_blocks.cl, a work-item per block
// of query rows), so the two read a mask the same way.
//
// MASK: 0 none, 1 a float added to the score, 2 a bool that keeps the key where true (SDPA's
// attn_mask), 3 a bool that drops it where true (MultiheadAttention's masks); MT is the mask's
// element type (float, or uchar for a bool). `at` is the mask element's index.

#ifndef KUIPER_ATTENTION_MASK_H
#define KUIPER_ATTENTION_MASK_H

#ifndef MASK
#define MASK 0
#endif
#ifndef MT
#define MT float
#endif

inline float attention_masked(const float score, __global const MT *mask, const int at)
{
#if MASK == 1
    return score + (float)mask[at];
#elif MASK == 2
    return mask[at] ? score : -INFINITY;
#elif MASK == 3
    return mask[at] ? -INFINITY : score;
#else
    return score;
#endif
}

#endif  // KUIPER_ATTENTION_MASK_H
