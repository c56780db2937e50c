// torch.masked_select: stream compaction, the elements of x whose mask is set, in order.
//
// One work-group does it all, in three steps: each work-item counts the selected elements of
// its own contiguous chunk, an exclusive prefix sum over those counts (in local memory) gives
// every chunk its first output position, and each work-item writes its chunk's selected
// elements from there. Elements stay in row-major order, as in PyTorch. One work-group is
// plenty for the tensors masked_select sees in inference; a large one would scan per group and
// then across groups.
//
// x and mask broadcast together (clkernels/broadcast.h: operand 0 is x, operand 1 the mask).
// y has room for all n elements; *count receives how many were written, which the host reads
// (the only host wait of the layer: the size is data-dependent).
// Build with -DT=<move type of x> and -DLOCAL=<work-group size>.
#include "broadcast.h"

__kernel void masked_select(__global const T *x, __global const uchar *mask, __global T *y,
                            __global int *count, __global const int *meta, const int rank,
                            const int n)
{
    __local int first[LOCAL];
    const int t = get_local_id(0);
    const int chunk = (n + LOCAL - 1) / LOCAL;
    const int begin = min(n, t * chunk), end = min(n, begin + chunk);
    int mine = 0;
    for (int i = begin; i < end; ++i)
        mine += mask[broadcast_offset(i, meta, rank, 1)] != 0;
    first[t] = mine;
    barrier(CLK_LOCAL_MEM_FENCE);
    if (t == 0) {  // exclusive prefix sum, serial: LOCAL additions
        int total = 0;
        for (int k = 0; k < LOCAL; ++k) {
            const int c = first[k];
            first[k] = total;
            total += c;
        }
        *count = total;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    int out = first[t];
    for (int i = begin; i < end; ++i)
        if (mask[broadcast_offset(i, meta, rank, 1)])
            y[out++] = x[broadcast_offset(i, meta, rank, 0)];
}
