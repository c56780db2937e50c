// Average pooling over a plane view: x is (planes, D, H, W), y is (planes, OD, OH, OW); 1-D and
// 2-D pools arrive with the missing leading axes of size 1 and a trivial window (kernel 1,
// stride 1, no padding), so this one kernel serves AvgPool1d, 2d and 3d. One work-item per
// output element.
//
// The divisor follows PyTorch (see layers/cpu/avgpool.py): a window is first cut at the padded
// edge (that count is used when count_include_pad != 0), then at the real input (the count
// otherwise); divisor_override > 0 replaces both.

#include "index_math.h"   // imin(), imax(): PoCL's min() and max() of ints are calls

__kernel void avgpool(__global const float *x, __global float *y, const int n,
                      const int D, const int H, const int W,
                      const int OD, const int OH, const int OW,
                      const int kd, const int kh, const int kw,
                      const int sd, const int sh, const int sw,
                      const int pd, const int ph, const int pw,
                      const int count_include_pad, const int divisor_override)
{
    const int i = get_global_id(0);
    if (i >= n)
        return;
    const int ox = i % OW;
    const int oy = (i / OW) % OH;
    const int oz = (i / (OW * OH)) % OD;
    const int plane = i / (OW * OH * OD);

    int z0 = oz * sd - pd, y0 = oy * sh - ph, x0 = ox * sw - pw;
    int z1 = imin(z0 + kd, D + pd), y1 = imin(y0 + kh, H + ph), x1 = imin(x0 + kw, W + pw);
    const int padded_taps = (z1 - z0) * (y1 - y0) * (x1 - x0);
    z0 = imax(z0, 0);
    y0 = imax(y0, 0);
    x0 = imax(x0, 0);
    z1 = imin(z1, D);
    y1 = imin(y1, H);
    x1 = imin(x1, W);

    __global const float *src = x + (long)plane * D * H * W;
    float sum = 0.0f;
    for (int iz = z0; iz < z1; ++iz)
        for (int iy = y0; iy < y1; ++iy)
            for (int ix = x0; ix < x1; ++ix)
                sum += src[(iz * H + iy) * W + ix];

    int divisor = divisor_override;
    if (divisor == 0)
        divisor = count_include_pad ? padded_taps : (z1 - z0) * (y1 - y0) * (x1 - x0);
    // An empty window (impossible with PyTorch's size rules, but never divide by zero).
    y[i] = divisor != 0 ? sum / (float)divisor : 0.0f;
}
