// RMSNorm: a row is one sample's normalized_shape (the trailing dims), as for LayerNorm; it is
// scaled by 1 / sqrt(mean(x^2) + eps) and by its own weight. One work-group per row (the
// reduction is norm_rows.h's group_sum). The signature is RowNormOpenCL's, shared with the
// other row norms: RMSNorm has no bias and ignores `beta`, `groups` and `inner`.
#include "norm_rows.h"

__kernel void rmsnorm(__global const float *x, __global float *y,
                      __global const float *gamma, __global const float *beta,
                      const int length, const int groups, const int inner, const float eps,
                      __local float *scratch)
{
    const long offset = (long)get_group_id(0) * length;
    float squares = 0.0f;
    for (int j = get_local_id(0); j < length; j += get_local_size(0))
        squares += x[offset + j] * x[offset + j];
    const float scale = 1.0f / sqrt(group_sum(squares, scratch) / (float)length + eps);
    for (int j = get_local_id(0); j < length; j += get_local_size(0))
        y[offset + j] = x[offset + j] * scale * gamma[j];
}
