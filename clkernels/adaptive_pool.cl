// Adaptive pooling over a plane view: x is (planes, H, W), y is (planes, OH, OW); 1-D pools
// arrive with H = OH = 1. One work-item per output element.
//
// Output (oy, ox) pools rows [floor(oy*H/OH), ceil((oy+1)*H/OH)) and the same for columns:
// PyTorch's rule, which handles output sizes that do not divide (or exceed) the input.

inline int window_start(int o, int in, int out) { return (o * in) / out; }
inline int window_end(int o, int in, int out) { return ((o + 1) * in + out - 1) / out; }

__kernel void adaptive_avgpool(__global const float *x, __global float *y, const int n,
                               const int H, const int W, const int OH, const int OW)
{
    const int i = get_global_id(0);
    if (i >= n)
        return;
    const int ox = i % OW, oy = (i / OW) % OH, plane = i / (OW * OH);
    const int y0 = window_start(oy, H, OH), y1 = window_end(oy, H, OH);
    const int x0 = window_start(ox, W, OW), x1 = window_end(ox, W, OW);
    __global const float *src = x + (long)plane * H * W;
    float sum = 0.0f;
    for (int iy = y0; iy < y1; ++iy)
        for (int ix = x0; ix < x1; ++ix)
            sum += src[iy * W + ix];
    y[i] = sum / (float)((y1 - y0) * (x1 - x0));
}

// Built with -DWITH_INDICES to also write the flat position (row * W + col) of each maximum.
__kernel void adaptive_maxpool(__global const float *x, __global float *y,
#ifdef WITH_INDICES
                               __global long *indices,
#endif
                               const int n, const int H, const int W, const int OH, const int OW)
{
    const int i = get_global_id(0);
    if (i >= n)
        return;
    const int ox = i % OW, oy = (i / OW) % OH, plane = i / (OW * OH);
    const int y0 = window_start(oy, H, OH), y1 = window_end(oy, H, OH);
    const int x0 = window_start(ox, W, OW), x1 = window_end(ox, W, OW);
    __global const float *src = x + (long)plane * H * W;
    float best = -INFINITY;
    long best_at = (long)y0 * W + x0;
    for (int iy = y0; iy < y1; ++iy)
        for (int ix = x0; ix < x1; ++ix) {
            const float v = src[iy * W + ix];
            if (v > best || isnan(v)) {
                best = v;
                best_at = (long)iy * W + ix;
            }
        }
    y[i] = best;
#ifdef WITH_INDICES
    indices[i] = best_at;
#endif
}
