// Softmax / LogSoftmax / Softmin along one dim of a tensor seen as (outer, len, inner).
//
// One work-group per row (a row = the `len` elements x[o, 0..len, i], `inner` apart); its
// work-items stride over the row, then combine in local memory (local_reduce.h):
//   pass 1: m = max of the row            (so every exponent below is <= 0: no overflow)
//   pass 2: s = sum of exp(x - m)
//   pass 3: y = exp(x - m) / s,  or  x - m - log(s)  when built with -DLOG
// Built with -DNEGATE for softmin (softmax of -x). The local size is a power of two.

#include "local_reduce.h"

#ifdef NEGATE
#define LOAD(k) (-x[base + (k) * inner])
#else
#define LOAD(k) (x[base + (k) * inner])
#endif

__kernel void softmax(__global const float *x, __global float *y, const int len,
                      const int inner, __local float *scratch)
{
    const int row = get_group_id(0);
    const int lid = get_local_id(0), lsize = get_local_size(0);
    const int base = (row / inner) * len * inner + row % inner;

    float m = -INFINITY;
    for (int k = lid; k < len; k += lsize) {
        const float v = LOAD(k);
        if (BEATS_MAX(v, m))
            m = v;
    }
    m = wg_max(scratch, m);

    float s = 0.0f;
    for (int k = lid; k < len; k += lsize)
        s += exp(LOAD(k) - m);
    s = wg_sum(scratch, s);

#ifdef LOG
    const float log_s = log(s);
    for (int k = lid; k < len; k += lsize)
        y[base + k * inner] = LOAD(k) - m - log_s;
#else
    const float inv_s = 1.0f / s;
    for (int k = lid; k < len; k += lsize)
        y[base + k * inner] = exp(LOAD(k) - m) * inv_s;
#endif
}
