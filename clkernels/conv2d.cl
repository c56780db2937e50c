// Convolution on OpenCL, 1-D, 2-D and 3-D (conv1d.cl and conv3d.cl include this file). Every
// call is a 3-D one: the host describes a 2-D input (N, C, H, W) as (N, C, 1, H, W) with a
// kernel of depth 1, and a 1-D one as (N, C, 1, 1, L); a unit axis costs nothing but a table
// lookup per output row.
//
// The host's selector (layers/opencl_conv/selector.py) chooses among the algorithms of
// layers/opencl_conv/im2col_gemm.py (those that use this file) and others. General case
// (`im2col_gemm`), two launches:
//   im2col: cols[n][c][a][i][j][(oz*OH + oy)*OW + ox]
//               = xpad[n][c][oz*SD + a*DD][oy*SH + i*DH][ox*SW + j*DW]
//   gemm  : y[n][g] (Cout/G x P) = W[g] (Cout/G x Cin/G*KD*KH*KW) @ cols[n][g]   (gemm.h)
// A 1x1(x1) kernel with stride 1 and no padding skips im2col (`gemm_1x1`: x already is the
// column matrix). One input channel per group (`depthwise_direct`): the `depthwise` kernel
// below, one work-item per output row, because a GEMM with K = KD*KH*KW has nothing to tile.
// Both GEMM and depthwise store through kuiper_epilogue (epilogue.h, included by gemm.h).
//
// Padding is never materialised. The host uploads, per spatial axis, a small table `src_z` /
// `src_y` / `src_x`: for every coordinate of the *padded* axis, the input coordinate it copies,
// or -1 for a zero (layers/common/conv_geometry.py). That one lookup covers all four padding
// modes (zeros, reflect, replicate, circular) with the same kernel code. Output row oy with
// kernel row i reads padded row oy*SH + i*DH, which is always inside the table.

#include "gemm.h"
#include "index_math.h"   // imin(), imax(): PoCL's min() and max() of ints are calls

// The arguments of im2col and im2col_packed, in this order (conv_im2col_gemm.py binds them).
#define IM2COL_ARGS                                                                           \
    __global const float *x, __global float *cols, __global const int *src_z,                 \
    __global const int *src_y, __global const int *src_x, const int D, const int H,          \
    const int W, const int KD, const int KH, const int KW, const int OD, const int OH,         \
    const int OW, const int SD, const int SH, const int SW, const int DD, const int DH,       \
    const int DW, const int NC

// One work-item per row of the column matrix *per output row*: global size
// (OD*OH, N*C*KD*KH*KW). It writes OW consecutive values, which keeps the index arithmetic
// (divisions included) out of the inner loop: 7x faster under PoCL than one work-item per value.
__kernel void im2col(IM2COL_ARGS)
{
    const int ozy = get_global_id(0);          // oz*OH + oy
    const int t = get_global_id(1);            // (n*C + c) * KD*KH*KW + (a*KH + i)*KW + j
    const int taps = KD * KH * KW;
    if (ozy >= OD * OH || t >= NC * taps)
        return;
    const int oz = ozy / OH, oy = ozy % OH;
    const int r = t % taps, nc = t / taps;
    const int a = r / (KH * KW), i = (r / KW) % KH, j = r % KW;
    const int iz = src_z[oz * SD + a * DD];
    const int iy = src_y[oy * SH + i * DH];
    __global const float *row = x + ((nc * D + imax(iz, 0)) * H + imax(iy, 0)) * W;
    const bool inside = iz >= 0 && iy >= 0;
    __global float *out = cols + (t * OD * OH + ozy) * OW;
    for (int ox = 0; ox < OW; ++ox) {
        const int ix = src_x[ox * SW + j * DW];
        out[ox] = (inside && ix >= 0) ? row[ix] : 0.0f;
    }
}

