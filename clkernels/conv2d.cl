// Convolution on OpenCL (conv1d.cl includes this file: a 1-D conv is a 2-D one with H = 1).
//
// General case, two launches:
//   im2col: cols[n][c][i][j][oy*OW + ox] = xpad[n][c][oy*SH + i*DH][ox*SW + j*DW]
//   gemm  : y[n][g] (Cout/G x P) = W[g] (Cout/G x Cin/G*KH*KW) @ cols[n][g]   (gemm.h)
// A 1x1 kernel with stride 1 and no padding skips im2col (x already is the column matrix).
// One input channel per group (depthwise): the `depthwise` kernel below, one work-item per
// output row, because a GEMM with K = KH*KW has nothing to tile.
//
// Padding is never materialised. The host uploads, per spatial axis, a small table `src_y` /
// `src_x`: for every coordinate of the *padded* axis, the input coordinate it copies, or -1 for
// a zero (layers/common/conv_geometry.py). That one lookup covers all four padding modes (zeros,
// reflect, replicate, circular) with the same kernel code. Output pixel oy with kernel row i
// reads padded row oy*SH + i*DH, which is always inside the table.

#include "gemm.h"

// One work-item per row of the column matrix *per output row*: global size (OH, N*C*KH*KW).
// It writes OW consecutive values, which keeps the index arithmetic (divisions included) out
// of the inner loop: 7x faster under PoCL than one work-item per value.
__kernel void im2col(__global const float *x, __global float *cols,
                     __global const int *src_y, __global const int *src_x,
                     const int H, const int W, const int KH, const int KW,
                     const int OH, const int OW, const int SH, const int SW,
                     const int DH, const int DW, const int NC)
{
    const int oy = get_global_id(0);
    const int t = get_global_id(1);            // (n*C + c) * KH*KW + i*KW + j
    if (oy >= OH || t >= NC * KH * KW)
        return;
    const int r = t % (KH * KW), nc = t / (KH * KW);
    const int i = r / KW, j = r % KW;
    const int iy = src_y[oy * SH + i * DH];
    __global float *out = cols + (t * OH + oy) * OW;
    __global const float *row = x + (nc * H + max(iy, 0)) * W;
    for (int ox = 0; ox < OW; ++ox) {
        const int ix = src_x[ox * SW + j * DW];
        out[ox] = (iy >= 0 && ix >= 0) ? row[ix] : 0.0f;
    }
}

// Depthwise (and channel-multiplier) convolution: output channel co reads input channel
// co / MULT only. One work-item per output row: global size (OH, N*COUT); weight
// (COUT, 1, KH, KW).
__kernel void depthwise(__global const float *x, __global const float *w,
                        __global const float *bias, const int has_bias, __global float *y,
                        __global const int *src_y, __global const int *src_x,
                        const int C, const int H, const int W, const int COUT, const int MULT,
                        const int KH, const int KW, const int OH, const int OW,
                        const int SH, const int SW, const int DH, const int DW, const int NCOUT)
{
    const int oy = get_global_id(0);
    const int nco = get_global_id(1);
    if (oy >= OH || nco >= NCOUT)
        return;
    const int co = nco % COUT, n = nco / COUT;
    __global const float *plane = x + (n * C + co / MULT) * H * W;
    __global const float *wk = w + co * KH * KW;
    __global float *out = y + (nco * OH + oy) * OW;
    const float b = has_bias ? bias[co] : 0.0f;
    for (int ox = 0; ox < OW; ++ox)
        out[ox] = b;
    for (int i = 0; i < KH; ++i) {
        const int iy = src_y[oy * SH + i * DH];
        if (iy < 0)
            continue;
        __global const float *row = plane + iy * W;
        for (int j = 0; j < KW; ++j) {
            const float wv = wk[i * KW + j];
            for (int ox = 0; ox < OW; ++ox) {
                const int ix = src_x[ox * SW + j * DW];
                if (ix >= 0)
                    out[ox] += wv * row[ix];
            }
        }
    }
}
