// One separable resize pass along one dim: x is (outer, n_in, inner), y is (outer, n_out, inner).
//
// Output index o along the dim reads the TAPS input indices idx[o*TAPS + k] and weighs them by
// w[o*TAPS + k] (layers/cpu/upsample.py computes both tables on the host, in PyTorch's float32
// arithmetic, and uploads them once). A 2-D bilinear resize is two passes, W then H.
// Build with -DTAPS=1 (nearest: a plain copy, any element type T) or 2 / 4 (linear / cubic).
#ifndef T
#define T float
#endif

__kernel void resample(__global const T *x, __global T *y, __global const int *idx,
                       __global const float *w, const int n_in, const int n_out,
                       const int inner, const int n)
{
    const int i = get_global_id(0);
    if (i >= n)
        return;
    const int c = i % inner;
    const int t = i / inner;
    const int o = t % n_out;
    __global const T *line = x + (t / n_out) * n_in * inner + c;  // x[outer, :, c]
#if TAPS == 1
    y[i] = line[idx[o] * inner];
#else
    const int k0 = o * TAPS;
    float acc = line[idx[k0] * inner] * w[k0];
    for (int k = 1; k < TAPS; ++k)
        acc += line[idx[k0 + k] * inner] * w[k0 + k];
    y[i] = acc;
#endif
}

// Nearest resizing of the last two dims in one launch (the two passes above would take two,
// with the partial result in a scratch buffer): x is (outer, H, W), y is (outer, OH, OW), and
// y[p, oy, ox] = x[p, iy[oy], ix[ox]] with the tables of the two passes.
__kernel void nearest2d(__global const T *x, __global T *y, __global const int *iy,
                        __global const int *ix, const int H, const int W, const int OH,
                        const int OW, const int n)
{
    const int i = get_global_id(0);
    if (i >= n)
        return;
    const int ox = i % OW, t = i / OW;
    const int oy = t % OH, plane = t / OH;
    y[i] = x[((long)plane * H + iy[oy]) * W + ix[ox]];
}

// The same with one work-item per output row (`n` = outer * OH rows), for CPU devices with many
// rows (layers/opencl/upsample.py decides): the row's source is found once, then a plain loop,
// where the kernel above spends two divisions and two remainders on every value under PoCL
// (YOLOv5s's 2x upsample of 128 x 40 x 40: 1.3 ms).
__kernel void nearest2d_rows(__global const T *x, __global T *y, __global const int *iy,
                             __global const int *ix, const int H, const int W, const int OH,
                             const int OW, const int n)
{
    const int r = get_global_id(0);          // plane * OH + oy
    if (r >= n)
        return;
    const int oy = r % OH, plane = r / OH;
    __global const T *row = x + ((long)plane * H + iy[oy]) * W;
    __global T *out = y + (long)r * OW;
    for (int ox = 0; ox < OW; ++ox)
        out[ox] = row[ix[ox]];
}
