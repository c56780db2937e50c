// Adaptive pooling over a plane view: x is (planes, D, H, W), y is (planes, OD, OH, OW); 1-D and
// 2-D pools arrive with the missing leading axes of size 1. One work-item per output element.
//
// Output (oz, oy, ox) pools depths [floor(oz*D/OD), ceil((oz+1)*D/OD)) and the same for rows and
// columns: PyTorch's rule, which handles output sizes that do not divide (or exceed) the input.

inline int window_start(int o, int in, int out) { return (o * in) / out; }
inline int window_end(int o, int in, int out) { return ((o + 1) * in + out - 1) / out; }

// The window of output i: its plane's first element, and [start, end) along each axis.
#define ADAPTIVE_WINDOW                                                                        \
    const int ox = i % OW, oy = (i / OW) % OH, oz = (i / (OW * OH)) % OD;                      \
    const int plane = i / (OW * OH * OD);                                                      \
    const int z0 = window_start(oz, D, OD), z1 = window_end(oz, D, OD);                        \
    const int y0 = window_start(oy, H, OH), y1 = window_end(oy, H, OH);                        \
    const int x0 = window_start(ox, W, OW), x1 = window_end(ox, W, OW);                        \
    __global const float *src = x + (long)plane * D * H * W;

__kernel void adaptive_avgpool(__global const float *x, __global float *y, const int n,
                               const int D, const int H, const int W,
                               const int OD, const int OH, const int OW)
{
    const int i = get_global_id(0);
    if (i >= n)
        return;
    ADAPTIVE_WINDOW
    float sum = 0.0f;
    for (int iz = z0; iz < z1; ++iz)
        for (int iy = y0; iy < y1; ++iy)
            for (int ix = x0; ix < x1; ++ix)
                sum += src[(iz * H + iy) * W + ix];
    y[i] = sum / (float)((z1 - z0) * (y1 - y0) * (x1 - x0));
}

// Built with -DWITH_INDICES to also write the flat position ((z * H + y) * W + x) of each
// maximum in its plane.
__kernel void adaptive_maxpool(__global const float *x, __global float *y,
#ifdef WITH_INDICES
                               __global long *indices,
#endif
                               const int n, const int D, const int H, const int W,
                               const int OD, const int OH, const int OW)
{
    const int i = get_global_id(0);
    if (i >= n)
        return;
    ADAPTIVE_WINDOW
    float best = -INFINITY;
    long best_at = ((long)z0 * H + y0) * W + x0;
    for (int iz = z0; iz < z1; ++iz)
        for (int iy = y0; iy < y1; ++iy)
            for (int ix = x0; ix < x1; ++ix) {
                const float v = src[(iz * H + iy) * W + ix];
                if (v > best || isnan(v)) {
                    best = v;
                    best_at = ((long)iz * H + iy) * W + ix;
                }
            }
    y[i] = best;
#ifdef WITH_INDICES
    indices[i] = best_at;
#endif
}
