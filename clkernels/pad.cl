// Padding as a gather through per-dim source tables (layers/cpu/pad.py builds them).
//
// The output is seen as (outer, o0, o1, o2, o3): the last four dims, with leading dims of
// size 1 when the tensor has fewer. `table` holds, one after the other, for each of those
// dims and each output index along it, the input index to read, or -1 where the output is the
// constant `value`. Unpadded dims have identity tables. Build with -DT=<element type>.
#ifndef T
#define T float
#endif

__kernel void pad(__global const T *x, __global T *y, __global const int *table,
                  const int o0, const int o1, const int o2, const int o3,
                  const int i0, const int i1, const int i2, const int i3,
                  const float value, const int n)
{
    const int i = get_global_id(0);
    if (i >= n)
        return;
    int r = i;
    const int c3 = r % o3; r /= o3;
    const int c2 = r % o2; r /= o2;
    const int c1 = r % o1; r /= o1;
    const int c0 = r % o0;
    const int outer = r / o0;
    const int s0 = table[c0];
    const int s1 = table[o0 + c1];
    const int s2 = table[o0 + o1 + c2];
    const int s3 = table[o0 + o1 + o2 + c3];
    if (s0 < 0 || s1 < 0 || s2 < 0 || s3 < 0)
        y[i] = (T)value;
    else
        y[i] = x[(((outer * i0 + s0) * i1 + s1) * i2 + s2) * i3 + s3];
}
