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
