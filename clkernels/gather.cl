// torch.gather (index_select and Tensor.index use `index_select` from strided.h).
// Build with -DT=<move type of the data> and -DI=<long|int: the index dtype>.
#include "strided.h"

// torch.gather: the output has the index's shape; element i reads x at its own coordinates,
// except along `dim`, where it reads idx[i]. meta = [index shape, x strides with the stride
// of `dim` set to 0], so strided_offset gives the address of every coordinate but `dim`.
__kernel void gather(__global const T *x, __global const I *idx, __global T *y,
                     __global const int *meta, const int rank, const int dim_stride,
                     const int dim_size, const int n)
{
    const int i = get_global_id(0);
    if (i >= n)
        return;
    long k = idx[i];
    if (k < 0)
        k += dim_size;
    y[i] = (k >= 0 && k < dim_size) ? x[strided_offset(i, meta, rank, 0) + (int)k * dim_stride]
                                    : (T)0;
}

// Tensor.index with several index tensors (x[i, j], x[:, i, :, j]): they broadcast together
// to a joint shape, and output element o reads x at the coordinates its own position gives
// for the `:` dims plus, for each index tensor k, the value idx_k[o's joint coordinates].
//   meta = [out shape (rank), x strides per out dim (0 on joint dims),
//           for each index tensor k: its strides per out dim (0 outside the joint dims),
//           then for each k: (size of the x dim it indexes, x stride of that dim)]
// Up to 4 index tensors (unused pointers repeat the first); all of dtype I.
__kernel void advanced_index(__global const T *x, __global const I *i0, __global const I *i1,
                             __global const I *i2, __global const I *i3, __global T *y,
                             __global const int *meta, const int rank, const int m,
                             const int n)
{
    const int o = get_global_id(0);
    if (o >= n)
        return;
    __global const I *idx[4] = {i0, i1, i2, i3};
    int rest = o, src = 0;
    int at[4] = {0, 0, 0, 0};
    for (int d = rank - 1; d >= 0; --d) {
        const int c = rest % meta[d];
        rest /= meta[d];
        src += c * meta[rank + d];
        for (int k = 0; k < m; ++k)
            at[k] += c * meta[(2 + k) * rank + d];
    }
    __global const int *dims = meta + (2 + m) * rank;
    for (int k = 0; k < m; ++k) {
        long v = idx[k][at[k]];
        if (v < 0)
            v += dims[2 * k];
        if (v < 0 || v >= dims[2 * k]) {  // out of range: no error on a device, write 0
            y[o] = (T)0;
            return;
        }
        src += (int)v * dims[2 * k + 1];
    }
    y[o] = x[src];
}
