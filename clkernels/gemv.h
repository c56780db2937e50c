// gemv.h: the matrix product of a few rows (included by gemm.h, which documents the arguments).
//
// Good for: a linear layer on one or a few rows, such as a classifier head at batch 1 (ResNet's
// fc, 512 -> 1000; MobileNetV2's, 1280 -> 1000). Both GEMM families compute blocks of 8 rows
// and more: with one row, 7 of every 8 multiply-adds are thrown away, and the weight, which is
// the whole cost of such a layer, is read through gathers. The selector offers this kernel for
// linear layers (TRANS_B: the weight W stored N x K) with at most GEMV_MAX_ROWS rows
// (layers/opencl_gemm/parameter_sets.py); it is bound by memory: reading W once.
//
// Each output C[r, j] is one dot product of two contiguous rows, A[r, :] (the input) and
// W[j, :], read 8 values at a time as float8 (a SIMD register on a CPU). Any layout computes
// correctly through A_AT / B_AT, but only the linear layout reads contiguous memory.
//
// LANES work-items share one output: each sums every LANES-th chunk of 8 values, then the
// group adds the partial sums in local memory. LANES = 1 on CPUs (one work-item per output, no
// barrier), 32-64 on GPUs, so that 1000 outputs still make enough work-items and a group's
// reads of W's row are contiguous. Global size (N * LANES, M, Z), rounded up; local (LANES...).

#ifndef KUIPER_GEMV_H
#define KUIPER_GEMV_H

#ifndef LANES
#define LANES 1
#endif

// 8 values along k, as one vector. A half operand (the weight under fp16) is loaded as 8
// 16-bit values and converted as one vector (gemm.h says why).
#define EIGHT(AT, T, r, k) (T)(AT(r, k), AT(r, k + 1), AT(r, k + 2), AT(r, k + 3), \
                               AT(r, k + 4), AT(r, k + 5), AT(r, k + 6), AT(r, k + 7))
#define A_BITS_AT(r, k) ((__global const ushort *)A)[A_INDEX(r, k)]
#define B_BITS_AT(j, k) ((__global const ushort *)B)[B_INDEX(k, j)]
#define B_AT_COL(j, k) B_AT(k, j)
#if HALF_A
#define A_ROW8(r, k) kuiper_half_to_float8(EIGHT(A_BITS_AT, ushort8, r, k))
#else
#define A_ROW8(r, k) EIGHT(A_AT, float8, r, k)
#endif
#if HALF_B
#define B_COL8(k, j) kuiper_half_to_float8(EIGHT(B_BITS_AT, ushort8, j, k))
#else
#define B_COL8(k, j) EIGHT(B_AT_COL, float8, j, k)
#endif

__kernel void gemv(GEMM_ARGS)
{
#if LANES > 1
    const int j = get_group_id(0), lane = get_local_id(0);
#else
    const int j = get_global_id(0), lane = 0;
#endif
    const int r = get_global_id(1), z = get_global_id(2);
    const int g = z % groups;
    A += g * a_group_stride;
    B += z * b_batch_stride;
    C += z * c_batch_stride;
    float sum = 0.0f;
    if (j < N && r < M) {   // (no early return: with LANES > 1 every work-item meets the barrier)
        float8 acc = 0.0f;
        const int full = K / 8 * 8;
        for (int k = lane * 8; k < full; k += LANES * 8)
            acc += A_ROW8(r, k) * B_COL8(k, j);
        for (int k = full + lane; k < K; k += LANES)   // the K % 8 values left over
            sum += A_AT(r, k) * B_AT(k, j);
        const float4 folded = acc.lo + acc.hi;
        sum += (folded.x + folded.y) + (folded.z + folded.w);
    }
#if LANES > 1
    __local float partial[LANES];
    partial[lane] = sum;
    for (int step = LANES / 2; step > 0; step /= 2) {   // LANES is a power of two
        barrier(CLK_LOCAL_MEM_FENCE);
        if (lane < step)
            partial[lane] += partial[lane + step];
    }
    if (lane != 0)
        return;
    sum = partial[0];
#endif
    if (j < N && r < M)
        C[r * N + j] = kuiper_epilogue(sum + BIAS_OF(g, r, j), residual,
                                       z * c_batch_stride + r * N + j);
}

#endif  // KUIPER_GEMV_H
