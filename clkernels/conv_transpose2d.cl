// Transposed convolution on OpenCL, two launches (see layers/cpu/conv_transpose2d.py):
//   gemm  : cols[n][g] (Cout/G*KH*KW x H*W) = W[g]^T @ x[n][g] (Cin/G x H*W); the weight is
//           stored (Cin, Cout/G, KH, KW), i.e. K x M per group, hence TRANS_A;
//   col2im: every output pixel *gathers* the patch values that land on it. Gathering (rather
//           than each input pixel scattering its patch) means one writer per output value:
//           no atomics and no races.

#define TRANS_A 1
#include "gemm.h"

// One work-item per output row: global size (OH, N*COUT). Input pixel (iy, ix) with kernel
// offset (i, j) lands on output (iy*SH + i*DH - PH, ix*SW + j*DW - PW); here we solve that for
// iy and ix: only offsets where the division by the stride is exact contribute.
__kernel void col2im(__global const float *cols, __global const float *bias, const int has_bias,
                     __global float *y, const int COUT, const int H, const int W,
                     const int KH, const int KW, const int OH, const int OW,
                     const int SH, const int SW, const int PH, const int PW,
                     const int DH, const int DW, const int NCOUT)
{
    const int oy = get_global_id(0);
    const int nco = get_global_id(1);
    if (oy >= OH || nco >= NCOUT)
        return;
    __global float *out = y + (nco * OH + oy) * OW;
    const float b = has_bias ? bias[nco % COUT] : 0.0f;
    for (int ox = 0; ox < OW; ++ox)
        out[ox] = b;
    for (int i = 0; i < KH; ++i) {
        const int ty = oy + PH - i * DH;
        if (ty < 0 || ty % SH)
            continue;
        const int iy = ty / SH;
        if (iy >= H)
            continue;
        for (int j = 0; j < KW; ++j) {
            __global const float *plane = cols + ((nco * KH + i) * KW + j) * (H * W) + iy * W;
            for (int ox = 0; ox < OW; ++ox) {
                const int tx = ox + PW - j * DW;
                if (tx >= 0 && tx % SW == 0 && tx / SW < W)
                    out[ox] += plane[tx / SW];
            }
        }
    }
}
