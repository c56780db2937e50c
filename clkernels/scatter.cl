// Writing into a copy of a tensor: slice_copy / slice_scatter, scatter_add, index_put.
// Every kernel here runs after strided_copy (strided.h) has copied x into y, and updates y.
// Build with -DT=<type of x> (arithmetic type: scatter_add and index_put add), -DI=<index type>.
#include "strided.h"
#include "broadcast.h"

// y[region] = src: element i of the region (a strided view of y, meta_region/offset) takes
// element i of src broadcast to the region's shape (meta_src, operand 0).
__kernel void slice_scatter(__global const T *src, __global T *y,
                            __global const int *meta_region, const int offset,
                            __global const int *meta_src, const int rank, const int n)
{
    const int i = get_global_id(0);
    if (i < n)
        y[strided_offset(i, meta_region, rank, offset)] = src[broadcast_offset(i, meta_src, rank, 0)];
}

// scatter_add, written as a gather so that no two work-items write the same element (floats
// have no atomic add in OpenCL 1.2): output element o, at coordinate c along dim, adds every
// src[e] whose index[e] == c, for the e that agree with o in all other coordinates, in order
// (the order PyTorch's CPU adds them in). meta = [x shape, index shape, index strides,
// src strides] (rank ints each); dim_stride_i/s are the strides along dim.
__kernel void scatter_add(__global const I *index, __global const T *src, __global T *y,
                          __global const int *meta, const int rank, const int dim,
                          const int n)
{
    const int o = get_global_id(0);
    if (o >= n)
        return;
    int rest = o, base_i = 0, base_s = 0, c = 0;
    for (int d = rank - 1; d >= 0; --d) {
        const int k = rest % meta[d];
        rest /= meta[d];
        if (d == dim) {
            c = k;
        } else {
            if (k >= meta[rank + d])
                return;  // outside the index's extent: nothing is added here
            base_i += k * meta[2 * rank + d];
            base_s += k * meta[3 * rank + d];
        }
    }
    T sum = y[o];
    for (int k = 0; k < meta[rank + dim]; ++k)
        if (index[base_i + k * meta[2 * rank + dim]] == c)
            sum += src[base_s + k * meta[3 * rank + dim]];
    y[o] = sum;
}

// index_put with constant indices, grouped on the host: destination row rows[u] (of `inner`
// elements) receives the value rows entries[starts[u] .. starts[u + 1]) (values broadcast to
// (entries, inner): meta_v, operand 0). ACCUMULATE adds them all to y in order; otherwise the
// last one wins. Distinct work-items never share a destination. scatter_add with a constant
// index uses it too (inner = 1, rows = flat destinations, meta_v = index shape + src strides).
__kernel void index_put(__global const T *values, __global T *y, __global const int *rows,
                        __global const int *starts, __global const int *entries,
                        __global const int *meta_v, const int rank, const int inner,
                        const int n)
{
    const int i = get_global_id(0);
    if (i >= n)
        return;
    const int u = i / inner, j = i - u * inner;
    const int dst = rows[u] * inner + j;
#if ACCUMULATE
    T sum = y[dst];
    for (int e = starts[u]; e < starts[u + 1]; ++e)
        sum += values[broadcast_offset(entries[e] * inner + j, meta_v, rank, 0)];
    y[dst] = sum;
#else
    y[dst] = values[broadcast_offset(entries[starts[u + 1] - 1] * inner + j, meta_v, rank, 0)];
#endif
}
