// Row statistics for the normalisation kernels (layernorm.cl, groupnorm.cl, instancenorm.cl).
//
// One work-group owns one row. Each work-item first sums a strided slice of the row (so any row
// length works with any work-group size), then the work-group adds those partial sums in a tree
// in local memory: log2(local size) steps, each halving the number of active work-items.
// The local size must be a power of two (the host picks one).

#ifndef KUIPER_NORM_ROWS_H
#define KUIPER_NORM_ROWS_H

// Sum of `value` over the work-group; every work-item gets the result.
inline float group_sum(float value, __local float *scratch)
{
    const int lid = get_local_id(0);
    scratch[lid] = value;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int active = get_local_size(0) / 2; active > 0; active >>= 1) {
        if (lid < active)
            scratch[lid] += scratch[lid + active];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    const float total = scratch[0];
    barrier(CLK_LOCAL_MEM_FENCE);  // scratch is reused by the next call
    return total;
}

// Mean and 1/sqrt(variance + eps) of row[0 .. length). Two passes (mean, then the squared
// deviations from it) rather than sum and sum of squares, which cancels badly in float32 when
// the mean is large compared with the spread.
inline float2 row_stats(__global const float *row, const int length, const float eps,
                        __local float *scratch)
{
    const int lid = get_local_id(0), step = get_local_size(0);
    float sum = 0.0f;
    for (int j = lid; j < length; j += step)
        sum += row[j];
    const float mean = group_sum(sum, scratch) / (float)length;
    float squares = 0.0f;
    for (int j = lid; j < length; j += step) {
        const float d = row[j] - mean;
        squares += d * d;
    }
    const float var = group_sum(squares, scratch) / (float)length;
    return (float2)(mean, 1.0f / sqrt(var + eps));
}

#endif
