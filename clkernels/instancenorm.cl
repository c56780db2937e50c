// InstanceNorm: a row is one channel of one sample, so the whole row shares one weight and one
// bias: fold them with the statistics into a single scale and shift. `groups` is the channel
// count. One work-group per row (see norm_rows.h).
#include "norm_rows.h"

__kernel void instancenorm(__global const float *x, __global float *y,
                           __global const float *gamma, __global const float *beta,
                           const int length, const int groups, const int inner, const float eps,
                           __local float *scratch)
{
    const int row = get_group_id(0);
    const int c = row % groups;
    const long offset = (long)row * length;
    const float2 stats = row_stats(x + offset, length, eps, scratch);
    const float scale = stats.y * gamma[c];
    const float shift = beta[c] - stats.x * scale;
    for (int j = get_local_id(0); j < length; j += get_local_size(0))
        y[offset + j] = x[offset + j] * scale + shift;
}
