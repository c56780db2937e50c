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

// One work-item per row, for CPU devices (layers/opencl/layernorm.py picks it there). Under
// PoCL a work-group's barriers cost more than a short row: ConvNeXt's LayerNorm over 96
// channels at 3136 positions took 2.3 ms with a work-group per row (7.7 ns a value). A
// work-item walks its row three times (mean, squared deviations, output), as row_stats does,
// VEC floats at a time: the host sets VEC=8 when the row length is a multiple of 8 (then
// every row starts 32-byte aligned, and the float8 loads are plain vector loads).
#ifndef VEC
#define VEC 1
#endif
#if VEC == 8
typedef float8 floatv;
#define LOAD(p, j) (*(__global const floatv *)((p) + (j)))
#define STORE(p, j, v) (*(__global floatv *)((p) + (j)) = (v))
#define HSUM(v) ((v).s0 + (v).s1 + (v).s2 + (v).s3 + (v).s4 + (v).s5 + (v).s6 + (v).s7)
#else
typedef float floatv;
#define LOAD(p, j) ((p)[j])
#define STORE(p, j, v) ((p)[j] = (v))
#define HSUM(v) (v)
#endif

__kernel void layernorm_rows(__global const float *x, __global float *y,
                             __global const float *gamma, __global const float *beta,
                             const int length, const int rows, const float eps)
{
    const int r = get_global_id(0);
    if (r >= rows)
        return;
    __global const float *row = x + (long)r * length;
    __global float *out = y + (long)r * length;
    floatv sum = 0.0f;
    for (int j = 0; j < length; j += VEC)
        sum += LOAD(row, j);
    const float mean = HSUM(sum) / (float)length;
    floatv squares = 0.0f;
    for (int j = 0; j < length; j += VEC) {
        const floatv d = LOAD(row, j) - mean;
        squares += d * d;
    }
    const float inv = 1.0f / sqrt(HSUM(squares) / (float)length + eps);
    for (int j = 0; j < length; j += VEC)
        STORE(out, j, (LOAD(row, j) - mean) * inv * LOAD(gamma, j) + LOAD(beta, j));
}
