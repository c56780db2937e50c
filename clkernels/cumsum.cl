// torch.cumsum / torch.cumprod: one work-item per line, a plain sequential scan.
//
// A line is `n` elements `inner` apart; neighbouring work-items own neighbouring lines, so when
// inner > 1 they read neighbouring addresses at every step (coalesced). A sequential scan also
// adds the terms in exactly the order torch's CPU kernel does.
// Build options: T (input type), OUT (output and accumulator type), PRODUCT (0 or 1).

__kernel void cumulative(__global const T *x, __global OUT *y, const int n, const int inner,
                         const int lines)
{
    const int o = get_global_id(0);
    if (o >= lines)
        return;
    const int start = (o / inner) * n * inner + o % inner;
    OUT acc = PRODUCT ? (OUT)1 : (OUT)0;
    for (int j = 0; j < n; ++j) {
        const int at = start + j * inner;
#if PRODUCT
        acc *= (OUT)x[at];
#else
        acc += (OUT)x[at];
#endif
        y[at] = acc;
    }
}
