// conv_split_k.cl: split-K convolution, for layers whose output is small but whose K is large.
//
// Good for: ResNet's last stage at batch 1 (512 output channels, 7x7 pixels, K = 512*3*3 =
// 4608). Its output is one 512 x 49 matrix: a handful of GEMM tiles, so most of a GPU's compute
// units (or a CPU's cores) would sit idle while a few work-groups walk a long K axis. Split the
// K axis in S slices instead: S times more work-groups, each walking K/S, each writing its
// partial sums to a scratch buffer (the layer's workspace), and a second, cheap kernel adds the
// S partial sums, the bias and the fused epilogue. The selector picks it when the cost model
// (layers/opencl_conv/split_k.py) says the extra pass costs less than the idle units.
//
// The slices are computed by the implicit GEMM of conv_implicit_gemm.cl, built with SPLIT_K=1:
// slice s = get_group_id(2) / G walks k in [s*K_SLICE, (s+1)*K_SLICE) and stores raw sums at
// partial[s][index]. The implicit load, not an im2col column matrix: no extra launch and no
// column buffer to write and read back, which matters most at batch 1 where these layers run.

#define SPLIT_K 1
#include "conv_implicit_gemm.cl"

// y[i] = epilogue(sum over s of partial[s][i] + bias[channel of i]). One work-item per output
// element, global size TOTAL (rounded up): consecutive work-items read consecutive addresses.
__kernel void split_k_reduce(__global const float *partial, const int slices, const int total,
                             __global const float *bias, const int has_bias,
                             __global const float *residual, __global float *y,
                             const int P, const int COUT)
{
    const int i = get_global_id(0);
    if (i >= total)
        return;
    float v = 0.0f;
    for (int s = 0; s < slices; ++s)
        v += partial[s * total + i];
    if (has_bias)
        v += bias[i / P % COUT];
    y[i] = kuiper_epilogue(v, residual, i);
}
