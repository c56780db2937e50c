// GroupNorm: a row is one group of C/G channels of one sample (contiguous in NCHW), and the
// weight and bias are per channel: position j of group g is channel g*(C/G) + j/inner, written
// here as (g*length + j) / inner. One work-group per row (see norm_rows.h).
#include "norm_rows.h"

__kernel void groupnorm(__global const float *x, __global float *y,
                        __global const float *gamma, __global const float *beta,
                        const int length, const int groups, const int inner, const float eps,
                        __local float *scratch)
{
    const int row = get_group_id(0);
    const long offset = (long)row * length;
    const int first = (row % groups) * length;  // position of the row inside its sample
    const float2 stats = row_stats(x + offset, length, eps, scratch);
    for (int j = get_local_id(0); j < length; j += get_local_size(0)) {
        const int c = (first + j) / inner;
        y[offset + j] = (x[offset + j] - stats.x) * stats.y * gamma[c] + beta[c];
    }
}
