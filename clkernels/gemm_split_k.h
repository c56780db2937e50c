// gemm_split_k.h: the second pass of a split-K GEMM (included by gemm.h).
//
// Good for: linear layers with few rows and a long K on a GPU, such as a transformer's MLP
// output at 128 tokens (128 x 768 outputs, K = 3072): one 64 x 64 tile per work-group gives 24
// work-groups for a GPU with 132 compute units, each walking all of K. Built with SPLIT_K = S
// (gemm_tiled.h), the product runs S times as many work-groups, each over K / S, and stores
// its raw sums to one of S scratch slices; this kernel adds them up, with the bias and the
// fused epilogue, one output per work-item (consecutive work-items read consecutive words of
// every slice). The cost model (layers/opencl_gemm/cost.py) counts this pass when it compares
// split sets with whole-K ones; `kuiper tune` measures both.

#ifndef KUIPER_GEMM_SPLIT_K_H
#define KUIPER_GEMM_SPLIT_K_H

// C (M x N) = epilogue(sum over s < slices of partial[s] + bias), with gemm.h's bias modes.
__kernel void gemm_split_k_reduce(__global const float *partial, const int slices, const int M,
                                  const int N, __global float *C, __global const float *bias,
                                  const int bias_mode, __global const float *residual)
{
    const int i = get_global_id(0);
    if (i >= M * N)
        return;
    float v = 0.0f;
    for (int s = 0; s < slices; ++s)
        v += partial[s * M * N + i];
    v += BIAS_OF(0, i / N, i % N);
    C[i] = kuiper_epilogue(v, residual, i);
}

#endif  // KUIPER_GEMM_SPLIT_K_H
