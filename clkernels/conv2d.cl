// Convolution on OpenCL (conv1d.cl includes this file: a 1-D conv is a 2-D one with H = 1).
//
// General case, two launches:
//   im2col: cols[n][c][i][j][oy*OW + ox] = padded x[n][c][oy*SH - PH + i*DH][ox*SW - PW + j*DW]
//   gemm  : y[n][g] (Cout/G x P) = W[g] (Cout/G x Cin/G*KH*KW) @ cols[n][g]   (gemm.h)
// A 1x1 kernel with stride 1 and no padding skips im2col (x already is the column matrix).
// One input channel per group (depthwise): the `depthwise` kernel below, one work-item per
// output value, because a GEMM with K = KH*KW has nothing to tile.
//
// PAD_MODE (a build option) says what lies outside the input: 0 zeros, 1 reflect, 2 replicate,
// 3 circular. Layers check on the host that the padding is small enough for one reflection
// (pad < size) or one wrap (pad <= size), as PyTorch requires.

#include "gemm.h"

#ifndef PAD_MODE
#define PAD_MODE 0
#endif

// The input coordinate that padded coordinate i (in -pad .. n-1+pad) reads, or -1 for a zero.
inline int source_index(int i, const int n)
{
#if PAD_MODE == 0
    return (i >= 0 && i < n) ? i : -1;
#elif PAD_MODE == 1
    if (i < 0)
        i = -i;                 // reflect about 0, without repeating the edge
    if (i >= n)
        i = 2 * (n - 1) - i;    // reflect about n-1
    return i;
#elif PAD_MODE == 2
    return clamp(i, 0, n - 1);
#else
    return i < 0 ? i + n : (i >= n ? i - n : i);
#endif
}

// Global size (P, KH*KW, N*C), P = OH*OW: one work-item per element of the column matrix.
__kernel void im2col(__global const float *x, __global float *cols,
                     const int H, const int W, const int KH, const int KW,
                     const int OH, const int OW, const int SH, const int SW,
                     const int PH, const int PW, const int DH, const int DW, const int NC)
{
    const int p = get_global_id(0);
    const int r = get_global_id(1);
    const int nc = get_global_id(2);
    if (p >= OH * OW || r >= KH * KW || nc >= NC)
        return;
    const int oy = p / OW, ox = p % OW;
    const int i = r / KW, j = r % KW;
    const int iy = source_index(oy * SH - PH + i * DH, H);
    const int ix = source_index(ox * SW - PW + j * DW, W);
    float v = 0.0f;
    if (iy >= 0 && ix >= 0)
        v = x[(nc * H + iy) * W + ix];
    cols[(nc * KH * KW + r) * (OH * OW) + p] = v;
}

// Depthwise (and channel-multiplier) convolution: output channel co reads input channel
// co / MULT only. Global size (P, N*COUT); weight (COUT, 1, KH, KW).
__kernel void depthwise(__global const float *x, __global const float *w,
                        __global const float *bias, const int has_bias, __global float *y,
                        const int C, const int H, const int W, const int COUT, const int MULT,
                        const int KH, const int KW, const int OH, const int OW,
                        const int SH, const int SW, const int PH, const int PW,
                        const int DH, const int DW, const int NCOUT)
{
    const int p = get_global_id(0);
    const int nco = get_global_id(1);
    if (p >= OH * OW || nco >= NCOUT)
        return;
    const int co = nco % COUT, n = nco / COUT;
    const int oy = p / OW, ox = p % OW;
    __global const float *plane = x + (n * C + co / MULT) * H * W;
    __global const float *wk = w + co * KH * KW;
    float acc = has_bias ? bias[co] : 0.0f;
    for (int i = 0; i < KH; ++i) {
        const int iy = source_index(oy * SH - PH + i * DH, H);
        if (iy < 0)
            continue;
        for (int j = 0; j < KW; ++j) {
            const int ix = source_index(ox * SW - PW + j * DW, W);
            if (ix >= 0)
                acc = mad(wk[i * KW + j], plane[iy * W + ix], acc);
        }
    }
    y[nco * OH * OW + p] = acc;
}
