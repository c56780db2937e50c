// Shared data-movement kernels, #included by the .cl file of each stem that uses them
// (permute, slice, split, gather, expand, flip). Build with -DT=<type>: only the element
// *size* matters for a copy, so the host picks uchar/ushort/uint/ulong
// (layers/opencl_helpers/strided.py); -DI=<long|int> is the dtype of index tensors.
//
// meta = [shape[0..rank), strides[0..rank)] in elements; shapes and strides change with every
// operator, so they are a small buffer bound once at build time rather than compile options.
// Indices are 32-bit ints: tensors of up to 2^31 - 1 elements, plenty for inference.
#ifndef KUIPER_STRIDED_H
#define KUIPER_STRIDED_H

#ifndef T
#define T float
#endif
#ifndef I
#define I long
#endif

// Address (in elements) of output element `i` of the strided view described by meta/offset:
// peel the row-major coordinates off `i`, last dim first, and weigh each by its stride.
inline int strided_offset(int i, __global const int *meta, const int rank, const int offset)
{
    int src = offset;
    for (int d = rank - 1; d >= 0; --d) {
        const int size = meta[d];
        src += (i % size) * meta[rank + d];
        i /= size;
    }
    return src;
}

// y[i] = x[address of i in the view]; y is contiguous, x is read through the view.
// Strides may be negative (flip) or zero (broadcast); the host guarantees every address is in x.
__kernel void strided_copy(__global const T *x, __global T *y, __global const int *meta,
                           const int rank, const int offset, const int n)
{
    const int i = get_global_id(0);
    if (i < n)
        y[i] = x[strided_offset(i, meta, rank, offset)];
}

// One work-item per output row (the view's last dim, `cols` = meta[rank - 1] long, read with
// stride meta[2 * rank - 1]): for CPU devices (layers/opencl_helpers/strided.py picks it
// there). Under PoCL strided_copy's index arithmetic, a division and a remainder per dim and
// element, costs more than the copy; here it is paid once per row. ConvNeXt's permutes of
// 1x96x56x56 took 0.52 ms a work-item per element, 0.17 ms a work-item per row (all of its
// 46 permutes: 10.2 -> 2.8 ms).
__kernel void strided_copy_rows(__global const T *x, __global T *y, __global const int *meta,
                                const int rank, const int offset, const int rows)
{
    const int r = get_global_id(0);
    if (r >= rows)
        return;
    const int cols = meta[rank - 1], step = meta[2 * rank - 1];
    __global const T *in = x + strided_offset(r * cols, meta, rank, offset);  // its column 0
    __global T *out = y + r * cols;
    for (int j = 0; j < cols; ++j)
        out[j] = in[j * step];
}

// Whole rows picked by an index: index_select, x[:, idx] with one index tensor, and
// repeat_interleave with a list of counts. x is seen as (outer, dim_size, inner), the output
// as (outer, n_idx, inner), and output row j reads x row idx[j]. Index values may be negative
// (counted from the end, as in PyTorch); one still out of range cannot raise an error on a
// device, so it writes 0 rather than read outside x.
__kernel void index_select(__global const T *x, __global const I *idx, __global T *y,
                           const int inner, const int dim_size, const int n_idx, const int n)
{
    const int i = get_global_id(0);
    if (i >= n)
        return;
    const int t = i / inner;
    const int j = t % n_idx;
    const int o = t / n_idx;
    long k = idx[j];
    if (k < 0)
        k += dim_size;
    y[i] = (k >= 0 && k < dim_size) ? x[(o * dim_size + (int)k) * inner + (i - t * inner)]
                                    : (T)0;
}

#endif
