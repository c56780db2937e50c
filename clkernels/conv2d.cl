// Convolution on OpenCL (conv1d.cl includes this file: a 1-D conv is a 2-D one with H = 1).
//
// General case, two launches:
//   im2col: cols[n][c][i][j][oy*OW + ox] = xpad[n][c][oy*SH + i*DH][ox*SW + j*DW]
//   gemm  : y[n][g] (Cout/G x P) = W[g] (Cout/G x Cin/G*KH*KW) @ cols[n][g]   (gemm.h)
// A 1x1 kernel with stride 1 and no padding skips im2col (x already is the column matrix).
// One input channel per group (depthwise): the `depthwise` kernel below, one work-item per
// output value, because a GEMM with K = KH*KW has nothing to tile.
//
// Padding is never materialised. The host uploads, per spatial axis, a small table `src_y` /
// `src_x`: for every coordinate of the *padded* axis, the input coordinate it copies, or -1 for
// a zero (layers/im2col.source_indices). That one lookup covers all four padding modes (zeros,
// reflect, replicate, circular) with the same kernel code. Output pixel oy with kernel row i
// reads padded row oy*SH + i*DH, which is always inside the table.

#include "gemm.h"

// Global size (P, KH*KW, N*C), P = OH*OW: one work-item per element of the column matrix.
__kernel void im2col(__global const float *x, __global float *cols,
                     __global const int *src_y, __global const int *src_x,
                     const int H, const int W, const int KH, const int KW,
                     const int OH, const int OW, const int SH, const int SW,
                     const int DH, const int DW, const int NC)
{
    const int p = get_global_id(0);
    const int r = get_global_id(1);
    const int nc = get_global_id(2);
    if (p >= OH * OW || r >= KH * KW || nc >= NC)
        return;
    const int oy = p / OW, ox = p % OW;
    const int i = r / KW, j = r % KW;
    const int iy = src_y[oy * SH + i * DH];
    const int ix = src_x[ox * SW + j * DW];
    float v = 0.0f;
    if (iy >= 0 && ix >= 0)
        v = x[(nc * H + iy) * W + ix];
    cols[(nc * KH * KW + r) * (OH * OW) + p] = v;
}

// Depthwise (and channel-multiplier) convolution: output channel co reads input channel
// co / MULT only. Global size (P, N*COUT); weight (COUT, 1, KH, KW).
__kernel void depthwise(__global const float *x, __global const float *w,
                        __global const float *bias, const int has_bias, __global float *y,
                        __global const int *src_y, __global const int *src_x,
                        const int C, const int H, const int W, const int COUT, const int MULT,
                        const int KH, const int KW, const int OH, const int OW,
                        const int SH, const int SW, const int DH, const int DW, const int NCOUT)
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
        const int iy = src_y[oy * SH + i * DH];
        if (iy < 0)
            continue;
        for (int j = 0; j < KW; ++j) {
            const int ix = src_x[ox * SW + j * DW];
            if (ix >= 0)
                acc = mad(wk[i * KW + j], plane[iy * W + ix], acc);
        }
    }
    y[nco * OH * OW + p] = acc;
}
