// torch.flip is a strided copy with negative strides (strided.h). torch.roll is not a view
// (it wraps around), so it has its own kernel: output coordinate c along a dim reads input
// coordinate (c - shift) mod size. meta = [shape, strides, shifts], shifts already in [0, size).
#include "strided.h"

__kernel void roll(__global const T *x, __global T *y, __global const int *meta,
                   const int rank, const int n)
{
    const int i = get_global_id(0);
    if (i >= n)
        return;
    int rest = i, src = 0;
    for (int d = rank - 1; d >= 0; --d) {
        const int size = meta[d];
        int c = rest % size - meta[2 * rank + d];
        rest /= size;
        if (c < 0)
            c += size;
        src += c * meta[rank + d];
    }
    y[i] = x[src];
}
