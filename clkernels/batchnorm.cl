// Inference BatchNorm as a per-channel affine, y = x * scale[c] + shift[c], one work-item per
// element. Element i of an (N, C, *rest) tensor is in channel (i / inner) % C, inner = prod(rest).
// Also used by InstanceNorm with running statistics (same folded form).
__kernel void channel_affine(__global const float *x, __global float *y,
                             __global const float *scale, __global const float *shift,
                             const int n, const int channels, const int inner)
{
    const int i = get_global_id(0);
    if (i >= n)
        return;
    const int c = (i / inner) % channels;
    y[i] = x[i] * scale[c] + shift[c];
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
