// Inference BatchNorm as a per-channel affine, y = x * scale[c] + shift[c]. Element i of an
// (N, C, *rest) tensor is in channel (i / inner) % C, inner = prod(rest). A work-item does VEC
// consecutive elements of one channel (the host sets VEC = 8 or 4 when inner is a multiple of
// it, so they never straddle two channels and the vector loads are aligned): under PoCL the
// division costs more than the multiply-add. DenseNet-121's 62 BatchNorms took 16.0 ms one
// element per work-item, 4.0 ms with VEC = 8 (its first transition: 1.17 -> 0.16 ms). Also
// used by InstanceNorm with running statistics (same folded form).
#ifndef VEC
#define VEC 1
#endif
#if VEC == 8
typedef float8 floatv;
#elif VEC == 4
typedef float4 floatv;
#else
typedef float floatv;
#endif

__kernel void channel_affine(__global const float *x, __global float *y,
                             __global const float *scale, __global const float *shift,
                             const int n, const int channels, const int inner)
{
    const int i = get_global_id(0);      // the i-th group of VEC elements
    if (i >= n / VEC)
        return;
    const int c = (i / (inner / VEC)) % channels;
    ((__global floatv *)y)[i] = ((__global const floatv *)x)[i] * scale[c] + shift[c];
}

// F.batch_norm whose statistics are tensors of the graph: fold them on the device into
// scale = weight / sqrt(var + eps) and shift = bias - mean * scale, one work-item per channel.
__kernel void fold_batchnorm(__global const float *mean, __global const float *var,
                             __global const float *weight, __global const float *bias,
                             __global float *scale, __global float *shift,
                             const int channels, const float eps)
{
    const int c = get_global_id(0);
    if (c >= channels)
        return;
    const float s = weight[c] / sqrt(var[c] + eps);
    scale[c] = s;
    shift[c] = bias[c] - mean[c] * s;
}