#ifdef BLOCK_N
// The same column matrix, packed for gemm_blocked (PACKED_B; gemm_blocked.h says why): per
// image and group z, strips of BLOCK_N pixels, each strip KZ rows (KZ = Cin/G * taps) of
// BLOCK_N consecutive values; the last strip's pixels past P are zeros. Pixel p of row k is at
// strip p / BLOCK_N, lane p % BLOCK_N. One work-item per (row t = z*KZ + k, output row), as
// above but with the dimensions swapped: global size (N*C*KD*KH*KW, OD*OH), so neighbouring
// work-items write neighbouring runs of a strip (in im2col's order they wrote runs KZ*BLOCK_N
// values apart: 6.3 ms instead of 3.2 for YOLOv5s's first stride-2 layer under PoCL). A
// work-item writes its output row one strip's run at a time (3.05 ms; 4.2 with a division per
// value).
__kernel void im2col_packed(IM2COL_ARGS, const int KZ)
{
    const int t = get_global_id(0), ozy = get_global_id(1);
    const int taps = KD * KH * KW, P = OD * OH * OW;
    if (t >= NC * taps || ozy >= OD * OH)
        return;
    const int oz = ozy / OH, oy = ozy % OH;
    const int r = t % taps, nc = t / taps;
    const int a = r / (KH * KW), i = (r / KW) % KH, j = r % KW;
    const int z = t / KZ, k = t % KZ, strips = (P + BLOCK_N - 1) / BLOCK_N;
    const int iz = src_z[oz * SD + a * DD];
    const int iy = src_y[oy * SH + i * DH];
    __global const float *row = x + ((nc * D + imax(iz, 0)) * H + imax(iy, 0)) * W;
    const bool inside = iz >= 0 && iy >= 0;
    __global float *out = cols + (z * strips * KZ + k) * BLOCK_N;   // strip 0, row k
    const int strip_step = KZ * BLOCK_N;
    // The output row's pixels p = ozy*OW + ox, one strip's run at a time
    for (int ox = 0, p = ozy * OW; ox < OW;) {
        const int lane = p % BLOCK_N, count = imin(BLOCK_N - lane, OW - ox);
        __global float *dst = out + p / BLOCK_N * strip_step + lane;
        __global const int *tx = src_x + ox * SW + j * DW;
        for (int l = 0; l < count; ++l) {
            const int ix = tx[l * SW];
            dst[l] = (inside && ix >= 0) ? row[ix] : 0.0f;
        }
        ox += count;
        p += count;
    }
    if (ozy == OD * OH - 1)      // the last strip's pixels past P: zeros, computed and dropped
        for (int p = P; p < strips * BLOCK_N; ++p)
            out[p / BLOCK_N * strip_step + p % BLOCK_N] = 0.0f;
}
#endif

// Depthwise (and channel-multiplier) convolution: output channel co reads input channel
// co / MULT only. One work-item per output row: global size (OD*OH, N*COUT); weight
// (COUT, 1, KD, KH, KW).
__kernel void depthwise(__global const float *x, __global const float *w,
                        __global const float *bias, const int has_bias, __global float *y,
                        __global const int *src_z, __global const int *src_y,
                        __global const int *src_x,
                        const int C, const int D, const int H, const int W,
                        const int COUT, const int MULT,
                        const int KD, const int KH, const int KW,
                        const int OD, const int OH, const int OW,
                        const int SD, const int SH, const int SW,
                        const int DD, const int DH, const int DW, const int NCOUT,
                        __global const float *residual)
{
    const int ozy = get_global_id(0);
    const int nco = get_global_id(1);
    if (ozy >= OD * OH || nco >= NCOUT)
        return;
    const int oz = ozy / OH, oy = ozy % OH;
    const int co = nco % COUT, n = nco / COUT;
    __global const float *volume = x + (n * C + co / MULT) * (D * H * W);
    __global const float *wk = w + co * KD * KH * KW;
    __global float *out = y + (nco * OD * OH + ozy) * OW;
    const float b = has_bias ? bias[co] : 0.0f;
    for (int ox = 0; ox < OW; ++ox)
        out[ox] = b;
    for (int a = 0; a < KD; ++a) {
        const int iz = src_z[oz * SD + a * DD];
        if (iz < 0)
            continue;
        for (int i = 0; i < KH; ++i) {
            const int iy = src_y[oy * SH + i * DH];
            if (iy < 0)
                continue;
            __global const float *row = volume + (iz * H + iy) * W;
            for (int j = 0; j < KW; ++j) {
                const float wv = wk[(a * KH + i) * KW + j];
                for (int ox = 0; ox < OW; ++ox) {
                    const int ix = src_x[ox * SW + j * DW];
                    if (ix >= 0)
                        out[ox] += wv * row[ix];
                }
            }
        }
    }
    // the fused epilogue (epilogue.h), once the sums are complete
    const int first = (nco * OD * OH + ozy) * OW;
    for (int ox = 0; ox < OW; ++ox)
        out[ox] = kuiper_epilogue(out[ox], residual, first + ox);
}
