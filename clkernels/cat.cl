// Concatenation as block copies. Seen as 2-D, an input is `rows` x `row_len` (rows = the
// product of the dims before the cat dim) and each of its rows lands in the output row of the
// same number, `y_offset` elements in (the sizes of the inputs before it along the cat dim).
// One launch per input; build with -DT=<an integer type of the element's size>.
#ifndef T
#define T float
#endif

__kernel void block_copy(__global const T *x, __global T *y, const int row_len,
                         const int y_row_stride, const int y_offset, const int n)
{
    const int i = get_global_id(0);
    if (i < n) {
        const int r = i / row_len;
        y[r * y_row_stride + y_offset + (i - r * row_len)] = x[i];
    }
}
