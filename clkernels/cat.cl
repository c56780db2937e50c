// Concatenation. Seen as 2-D, an input is `rows` x `len_k` (rows = the product of the dims
// before the cat dim) and each of its rows lands in the output row of the same number, after
// the rows of the inputs before it. Build with -DT=<an integer type of the element's size>.
//
// One launch copies up to four inputs (unused ones have length 0): on a GPU a launch costs the
// host 10-40 us (NVIDIA's OpenCL driver), often more than the copy itself, and YOLOv5s has 18
// concatenations. A work-item per output element of the launch's columns: it finds its input
// by comparing its column with the inputs' lengths. A cat of more inputs takes one launch per
// four, each writing its own columns, `first_column` onwards.
#ifndef T
#define T float
#endif

// Both kernels take the whole tensor first, then the four parts (layers/opencl_helpers/blocks.py
// binds them alike).
__kernel void cat4(__global T *y, __global const T *x0, __global const T *x1,
                   __global const T *x2, __global const T *x3, const int len0, const int len1,
                   const int len2, const int len3, const int y_row, const int first_column,
                   const int n)
{
    const int i = get_global_id(0);
    if (i >= n)
        return;
    const int width = len0 + len1 + len2 + len3;   // columns of this launch
    const int r = i / width, column = i - r * width;
    int c = column;
    T v;
    if (c < len0) {
        v = x0[r * len0 + c];
    } else if ((c -= len0) < len1) {
        v = x1[r * len1 + c];
    } else if ((c -= len1) < len2) {
        v = x2[r * len2 + c];
    } else {
        c -= len2;
        v = x3[r * len3 + c];
    }
    y[r * y_row + first_column + column] = v;
}

// The other way round, for split/chunk/unbind: output k gets columns [k-th piece] of every row
// of x, whose rows are `x_row` long; this launch reads the columns first_column onwards.
__kernel void split4(__global const T *x, __global T *y0, __global T *y1, __global T *y2,
                     __global T *y3, const int len0, const int len1, const int len2,
                     const int len3, const int x_row, const int first_column, const int n)
{
    const int i = get_global_id(0);
    if (i >= n)
        return;
    const int width = len0 + len1 + len2 + len3;
    const int r = i / width, column = i - r * width;
    const T v = x[r * x_row + first_column + column];
    int c = column;
    if (c < len0)
        y0[r * len0 + c] = v;
    else if ((c -= len0) < len1)
        y1[r * len1 + c] = v;
    else if ((c -= len1) < len2)
        y2[r * len2 + c] = v;
    else
        y3[r * len3 + (c - len2)] = v;
}

// The same two copies with one work-item per row (`n` = rows), for CPU devices when the rows
// are short and many (layers/opencl_helpers/blocks.py decides): each piece is a plain loop,
// with no division per element. Under PoCL the kernels above spend a division, a remainder
// and the comparisons on every element: YOLOv5s's detection head splits and re-joins rows of
// 85 floats as 2 + 2 + 81 (no vector width divides them), 19200 rows, 1.7 ms each way.
__kernel void cat4_rows(__global T *y, __global const T *x0, __global const T *x1,
                        __global const T *x2, __global const T *x3, const int len0,
                        const int len1, const int len2, const int len3, const int y_row,
                        const int first_column, const int n)
{
    const int r = get_global_id(0);
    if (r >= n)
        return;
    __global T *out = y + r * y_row + first_column;
    for (int c = 0; c < len0; ++c)
        out[c] = x0[r * len0 + c];
    out += len0;
    for (int c = 0; c < len1; ++c)
        out[c] = x1[r * len1 + c];
    out += len1;
    for (int c = 0; c < len2; ++c)
        out[c] = x2[r * len2 + c];
    out += len2;
    for (int c = 0; c < len3; ++c)
        out[c] = x3[r * len3 + c];
}

__kernel void split4_rows(__global const T *x, __global T *y0, __global T *y1, __global T *y2,
                          __global T *y3, const int len0, const int len1, const int len2,
                          const int len3, const int x_row, const int first_column, const int n)
{
    const int r = get_global_id(0);
    if (r >= n)
        return;
    __global const T *in = x + r * x_row + first_column;
    for (int c = 0; c < len0; ++c)
        y0[r * len0 + c] = in[c];
    in += len0;
    for (int c = 0; c < len1; ++c)
        y1[r * len1 + c] = in[c];
    in += len1;
    for (int c = 0; c < len2; ++c)
        y2[r * len2 + c] = in[c];
    in += len2;
    for (int c = 0; c < len3; ++c)
        y3[r * len3 + c] = in[c];
}
