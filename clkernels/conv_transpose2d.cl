// Transposed convolution on OpenCL, 1-D, 2-D and 3-D (conv_transpose1d.cl and
// conv_transpose3d.cl include this file; the host describes every input as a volume
// (N, C, D, H, W), a 2-D one with D = 1). Two launches (see layers/cpu/conv_transpose2d.py):
//   gemm  : cols[n][g] (Cout/G*KD*KH*KW x D*H*W) = W[g]^T @ x[n][g] (Cin/G x D*H*W); the weight
//           is stored (Cin, Cout/G, KD, KH, KW), i.e. K x M per group, hence TRANS_A;
//   col2im: every output value *gathers* the patch values that land on it. Gathering (rather
//           than each input pixel scattering its patch) means one writer per output value:
//           no atomics and no races.

#define TRANS_A 1
#include "gemm.h"

// One work-item per output value, in the output's order (global size N*COUT*OD*OH*OW, rounded
// up; one dimension, so no grid limit of a driver applies), so neighbouring work-items write
// neighbouring values: coalesced stores on a GPU. A work-item per output row wrote values a row
// apart: UNet's two ConvTranspose2d took 0.30 ms on an H100, and its kernels added up to 1.74 ms
// (1.52 this way). Input voxel (iz, iy, ix) with kernel offset (a, i, j) lands on output
// (iz*SD + a*DD - PD, iy*SH + i*DH - PH, ...); here we solve that for the input coordinates:
// only offsets where the division by the stride is exact contribute. The sum starts at the
// bias and adds the taps in (a, i, j) order.
__kernel void col2im(__global const float *cols, __global const float *bias, const int has_bias,
                     __global float *y, const int COUT, const int D, const int H, const int W,
                     const int KD, const int KH, const int KW,
                     const int OD, const int OH, const int OW,
                     const int SD, const int SH, const int SW,
                     const int PD, const int PH, const int PW,
                     const int DD, const int DH, const int DW, const int NCOUT)
{
    const long i = get_global_id(0);
    if (i >= (long)NCOUT * OD * OH * OW)
        return;
    const int ox = i % OW;
    const int ozy = (i / OW) % (OD * OH);     // oz*OH + oy
    const int nco = i / ((long)OW * OD * OH);
    const int oz = ozy / OH, oy = ozy % OH;
    float acc = has_bias ? bias[nco % COUT] : 0.0f;
    for (int a = 0; a < KD; ++a) {
        const int tz = oz + PD - a * DD;
        if (tz < 0 || tz % SD || tz / SD >= D)
            continue;
        const int iz = tz / SD;
        for (int i = 0; i < KH; ++i) {
            const int ty = oy + PH - i * DH;
            if (ty < 0 || ty % SH || ty / SH >= H)
                continue;
            const int iy = ty / SH;
            for (int j = 0; j < KW; ++j) {
                const int tx = ox + PW - j * DW;
                if (tx < 0 || tx % SW || tx / SW >= W)
                    continue;
                // the column of kernel tap (a, i, j), at input voxel (iz, iy, tx / SW)
                acc += cols[(((nco * KD + a) * KH + i) * KW + j) * (D * H * W)
                            + (iz * H + iy) * W + tx / SW];
            }
        }
    }
    y[i] = acc;
}
