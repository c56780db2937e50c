// Max pooling over a plane view: x is (planes, D, H, W), y is (planes, OD, OH, OW). 1-D and 2-D
// pools have D = OD = 1 (and 1-D pools H = OH = 1) with trivial windows on those axes, so one
// kernel body, `max_over_window`, serves MaxPool1d, 2d and 3d. It has two entry points:
// `maxpool` for 1-D and 2-D (the (planes, H, W) signature lesson 10 of the course teaches) and
// `maxpool3d`.
//
// One work-item per output element: it walks its window (taps `dilation` apart) and skips taps
// that fall in the padding, which is how padding "counts as -inf" without storing it.
// Built with -DWITH_INDICES to also write where each maximum came from, as a flat position in
// its plane: (z * H + y) * W + x, PyTorch's convention.

inline void max_over_window(const int i, __global const float *x, __global float *y,
                            __global long *indices,
                            const int D, const int H, const int W,
                            const int OD, const int OH, const int OW,
                            const int kd, const int kh, const int kw,
                            const int sd, const int sh, const int sw,
                            const int pd, const int ph, const int pw,
                            const int dd, const int dh, const int dw)
{
    const int ox = i % OW;
    const int oy = (i / OW) % OH;
    const int oz = (i / (OW * OH)) % OD;
    const int plane = i / (OW * OH * OD);
    const int z0 = oz * sd - pd, y0 = oy * sh - ph, x0 = ox * sw - pw;
    __global const float *src = x + (long)plane * D * H * W;

    // Start at the first in-bounds tap, as PyTorch does: it is the reported index even if
    // every value in the window is -inf.
    int rz = z0, ry = y0, rx = x0;
    while (rz < 0) rz += dd;
    while (ry < 0) ry += dh;
    while (rx < 0) rx += dw;
    long best_at = ((long)rz * H + ry) * W + rx;
    float best = -INFINITY;

    for (int kz = 0; kz < kd; ++kz) {
        const int iz = z0 + kz * dd;
        if (iz < 0 || iz >= D)
            continue;
        for (int ky = 0; ky < kh; ++ky) {
            const int iy = y0 + ky * dh;
            if (iy < 0 || iy >= H)
                continue;
            for (int kx = 0; kx < kw; ++kx) {
                const int ix = x0 + kx * dw;
                if (ix < 0 || ix >= W)
                    continue;
                const float v = src[(iz * H + iy) * W + ix];
                if (v > best || isnan(v)) {  // a NaN always wins, as in PyTorch
                    best = v;
                    best_at = ((long)iz * H + iy) * W + ix;
                }
            }
        }
    }
    y[i] = best;
    if (indices)
        indices[i] = best_at;
}

#ifdef WITH_INDICES
#define INDICES_ARG __global long *indices,
#define INDICES indices
#else
#define INDICES_ARG
#define INDICES 0
#endif

// 1-D and 2-D: x is (planes, H, W).
__kernel void maxpool(__global const float *x, __global float *y, INDICES_ARG
                      const int n, const int H, const int W, const int OH, const int OW,
                      const int kh, const int kw, const int sh, const int sw,
                      const int ph, const int pw, const int dh, const int dw)
{
    const int i = get_global_id(0);
    if (i < n)
        max_over_window(i, x, y, INDICES, 1, H, W, 1, OH, OW, 1, kh, kw, 1, sh, sw, 0, ph, pw,
                        1, dh, dw);
}

// 3-D: x is (planes, D, H, W).
__kernel void maxpool3d(__global const float *x, __global float *y, INDICES_ARG
                        const int n, const int D, const int H, const int W,
                        const int OD, const int OH, const int OW,
                        const int kd, const int kh, const int kw,
                        const int sd, const int sh, const int sw,
                        const int pd, const int ph, const int pw,
                        const int dd, const int dh, const int dw)
{
    const int i = get_global_id(0);
    if (i < n)
        max_over_window(i, x, y, INDICES, D, H, W, OD, OH, OW, kd, kh, kw, sd, sh, sw,
                        pd, ph, pw, dd, dh, dw);
}
