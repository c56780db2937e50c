// Max pooling over a plane view: x is (planes, D, H, W), y is (planes, OD, OH, OW). 1-D and 2-D
// pools have D = OD = 1 (and 1-D pools H = OH = 1) with trivial windows on those axes, so one
// kernel body, `max_over_window`, serves MaxPool1d, 2d and 3d. It has two entry points:
// `maxpool` for 1-D and 2-D (the (planes, H, W) signature lesson 10 of the course teaches) and
// `maxpool3d`. A third kernel, `maxpool_runs`, is for CPU devices (see it, at the end).
//
// One work-item per output element: it walks the taps of its window (`dilation` apart) that lie
// inside the input, which is how padding "counts as -inf" without storing it.
// Built with -DWITH_INDICES to also write where each maximum came from, as a flat position in
// its plane: (z * H + y) * W + x, PyTorch's convention.

#include "index_math.h"   // imin(), imax(): PoCL's min() and max() of ints are calls

// The taps t = 0..k-1 of one window axis that land inside the input, 0 <= start + t*d < size,
// as the range [*lo, *hi). Computing it once per axis, instead of testing every tap, leaves the
// inner loop with no branch but the comparison: 2.3x faster on PoCL (ResNet-18's 3x3/2 pool,
// 3.7 ms to 1.6).
inline void taps_inside(const int start, const int k, const int d, const int size,
                        int *lo, int *hi)
{
    const int first = start < 0 ? (-start + d - 1) / d : 0;
    const int room = size - 1 - start;  // the largest offset t*d still inside
    const int end = room < 0 ? 0 : imin(k, room / d + 1);
    *lo = first;
    *hi = imax(end, first);
}

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
    int z_lo, z_hi, y_lo, y_hi, x_lo, x_hi;
    taps_inside(z0, kd, dd, D, &z_lo, &z_hi);
    taps_inside(y0, kh, dh, H, &y_lo, &y_hi);
    taps_inside(x0, kw, dw, W, &x_lo, &x_hi);

    // Start at the first in-bounds tap, as PyTorch does: it is the reported index even if
    // every value in the window is -inf.
    long best_at = ((long)(z0 + z_lo * dd) * H + (y0 + y_lo * dh)) * W + (x0 + x_lo * dw);
    float best = -INFINITY;
    for (int kz = z_lo; kz < z_hi; ++kz) {
        const int iz = z0 + kz * dd;
        for (int ky = y_lo; ky < y_hi; ++ky) {
            const int iy = y0 + ky * dh;
            __global const float *row = src + (iz * H + iy) * W;
            for (int kx = x_lo; kx < x_hi; ++kx) {
                const float v = row[x0 + kx * dw];
                // A NaN always wins, as in PyTorch (v != v: NaN; isnan() is a slow call in PoCL)
                if (v > best || v != v) {
                    best = v;
                    best_at = ((long)iz * H + iy) * W + x0 + kx * dw;
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

// ---------------------------------------------------------------------------------------------
// maxpool_runs: 1-D and 2-D pools without indices, on CPU devices (layers/opencl/maxpool.py
// picks it there). One work-item computes a run of RUN (8) neighbouring outputs of one row. The
// run's windows span SPAN consecutive inputs of a row; the kernel first takes the maximum of
// each of those columns over the window's rows (contiguous loads the compiler makes vector
// loads and vector maxima), then each output's maximum over its KW columns from that private
// row. Loading each tap as a vector of 8 inputs SW apart instead made 8 scalar loads per tap:
// ResNet-18's 3x3/2 pool took 0.32 ms that way on the 2-core machine, 0.25 this way (and 1.6
// with one scalar tap at a time, per output, as the kernel above does). SW, KW and DW are
// build options, so the column loops unroll; the host keeps SPAN small (RUNS_SPAN_MAX) and
// groups 64 work-items (PoCL's own choice of group: 10% slower).
// A run whose windows start left of the row (the padding) reads -inf there; one that
// reaches past the row's end, or a short last run, falls back to the scalar walk.
// Global size ceil(OW / RUN) * OH * planes, rounded up to the work-group.
#ifdef SW
// RUN outputs per work-item (the host's RUNS_WIDTH, 8): their windows span SPAN inputs
#define SPAN ((RUN - 1) * SW + (KW - 1) * DW + 1)

// The larger of `best` and `v`, a NaN always winning (as in PyTorch; `v != v`: NaN, isnan()
// is a slow call in PoCL)
inline float max_or_nan(const float best, const float v)
{
    return v > best || v != v ? v : best;
}

// The 8 outputs from dst[0] on of windows starting at column x0 of `rows` (y_lo <= ky < y_hi,
// row y0 + ky * dh). `left`: some columns lie left of the row; always inlined, so that it is a
// constant in each call and the test per column disappears where it is false (inlined at
// PoCL's discretion, the test stayed and the pool took 0.35 ms instead of 0.25).
__attribute__((always_inline)) inline void max_of_run(__global const float *src, __global float *dst, const int x0,
                       const int y0, const int y_lo, const int y_hi, const int dh,
                       const int W, const bool left)
{
    float col[SPAN];
    #pragma unroll
    for (int j = 0; j < SPAN; ++j)
        col[j] = -INFINITY;
    for (int ky = y_lo; ky < y_hi; ++ky) {
        __global const float *p = src + (y0 + ky * dh) * W + x0;
        #pragma unroll
        for (int j = 0; j < SPAN; ++j) {
            if (!left || x0 + j >= 0)
                col[j] = max_or_nan(col[j], p[j]);
        }
    }
    #pragma unroll
    for (int i = 0; i < RUN; ++i) {     // RUN stores the compiler merges into one
        float best = col[i * SW];
        #pragma unroll
        for (int kx = 1; kx < KW; ++kx)
            best = max_or_nan(best, col[i * SW + kx * DW]);
        dst[i] = best;
    }
}

__kernel void maxpool_runs(__global const float *x, __global float *y, const int planes,
                           const int H, const int W, const int OH, const int OW, const int kh,
                           const int sh, const int ph, const int pw, const int dh)
{
    const int runs = (OW + RUN - 1) / RUN;
    const int id = get_global_id(0);
    if (id >= planes * OH * runs)
        return;
    const int ox0 = id % runs * RUN, row = id / runs;    // row = plane * OH + oy
    const int oy = row % OH, plane = row / OH;
    const int y0 = oy * sh - ph;
    int y_lo, y_hi;
    taps_inside(y0, kh, dh, H, &y_lo, &y_hi);
    __global const float *src = x + (long)plane * H * W;
    __global float *dst = y + (long)row * OW;
    const int x0 = ox0 * SW - pw;
    if (x0 + SPAN <= W && ox0 + RUN <= OW) {
        if (x0 >= 0)
            max_of_run(src, dst + ox0, x0, y0, y_lo, y_hi, dh, W, false);
        else
            max_of_run(src, dst + ox0, x0, y0, y_lo, y_hi, dh, W, true);
        return;
    }
    // The scalar walk, with the row's taps found once for the run. (Calling max_over_window
    // per output instead made ResNet-18's pool 0.39 -> 0.50 ms on PoCL.)
    for (int ox = ox0; ox < imin(ox0 + RUN, OW); ++ox) {
        const int xs = ox * SW - pw;
        int x_lo, x_hi;
        taps_inside(xs, KW, DW, W, &x_lo, &x_hi);
        float best = -INFINITY;
        for (int ky = y_lo; ky < y_hi; ++ky) {
            __global const float *p = src + (y0 + ky * dh) * W;
            for (int kx = x_lo; kx < x_hi; ++kx)
                best = max_or_nan(best, p[xs + kx * DW]);
        }
        dst[ox] = best;
    }
}
#endif
