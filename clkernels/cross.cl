// torch.cross: one work-item per output element. Element i has coordinate c (0, 1 or 2) along
// the cross dim, whose elements lie `inner` apart; component k of the same vector is output
// element i + (k - c) * inner, found in a and b with clkernels/broadcast.h (a: operand 0,
// b: operand 1). Build with -DT=<type>.
#include "broadcast.h"

__kernel void cross_product(__global const T *a, __global const T *b, __global T *y,
                    __global const int *meta, const int rank, const int inner, const int n)
{
    const int i = get_global_id(0);
    if (i >= n)
        return;
    const int c = (i / inner) % 3;
    const int first = i - c * inner;
    const int j = first + ((c + 1) % 3) * inner, k = first + ((c + 2) % 3) * inner;
    y[i] = a[broadcast_offset(j, meta, rank, 0)] * b[broadcast_offset(k, meta, rank, 1)]
         - a[broadcast_offset(k, meta, rank, 0)] * b[broadcast_offset(j, meta, rank, 1)];
}
