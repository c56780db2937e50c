// Max pooling over a plane view: x is (planes, H, W), y is (planes, OH, OW). A 1-D pool arrives
// with H = OH = 1 and a trivial H window, so this one kernel serves MaxPool1d and MaxPool2d.
//
// One work-item per output element: it walks its kh x kw window (taps `dilation` apart) and
// skips taps that fall in the padding, which is how padding "counts as -inf" without storing it.
// Built with -DWITH_INDICES to also write where each maximum came from (row * W + col).

__kernel void maxpool(__global const float *x, __global float *y,
#ifdef WITH_INDICES
                      __global long *indices,
#endif
                      const int n, const int H, const int W, const int OH, const int OW,
                      const int kh, const int kw, const int sh, const int sw,
                      const int ph, const int pw, const int dh, const int dw)
{
    const int i = get_global_id(0);
    if (i >= n)
        return;
    const int ox = i % OW;
    const int oy = (i / OW) % OH;
    const int plane = i / (OW * OH);
    const int y0 = oy * sh - ph;
    const int x0 = ox * sw - pw;
    __global const float *src = x + (long)plane * H * W;

    // Start at the first in-bounds tap, as PyTorch does: it is the reported index even if
    // every value in the window is -inf.
    int ry = y0, rx = x0;
    while (ry < 0) ry += dh;
    while (rx < 0) rx += dw;
    long best_at = (long)ry * W + rx;
    float best = -INFINITY;

    for (int ky = 0; ky < kh; ++ky) {
        const int iy = y0 + ky * dh;
        if (iy < 0 || iy >= H)
            continue;
        for (int kx = 0; kx < kw; ++kx) {
            const int ix = x0 + kx * dw;
            if (ix < 0 || ix >= W)
                continue;
            const float v = src[iy * W + ix];
            if (v > best || isnan(v)) {  // a NaN always wins, as in PyTorch
                best = v;
                best_at = (long)iy * W + ix;
            }
        }
    }
    y[i] = best;
#ifdef WITH_INDICES
    indices[i] = best_at;
#endif
}
