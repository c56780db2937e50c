// Broadcasting for elementwise kernels with several operands, #included by the .cl files of
// the stems that need it (bitwise, masked_select, scatter).
//
// meta = [out shape (rank ints), strides of operand 0 (rank ints), strides of operand 1, ...]
// in elements, with stride 0 along the dims an operand is repeated over
// (layers/opencl_helpers/broadcast.py builds it). Output element i of operand k is at
// broadcast_offset(i, meta, rank, k): peel the coordinates off i, last dim first.
#ifndef KUIPER_BROADCAST_H
#define KUIPER_BROADCAST_H

inline int broadcast_offset(int i, __global const int *meta, const int rank, const int k)
{
    int offset = 0;
    for (int d = rank - 1; d >= 0; --d) {
        offset += (i % meta[d]) * meta[(1 + k) * rank + d];
        i /= meta[d];
    }
    return offset;
}

#endif
