// LayerNorm: a row is one sample's normalized_shape (the trailing dims), and every position of
// the row has its own weight and bias. One work-group per row (see norm_rows.h).
#include "norm_rows.h"

__kernel void layernorm(__global const float *x, __global float *y,
                        __global const float *gamma, __global const float *beta,
                        const int length, const int groups, const int inner, const float eps,
                        __local float *scratch)
{
    const long offset = (long)get_group_id(0) * length;
    const float2 stats = row_stats(x + offset, length, eps, scratch);
    for (int j = get_local_id(0); j < length; j += get_local_size(0))
        y[offset + j] = (x[offset + j] - stats.x) * stats.y * gamma[j] + beta[j];
}
