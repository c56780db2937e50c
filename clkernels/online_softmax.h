// online_softmax.h: the online softmax's step (Milakov & Gimelshein) for both fused attention
// kernels (attention_fused.cl, a work-item per query row; attention_blocks.cl, a work-item per
// block of query rows), so the two fold a tile of scores into a row the same way.
//
// A row's keys go by in tiles. The row keeps m, the largest score so far, l, the sum of
// e^(s - m) over its keys so far, and o, the sum of e^(s - m) v; a tile of scores s_j gives
//
//     m' = max(m, max_j s_j)        the running maximum of the row's scores
//     l' = l * e^(m - m') + sum_j e^(s_j - m')          the running sum of exponentials
//     o' = o * e^(m - m') + sum_j e^(s_j - m') v_j      the running weighted sum of values
//
// and the row's output is o / l after the last tile. Rescaling by e^(m - m') whenever the
// maximum grows keeps every exponent <= 0 (no overflow) and gives exactly softmax(s) V: a
// score matrix of L x S values per head becomes three numbers and one vector per query. The
// same rescaling merges partial results of one row (attention_fused.cl's KSPLIT).
//
// Each kernel keeps l and o in its own layout (scalars or vectors, per row or per block of
// rows) and sums in its own order; what they share is below.

#ifndef KUIPER_ONLINE_SOFTMAX_H
#define KUIPER_ONLINE_SOFTMAX_H

// The larger of two scores (or of two vectors of scores, lane by lane). NaN never wins: a NaN
// score reaches the output through exp() instead (torch's softmax of a row with a NaN is NaN
// everywhere), and m stays a number.
#define SCORE_MAX(a, b) ((a) > (b) ? (a) : (b))

// What a tile's scores are exponentiated against, e^(s - base): the new running maximum m',
// or 0 while every key so far is masked (m' = -inf), so that those keys give e^-inf = 0
// rather than e^(-inf + inf) = NaN.
inline float online_softmax_base(const float m_new)
{
    return m_new == -INFINITY ? 0.0f : m_new;
}

// e^(m - m'): the factor that rescales l and o when the row's maximum grows from m to m_new.
// 0 on the first tile (m = -inf), and 0, not NaN, while every key so far is masked.
inline float online_softmax_correction(const float m, const float m_new)
{
    return exp(m - online_softmax_base(m_new));
}

#endif  // KUIPER_ONLINE_SOFTMAX_H
