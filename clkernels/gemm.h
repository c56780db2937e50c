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
// Two kernel families with the same arguments, one file each, plus gemv for a few rows and,
// under -DGEMM_MMA=1, the tensor-core GEMM; every tile size is a -D option, so one source gives
// many kernels, and the host (layers/opencl_gemm/parameter_sets.py) lists the parameter sets
// the cost model and `kuiper tune` choose from:
//
//   gemm_tiled.h    GPUs: local-memory tiles, double-buffered, 8x8 register blocks per
//                   work-item, vector loads. Chosen on every device that is not a CPU.
//   gemm_blocked.h  CPUs (PoCL): float8/float16 SIMD blocks, K walked in cache-sized chunks.
//                   Chosen on CPU devices.
//   gemv.h          Any device: a linear layer on a few rows (a classifier at batch 1), one
//                   dot product per output.
//   gemm_split_k.h  The second pass of gemm_tiled built with SPLIT_K: adds the slices of K.
//                   Linear layers on GPUs only. fp32 arithmetic like gemm_tiled, offered at
//                   every precision as gemm_tiled's whole-K sets are (never with gemm_mma);
//                   the product pass reads a half weight (HALF_B) as gemm_tiled does, the sum
//                   pass reads only floats.
//   gemm_mma.h      NVIDIA GPUs, precision tf32 or fp16: warp-level mma.sync through inline
//                   PTX (only where kuiper/opencl/device/tensor_cores.py's probe says so), or
//                   its exact emulation (-DMMA_EMULATED=1) anywhere, for tests.
//
// Half storage (-DHALF_A=1 / -DHALF_B=1): that operand is stored as IEEE half (a weight under
// precision fp16, half the bytes) and converted to float as it is loaded; the arithmetic stays
// float. Vectors of 2 and 4 (the tiles' loads) go through vload_half2/4, a core OpenCL function
// every device has, even without cl_khr_fp16. Single values and the CPU kernels' rows of 8 and
// 16 are converted with integer arithmetic instead (kuiper_half_to_float below): PoCL compiles
// vload_half to a call per value, which made MobileNetV2's classifier (gemv) 25x slower than
// with float weights, where the integer version is SIMD code.
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
#ifndef HALF_A
#define HALF_A 0
#endif
#ifndef HALF_B
#define HALF_B 0
#endif
#ifndef GEMM_MMA
#define GEMM_MMA 0
#endif

#include "tile_sizes.h"  // gemm_tiled's defaults, when the host passes no tile sizes

// Where A's element (row, k) and B's element (k, col) are, whichever way they are stored.
#if TRANS_A
#define A_INDEX(row, k) ((k) * M + (row))
#else
#define A_INDEX(row, k) ((row) * K + (k))
#endif
#if TRANS_B
#define B_INDEX(k, col) ((col) * K + (k))
#else
#define B_INDEX(k, col) ((k) * N + (col))
#endif

// The float a half's 16 bits stand for (any of them: subnormals, infinities, NaN). The bits
// moved up into a float's places are the half's value with the exponent biased by 15 instead
// of float's 127: times 2^112 it is exact, subnormals included (on a device that flushes float
// subnormals, half's below 6e-5 become 0); infinities and NaN get float's all-ones exponent
// instead. Written once for scalars and for vectors of 8 and 16.
#define KUIPER_HALF_TO_FLOAT(N, SUFFIX)                                                        \
    inline float##N kuiper_half_to_float##SUFFIX(const ushort##N h)                           \
    {                                                                                          \
        const uint##N bits = convert_uint##N(h);                                               \
        const uint##N magnitude = (bits & 0x7fffu) << 13;                                      \
        const uint##N scaled = as_uint##N(as_float##N(magnitude) * 0x1p112f);                  \
        const uint##N value = select(scaled, magnitude | 0x7f800000u,                          \
                                     as_uint##N(magnitude >= (uint##N)(0x7c00u << 13)));        \
        return as_float##N(value | ((bits & 0x8000u) << 16));                                  \
    }
KUIPER_HALF_TO_FLOAT(, )
KUIPER_HALF_TO_FLOAT(8, 8)
#ifndef KUIPER_NARROW_VECTORS   // set where the compiler cannot build 16-wide vectors
KUIPER_HALF_TO_FLOAT(16, 16)
#endif

// The element types in memory, and one element read as a float.
#if HALF_A
#define A_ELEM half
#define LOAD_A(i) kuiper_half_to_float(((__global const ushort *)A)[i])
#else
#define A_ELEM float
#define LOAD_A(i) A[i]
#endif
#if HALF_B
#define B_ELEM half
#define LOAD_B(i) kuiper_half_to_float(((__global const ushort *)B)[i])
#else
#define B_ELEM float
#define LOAD_B(i) B[i]
#endif
#define A_AT(row, k) LOAD_A(A_INDEX(row, k))
#define B_AT(k, col) LOAD_B(B_INDEX(k, col))

// The arguments of every kernel, in this order: the host binds any of them with one set_args
// (weight_gemm_launch in layers/opencl_gemm/launch.py).
#define GEMM_ARGS                                                                             \
    const int M, const int N, const int K, __global const A_ELEM *A, const int a_group_stride, \
    __global const B_ELEM *B, const int b_batch_stride, __global float *C,                    \
    const int c_batch_stride, __global const float *bias, const int bias_mode,                \
    const int groups, __global const float *residual

// `count` (<= n, n = 1, 2 or 4, a constant) consecutive values from p to out[0..n-1], zeros for
// the rest: one vector load when the whole vector is inside the matrix, guarded scalar loads
// at its edge. For floats and for halves (read as floats).
inline void load_floats(__global const float *p, const int count, const int n, float *out)
{
    if (n == 4 && count >= 4) {
        vstore4(vload4(0, p), 0, out);
        return;
    }
    if (n == 2 && count >= 2) {
        vstore2(vload2(0, p), 0, out);
        return;
    }
    for (int e = 0; e < n; ++e)
        out[e] = e < count ? p[e] : 0.0f;
}

inline void load_halves(__global const half *p, const int count, const int n, float *out)
{
    if (n == 4 && count >= 4) {
        vstore4(vload_half4(0, p), 0, out);
        return;
    }
    if (n == 2 && count >= 2) {
        vstore2(vload_half2(0, p), 0, out);
        return;
    }
    for (int e = 0; e < n; ++e)
        out[e] = e < count ? vload_half(e, p) : 0.0f;
}
#if HALF_A
#define LOAD_A_VECTOR load_halves
#else
#define LOAD_A_VECTOR load_floats
#endif
#if HALF_B
#define LOAD_B_VECTOR load_halves
#else
#define LOAD_B_VECTOR load_floats
#endif

// The bias of output (row, col) of group g.
#define BIAS_OF(g, row, col) \
    (bias_mode == 1 ? bias[(g) * M + (row)] : (bias_mode == 2 ? bias[col] : 0.0f))

#include "gemm_tiled.h"
#include "gemm_blocked.h"
#include "gemv.h"
#include "gemm_split_k.h"
#if GEMM_MMA   // inline PTX: compiled only where asked (the other families build everywhere)
#include "gemm_mma.h"
#endif

#endif  // KUIPER_GEMM_H
