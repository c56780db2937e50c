// F.pairwise_distance: y[row] = || x1[row, :] - x2[row, :] + eps ||_p over the last dim of the
// broadcast shape; one work-group per row. Each input is read through a [shape, strides] table
// (strided.h) so broadcasting costs nothing; the norm is reduced in local memory (pnorm.h).
// Build options: WG (local size, a power of two), PKIND (which p-norm).

#include "strided.h"
#include "pnorm.h"

__kernel void pairwise_distance(__global const float *x1, __global const float *x2,
                                __global float *y, __global const int *meta1,
                                __global const int *meta2, const int rank, const int n,
                                const float p, const float eps)
{
    const int row = get_group_id(0);
    const int l = get_local_id(0);
    __local float s[WG];

    float acc = pnorm_init();
    for (int r = l; r < n; r += WG) {
        const int i = row * n + r;  // row-major index into the broadcast shape
        const float d = x1[strided_offset(i, meta1, rank, 0)]
                        - x2[strided_offset(i, meta2, rank, 0)] + eps;
        acc = pnorm_fold(acc, fabs(d), p);
    }
    const float total = pnorm_finish(pnorm_group(s, acc), p);
    if (l == 0)
        y[row] = total;
}
