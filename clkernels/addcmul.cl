// torch.addcmul: y = x + value * t1 * t2, elementwise, the three tensors broadcast. Good for
// ConvNeXtV2's global response norm and ResMLP's affine layers (layers/cpu/addcmul.py).
//
// Build options: T (the element type of every operand and of y), FLAT (1: every operand has
// the output's shape, so the element index is the offset; 0: clkernels/broadcast.h finds each
// operand's element through `meta`). `value` is a one-element buffer: the model's fourth input
// (a folded constant, already on the device) or the parameter, uploaded once.
#include "broadcast.h"

__kernel void addcmul(__global const T *x, __global const T *t1, __global const T *t2,
                      __global const T *value, __global T *y, __global const int *meta,
                      const int rank, const int n)
{
    const int i = get_global_id(0);
    if (i >= n)
        return;
#if FLAT
    const int ix = i, i1 = i, i2 = i;
#else
    const int ix = broadcast_offset(i, meta, rank, 0);
    const int i1 = broadcast_offset(i, meta, rank, 1);
    const int i2 = broadcast_offset(i, meta, rank, 2);
#endif
    y[i] = x[ix] + value[0] * t1[i1] * t2[i2];  // torch's order, left to right
}
