// Batched, strided GEMM: for every batch b,
//
//     C[b] = alpha * A[b] @ B[b]  (+ beta * D[b] when HAS_BIAS)
//
// Nothing is assumed about memory layout. Element (r, c) of matrix b of an operand X lives at
//     X[x_off[b] + r * x_rs + c * x_cs]
// where x_off is a small table uploaded once at bind time. That one rule covers every case the
// layers need without copying data around:
//   - broadcast batch dims (the table repeats offsets; a stride of 0 repeats a row or column),
//   - transposed operands (swap the strides: K^T in attention, W^T in a projection),
//   - attention heads that live inside a (L, N, E) tensor (offset n*E + h*hd, row stride N*E),
//   - a bias vector added to every row (D row stride 0, column stride 1).
//
// Tiling: a TS x TS work-group computes a TS x TS block of C. It walks along K in steps of TS,
// each work-item loads one element of the A tile and one of the B tile into local memory, and
// after a barrier every work-item reuses TS values of each tile from fast local memory: global
// memory traffic drops by a factor of TS compared with one-work-item-per-output.
// Loads outside the matrices are replaced by zeros, so no out-of-bounds read ever happens and
// the partial tiles at the edges need no special code.

#ifndef TS
#define TS 16
#endif
#ifndef HAS_BIAS
#define HAS_BIAS 0
#endif

__kernel __attribute__((reqd_work_group_size(TS, TS, 1)))
void bgemm(const int M, const int N, const int K,
           __global const float *A, __global const int *a_off, const int a_rs, const int a_cs,
           __global const float *B, __global const int *b_off, const int b_rs, const int b_cs,
           __global float *C, __global const int *c_off, const int c_rs, const int c_cs,
           __global const float *D, __global const int *d_off, const int d_rs, const int d_cs,
           const float alpha, const float beta)
{
    const int col = get_global_id(0);   // n
    const int row = get_global_id(1);   // m
    const int b = get_global_id(2);     // batch
    const int lc = get_local_id(0);
    const int lr = get_local_id(1);

    __local float As[TS][TS];           // As[m][k]
    __local float Bs[TS][TS + 1];       // Bs[k][n]; +1 avoids local-memory bank conflicts

    const int ao = a_off[b];
    const int bo = b_off[b];
    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += TS) {
        // Work-item (lr, lc) loads A[row, k0 + lc] and B[k0 + lr, col].
        const int ka = k0 + lc;
        const int kb = k0 + lr;
        As[lr][lc] = (row < M && ka < K) ? A[ao + row * a_rs + ka * a_cs] : 0.0f;
        Bs[lr][lc] = (kb < K && col < N) ? B[bo + kb * b_rs + col * b_cs] : 0.0f;
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int k = 0; k < TS; ++k)
            acc += As[lr][k] * Bs[k][lc];
        barrier(CLK_LOCAL_MEM_FENCE);   // the next iteration overwrites the tiles
    }
    if (row < M && col < N) {
        float value = alpha * acc;
#if HAS_BIAS
        value += beta * D[d_off[b] + row * d_rs + col * d_cs];
#endif
        C[c_off[b] + row * c_rs + col * c_cs] = value;
    }
}
