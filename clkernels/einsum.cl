// torch.einsum for any equation, one work-item per output element: the sum, over every
// combination of the summed letters, of the product of the operands' elements. Good for the
// small contractions einsum writes in models (bilinear forms, traces, batched products);
// a large plain matrix product is faster as nn.Linear / torch.matmul (tiled GEMM).
//
// meta = [sizes of the output letters (n_out), sizes of the summed letters (n_sum),
//         then for each operand k: its stride for each output letter, then for each summed
//         letter (0 where the operand lacks the letter or broadcasts it)].
// Build with -DT=<float|int|long ...> (elements and accumulator) and -DNOPS=<1..4>.

inline int operand_offset(int index, __global const int *sizes, __global const int *strides,
                          const int count)
{
    int offset = 0;
    for (int d = count - 1; d >= 0; --d) {
        offset += (index % sizes[d]) * strides[d];
        index /= sizes[d];
    }
    return offset;
}

__kernel void einsum(__global const T *a, __global const T *b, __global const T *c,
                     __global const T *d, __global T *y, __global const int *meta,
                     const int n_out, const int n_sum, const int terms, const int n)
{
    const int i = get_global_id(0);
    if (i >= n)
        return;
    const int letters = n_out + n_sum;
    __global const int *strides = meta + letters;   // operand k: strides + k * letters
    __global const T *ops[4] = {a, b, c, d};
    int base[4];
    for (int k = 0; k < NOPS; ++k)
        base[k] = operand_offset(i, meta, strides + k * letters, n_out);
    T sum = 0;
    for (int t = 0; t < terms; ++t) {
        T product = 1;
        for (int k = 0; k < NOPS; ++k)
            product *= ops[k][base[k] + operand_offset(t, meta + n_out,
                                                        strides + k * letters + n_out, n_sum)];
        sum += product;
    }
    y[i] = sum;
}
