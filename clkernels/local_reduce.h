// Work-group reductions in local memory, shared by reduce.cl, normalize.cl and attention.cl.
//
// Every work-item of the group calls the function with its partial value; all of them get the
// group's result back. The classic tree: at each level the lower half adds the upper half,
// with a barrier between levels, so log2(size) levels reduce size values.
// The local size must be a power of two, and every work-item must call (barriers inside).
//
// ACC is the element type (float unless the including kernel defines it first).

#ifndef LOCAL_REDUCE_H
#define LOCAL_REDUCE_H

#ifndef ACC
#define ACC float
#endif

// a "beats" b for max: larger, or NaN against a number (torch propagates NaN through max/min).
// Integer builds define ACC_IS_INT: integers have no NaN.
#if ACC_IS_INT
#define BEATS_MAX(a, b) ((a) > (b))
#define BEATS_MIN(a, b) ((a) < (b))
#define SAME(a, b) ((a) == (b))
#else
#define BEATS_MAX(a, b) ((a) > (b) || (isnan(a) && !isnan(b)))
#define BEATS_MIN(a, b) ((a) < (b) || (isnan(a) && !isnan(b)))
#define SAME(a, b) ((a) == (b) || (isnan(a) && isnan(b)))   // equal, or both NaN
#endif

#define TREE_REDUCE(s, COMBINE)                                          \
    {                                                                    \
        const int l_ = get_local_id(0);                                  \
        for (int stride = get_local_size(0) / 2; stride > 0; stride /= 2) {    \
            if (l_ < stride) { COMBINE; }                                  \
            barrier(CLK_LOCAL_MEM_FENCE);                                \
        }                                                                \
    }

// Every reduction below is: each work-item stores its value, the tree combines them into
// s[0], everyone reads s[0]. wg_put / wg_take are the first and last steps.
inline void wg_put(__local ACC *s, ACC v)
{
    s[get_local_id(0)] = v;
    barrier(CLK_LOCAL_MEM_FENCE);  // all values stored before the tree reads them
}

inline ACC wg_take(__local ACC *s)
{
    const ACC r = s[0];
    barrier(CLK_LOCAL_MEM_FENCE);  // everyone has read s[0]: the caller may reuse `s` right away
    return r;
}

inline ACC wg_sum(__local ACC *s, ACC v)
{
    wg_put(s, v);
    TREE_REDUCE(s, s[l_] += s[l_ + stride]);
    return wg_take(s);
}

inline ACC wg_prod(__local ACC *s, ACC v)
{
    wg_put(s, v);
    TREE_REDUCE(s, s[l_] *= s[l_ + stride]);
    return wg_take(s);
}

inline ACC wg_max(__local ACC *s, ACC v)
{
    wg_put(s, v);
    TREE_REDUCE(s, if (BEATS_MAX(s[l_ + stride], s[l_])) s[l_] = s[l_ + stride]);
    return wg_take(s);
}

inline ACC wg_min(__local ACC *s, ACC v)
{
    wg_put(s, v);
    TREE_REDUCE(s, if (BEATS_MIN(s[l_ + stride], s[l_])) s[l_] = s[l_ + stride]);
    return wg_take(s);
}

// Value and position of the best element (largest when `largest`, else smallest); on a tie
// the lower position wins, which is what torch.argmax documents ("the first maximal value").
inline void wg_arg_best(__local ACC *s, __local int *si, ACC v, int i, const int largest,
                        ACC *best, int *best_i)
{
    const int l = get_local_id(0);
    s[l] = v;
    si[l] = i;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int stride = get_local_size(0) / 2; stride > 0; stride /= 2) {
        if (l < stride) {
            const ACC a = s[l + stride], b = s[l];
            const int ia = si[l + stride], ib = si[l];
            const bool wins = largest ? BEATS_MAX(a, b) : BEATS_MIN(a, b);
            const bool tie = SAME(a, b);
            if (wins || (tie && ia < ib)) {
                s[l] = a;
                si[l] = ia;
            }
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    *best = s[0];
    *best_i = si[0];
    barrier(CLK_LOCAL_MEM_FENCE);
}

#endif
