// topk / sort / argsort by ranking: one work-item per element of a row.
//
// The rank of element i is the number of elements that come before it in the order
// (larger first when DESCENDING; ties broken by the smaller index, so the order is stable;
// NaN is the largest value). Ranks are distinct, so element i simply writes itself to
// position rank when rank < k: no sorting network, no atomics, and the result is sorted.
// The cost is n comparisons per element; the row is streamed through local memory in tiles of
// WG elements so every global element is read once per work-group, not once per work-item.
//
// A row is `n` elements `inner` apart (the ordered dim sits between outer and inner dims).
// Build options: T (element type), T_IS_INT, DESCENDING, WG (local size).

#if T_IS_INT
#define BEFORE_DESC(a, b) ((a) > (b))
#define BEFORE_ASC(a, b) ((a) < (b))
#define SAME(a, b) ((a) == (b))
#else
#define BEFORE_DESC(a, b) ((a) > (b) || (isnan(a) && !isnan(b)))
#define BEFORE_ASC(a, b) ((a) < (b) || (!isnan(a) && isnan(b)))
#define SAME(a, b) ((a) == (b) || (isnan(a) && isnan(b)))
#endif

#if DESCENDING
#define BEFORE BEFORE_DESC
#else
#define BEFORE BEFORE_ASC
#endif

__kernel void topk_rank(__global const T *x, __global T *y, __global long *yi, const int n,
                        const int inner, const int k)
{
    const int i = get_global_id(0);   // position in the row
    const int o = get_global_id(1);   // row
    const int l = get_local_id(0);
    const int start = (o / inner) * n * inner + o % inner;
    const T v = i < n ? x[start + i * inner] : (T)0;
    __local T tile[WG];

    int rank = 0;
    for (int j0 = 0; j0 < n; j0 += WG) {
        tile[l] = j0 + l < n ? x[start + (j0 + l) * inner] : (T)0;
        barrier(CLK_LOCAL_MEM_FENCE);
        const int m = min(WG, n - j0);
        for (int t = 0; t < m; ++t) {
            const T w = tile[t];
            if (BEFORE(w, v) || (SAME(w, v) && j0 + t < i))
                ++rank;
        }
        barrier(CLK_LOCAL_MEM_FENCE);   // the next tile overwrites this one
    }
    if (i < n && rank < k) {
        const int out = (o / inner) * k * inner + o % inner + rank * inner;
#if WANT_VALUES
        y[out] = v;
#endif
#if WANT_INDICES
        yi[out] = (long)i;
#endif
    }
}
