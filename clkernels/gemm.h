// gemm.h: the matrix product behind conv1d, conv2d, conv3d, conv_transpose and linear.
//
//     C[z] (M x N) = A[z % groups] (M x K) @ B[z] (K x N)  (+ bias, + epilogue)   z = 0 .. Z-1
//
// z runs over (image, group) pairs: a grouped convolution is `groups` independent GEMMs that
// share one weight matrix per group across the batch, hence A's index z % groups.
// Row-major everywhere; TRANS_A=1 means A is stored K x M (the transposed convolution reads
// its weight that way), TRANS_B=1 that B is stored N x K (a linear layer's weight).
// bias_mode: 0 = no bias (`bias` is not read), 1 = bias[g * M + row] (a conv's output
// channel: group g owns channels g*M .. g*M+M-1), 2 = bias[column] (a linear layer).
// Every value is stored through kuiper_epilogue (epilogue.h): a fused activation and/or residual
// add, read at the flat output index z * c_batch_stride + row * N + column.
//
// Two kernel families with the same arguments, one file each, plus gemv for a few rows; every
// tile size is a -D option, so one source gives many kernels, and the host
// (layers/opencl_gemm/parameter_sets.py) lists the parameter sets the cost model and
// `kuiper tune` choose from:
//
//   gemm_tiled.h    GPUs: local-memory tiles, double-buffered, 8x8 register blocks per
//                   work-item, vector loads. Chosen on every device that is not a CPU.
//   gemm_blocked.h  CPUs (PoCL): float8/float16 SIMD blocks, K walked in cache-sized chunks.
//                   Chosen on CPU devices.
//   gemv.h          Any device: a linear layer on a few rows (a classifier at batch 1), one
//                   dot product per output.
//   gemm_split_k.h  The second pass of gemm_tiled built with SPLIT_K: adds the slices of K.
//
// Edges, in both: nothing is ever read out of bounds (loads outside the matrices are zeros or
// clamped into range), stores are guarded, so any M, N, K works with any parameter set.
//
// The including file may set TRANS_A / TRANS_B before #include "gemm.h".

#ifndef KUIPER_GEMM_H
#define KUIPER_GEMM_H

#include "epilogue.h"

#ifndef TRANS_A
#define TRANS_A 0
#endif
#ifndef TRANS_B
#define TRANS_B 0
#endif

#include "tile_sizes.h"  // gemm_tiled's defaults, when the host passes no tile sizes

// A's element (row, k) and B's element (k, col), whichever way they are stored.
#if TRANS_A
#define A_AT(row, k) A[(k) * M + (row)]
#else
#define A_AT(row, k) A[(row) * K + (k)]
#endif
#if TRANS_B
#define B_AT(k, col) B[(col) * K + (k)]
#else
#define B_AT(k, col) B[(k) * N + (col)]
#endif

// The arguments of all three kernels, in this order: the host binds any of them with one
// set_args (weight_gemm_launch in layers/opencl_gemm/launch.py).
#define GEMM_ARGS                                                                             \
    const int M, const int N, const int K, __global const float *A, const int a_group_stride, \
    __global const float *B, const int b_batch_stride, __global float *C,                     \
    const int c_batch_stride, __global const float *bias, const int bias_mode,                \
    const int groups, __global const float *residual

// The bias of output (row, col) of group g.
#define BIAS_OF(g, row, col) \
    (bias_mode == 1 ? bias[(g) * M + (row)] : (bias_mode == 2 ? bias[col] : 0.0f))

#include "gemm_tiled.h"
#include "gemm_blocked.h"
#include "gemv.h"
#include "gemm_split_k.h"

#endif  // KUIPER_GEMM_H
