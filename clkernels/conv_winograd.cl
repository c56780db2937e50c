// conv_winograd.cl: Winograd convolution F(4x4,3x3) and F(2x2,3x3), for 3x3 stride-1 convolutions.
//
// Good for: 3x3, stride 1, dilation 1, groups 1, zero padding (ResNet's and VGG's body, YOLO's
// bottlenecks) with enough channels that the matrix products dominate the transforms. F(4x4)
// does 36 multiplies where direct convolution does 144 per 4x4 outputs and input channel
// (4x fewer), F(2x2) 16 where direct does 36 (2.25x fewer). The kernel selector
// (layers/opencl_conv/selector.py) picks it from the cost model of
// layers/opencl_conv/winograd.py, which also derives the matrices written out below
// and explains why the result is less accurate than the direct sum.
//
// Four kernels, launched in this order (ALPHA = TILE_OUT + 2 = 6 or 4, P = ALPHA^2 positions):
//   winograd_filter  (F.conv2d only) U[p][c][o] = (G g G^T)[p]; else U is made on the host
//   winograd_input   V[p][c][tile]    = (B^T d B)[p], d the ALPHA x ALPHA input tile
//   winograd_gemm    M[p][tile][o]    = (V[p]^T @ U[p])   ((tiles x Cin) @ (Cin x Cout))
//   winograd_output  y[n][o][4x4]     = A^T M A + bias, then the fused epilogue (epilogue.h)
// Tiles are numbered across the whole batch: tile = (n * tiles_h + th) * tiles_w + tw. Output
// tile (th, tw) covers rows th*TILE_OUT .. +TILE_OUT-1 and reads input rows from
// th*TILE_OUT - pad_top: ALPHA of them, overlapping the neighbour's by 2 (the kernel's r - 1).
//
// Build options: -DTILE_OUT=4|2, for winograd_gemm also -DBM -DBN (register block), for
// winograd_output those of epilogue.h.
//
// On GPUs the products may instead run through gemm.h's tiled GEMM (-DTILED_PRODUCTS=1 and a
// gemm_tiled parameter set): V[p] is its A stored K x M (TRANS_A: Cin x tiles), U[p] its B
// (Cin x Cout), and the 36 positions are its batch (A's "groups"). A local-memory tile shares
// each loaded value among a whole work-group, where winograd_gemm's register blocks share it
// among one work-item's outputs only; on an H100 that tiled GEMM reaches ~60% of peak.

#include "epilogue.h"

#ifdef TILED_PRODUCTS   // the products on gemm.h's GPU GEMM, V[p] read as A stored K x M
#define TRANS_A 1
#include "gemm.h"
#endif

#define ALPHA (TILE_OUT + 2)
#define POSITIONS (ALPHA * ALPHA)

// --- the 1-D transforms (points 0, 1, -1, 2, -2 and infinity for F(4,3); 0, 1, -1, inf for
// F(2,3)): written out so that the zeros and ones of B^T and A^T cost nothing. Each 2-D
// transform applies them to the columns, then to the rows. --------------------------------

#if TILE_OUT == 4
// o = B^T d, B^T = [ 4  0 -5  0  1  0 ]
//                  [ 0 -4 -4  1  1  0 ]
//                  [ 0  4 -4 -1  1  0 ]
//                  [ 0 -2 -1  2  1  0 ]
//                  [ 0  2 -1 -2  1  0 ]
//                  [ 0  4  0 -5  0  1 ]
#define INPUT_1D(o, d, s) do {                                                 \
        const float d0 = d[0 * s], d1 = d[1 * s], d2 = d[2 * s];               \
        const float d3 = d[3 * s], d4 = d[4 * s], d5 = d[5 * s];               \
        o[0 * s] = 4.0f * d0 - 5.0f * d2 + d4;                                 \
        o[1 * s] = -4.0f * (d1 + d2) + d3 + d4;                                \
        o[2 * s] = 4.0f * (d1 - d2) - d3 + d4;                                 \
        o[3 * s] = 2.0f * (d3 - d1) - d2 + d4;                                 \
        o[4 * s] = 2.0f * (d1 - d3) - d2 + d4;                                 \
        o[5 * s] = 4.0f * d1 - 5.0f * d3 + d5;                                 \
    } while (0)
// o = A^T m, A^T = [ 1  1  1  1  1  0 ]
//                  [ 0  1 -1  2 -2  0 ]
//                  [ 0  1  1  4  4  0 ]
//                  [ 0  1 -1  8 -8  1 ]
#define OUTPUT_1D(o, m, s) do {                                                \
        const float sum12 = m[1 * s] + m[2 * s], dif12 = m[1 * s] - m[2 * s];  \
        const float sum34 = m[3 * s] + m[4 * s], dif34 = m[3 * s] - m[4 * s];  \
        o[0 * s] = m[0] + sum12 + sum34;                                       \
        o[1 * s] = dif12 + 2.0f * dif34;                                       \
        o[2 * s] = sum12 + 4.0f * sum34;                                       \
        o[3 * s] = dif12 + 8.0f * dif34 + m[5 * s];                            \
    } while (0)
#elif TILE_OUT == 2
// B^T = [ -1  0  1  0 ]      A^T = [ 1  1  1  0 ]
//       [  0  1  1  0 ]            [ 0  1 -1  1 ]
//       [  0 -1  1  0 ]
//       [  0 -1  0  1 ]
#define INPUT_1D(o, d, s) do {                                                 \
        const float d0 = d[0 * s], d1 = d[1 * s], d2 = d[2 * s], d3 = d[3 * s]; \
        o[0 * s] = d2 - d0;                                                    \
        o[1 * s] = d1 + d2;                                                    \
        o[2 * s] = d2 - d1;                                                    \
        o[3 * s] = d3 - d1;                                                    \
    } while (0)
#define OUTPUT_1D(o, m, s) do {                                                \
        o[0 * s] = m[0] + m[1 * s] + m[2 * s];                                 \
        o[1 * s] = m[1 * s] - m[2 * s] + m[3 * s];                             \
    } while (0)
#else
#error "TILE_OUT must be 4 or 2"
#endif

// --- filter transform on the device (only when the weight is an operator input) ------------
// One work-item per (output channel o, input channel c); g is G (ALPHA x 3) as float32.
__kernel void winograd_filter(__global const float *w, __global const float *g,
                              __global float *u, const int C, const int COUT,
                              const int COUT_PAD)
{
    const int o = get_global_id(0), c = get_global_id(1);
    if (o >= COUT_PAD || c >= C)
        return;
    float taps[9];
    for (int t = 0; t < 9; ++t)     // padded output channels get zero filters
        taps[t] = o < COUT ? w[(o * C + c) * 9 + t] : 0.0f;
    for (int i = 0; i < ALPHA; ++i) {
        float gt[3];                // (G g)[i][:]
        for (int l = 0; l < 3; ++l)
            gt[l] = g[i * 3] * taps[l] + g[i * 3 + 1] * taps[3 + l] + g[i * 3 + 2] * taps[6 + l];
        for (int j = 0; j < ALPHA; ++j)
            u[((i * ALPHA + j) * C + c) * COUT_PAD + o] =
                gt[0] * g[j * 3] + gt[1] * g[j * 3 + 1] + gt[2] * g[j * 3 + 2];
    }
}

// --- input transform: one work-item per (input channel, tile), the tile running fastest --------
// A 1-D range of C * NT work-items (rounded up to the work-group): neighbouring work-items take
// neighbouring tiles, so their 36 stores land side by side, and a layer with few tiles (7x7
// images: 4) still fills whole work-groups. NT = N * tiles_h * tiles_w.
__kernel void winograd_input(__global const float *x, __global float *v,
                             const int C, const int H, const int W,
                             const int pad_top, const int pad_left,
                             const int tiles_h, const int tiles_w, const int NT,
                             const int NT_PAD)
{
    const int gid = get_global_id(0);
    if (gid >= C * NT)
        return;
    const int c = gid / NT, tile = gid % NT;
    const int tw = tile % tiles_w, th = (tile / tiles_w) % tiles_h;
    const int n = tile / (tiles_w * tiles_h);
    const int y0 = th * TILE_OUT - pad_top, x0 = tw * TILE_OUT - pad_left;
    __global const float *plane = x + (n * C + c) * H * W;

    float d[POSITIONS];             // the input tile, zeros outside the image (the padding)
    #pragma unroll
    for (int i = 0; i < ALPHA; ++i) {
        const int iy = y0 + i;
        const bool row_inside = iy >= 0 && iy < H;
        #pragma unroll
        for (int j = 0; j < ALPHA; ++j) {
            const int ix = x0 + j;
            d[i * ALPHA + j] = row_inside && ix >= 0 && ix < W ? plane[iy * W + ix] : 0.0f;
        }
    }
    float t[POSITIONS];
    #pragma unroll
    for (int j = 0; j < ALPHA; ++j)          // B^T d: every column
        INPUT_1D((t + j), (d + j), ALPHA);
    #pragma unroll
    for (int i = 0; i < ALPHA; ++i)          // (B^T d) B: every row
        INPUT_1D((d + i * ALPHA), (t + i * ALPHA), 1);

    __global float *out = v + c * NT_PAD + tile;
    const int position_stride = C * NT_PAD;
    #pragma unroll
    for (int p = 0; p < POSITIONS; ++p)
        out[p * position_stride] = d[p];
}

// --- the 36 (or 16) products: M[p] (NT_PAD x COUT_PAD) = V[p]^T @ U[p] ----------------------
// Stored: U[p] Cin x COUT_PAD, V[p] Cin x NT_PAD, M[p] NT_PAD x COUT_PAD (output channels
// contiguous). A work-item computes a block of BM output channels x BN tiles in registers
// ("register blocking", like gemm_blocked of gemm.h, but vectorised along the output channels:
// ResNet's stage 4 has 512 of them and only 4 tiles). The BM channels are NV vectors of VW
// floats (BM = 32: two float16). Per input channel it loads NV vectors of U and BN scalars of
// V, and does NV x BN vector multiply-adds: two vectors per tile value loaded make the loads
// cheap next to the arithmetic (20-30% faster than one under PoCL). The host pads both sizes
// to whole blocks, so the vector loads and stores are aligned and need no edge tests (the
// padded tiles hold garbage that no output reads: the columns of a product are independent).
// Global size (COUT_PAD / BM, NT_PAD / BN, POSITIONS), possibly rounded up to the work-group.
#if defined(BM) && defined(BN)
#if BM == 32
typedef float16 floatm;
#define VW 16
#elif BM == 16
typedef float16 floatm;
#define VW 16
#elif BM == 8
typedef float8 floatm;
#define VW 8
#elif BM == 4
typedef float4 floatm;
#define VW 4
#else
#error "BM must be 4, 8, 16 or 32"
#endif
#define NV (BM / VW)

__kernel void winograd_gemm(__global const float *u, __global const float *v,
                            __global float *m, const int COUT_PAD, const int C,
                            const int NT_PAD)
{
    const int o0 = get_global_id(0) * BM;
    const int n0 = get_global_id(1) * BN;
    const int p = get_global_id(2);
    if (o0 >= COUT_PAD || n0 >= NT_PAD)
        return;
    __global const float *a = u + p * C * COUT_PAD + o0;
    __global const float *b = v + p * C * NT_PAD + n0;
    floatm acc[NV][BN];
#pragma unroll
    for (int i = 0; i < NV; ++i)
#pragma unroll
        for (int j = 0; j < BN; ++j)
            acc[i][j] = (floatm)(0.0f);
    for (int k = 0; k < C; ++k) {
#ifdef PREFETCH_STEPS   // PoCL: U's rows PREFETCH_STEPS ahead (conv_launch.py says why)
        {
            const int ahead = k + PREFETCH_STEPS < C ? k + PREFETCH_STEPS : k;
#pragma unroll
            for (int i = 0; i < NV; ++i)
                __builtin_prefetch((__global const char *)(a + ahead * COUT_PAD + i * VW));
        }
#endif
        floatm av[NV];
#pragma unroll
        for (int i = 0; i < NV; ++i)
            av[i] = *(__global const floatm *)(a + k * COUT_PAD + i * VW);
        __global const float *bk = b + k * NT_PAD;
#pragma unroll
        for (int j = 0; j < BN; ++j) {
            const floatm bv = (floatm)(bk[j]);
#pragma unroll
            for (int i = 0; i < NV; ++i)
                acc[i][j] += av[i] * bv;      // a*b+c: -cl-mad-enable makes it one FMA
        }
    }
    __global float *c = m + (p * NT_PAD + n0) * COUT_PAD + o0;
#pragma unroll
    for (int j = 0; j < BN; ++j)
#pragma unroll
        for (int i = 0; i < NV; ++i)
            *(__global floatm *)(c + j * COUT_PAD + i * VW) = acc[i][j];
}
#endif

// --- output transform: one work-item per (tile, output channel), the channel running fastest -
// y = A^T M A (TILE_OUT x TILE_OUT) + bias, the fused epilogue, stored where inside the output.
// A 1-D range of NT * COUT work-items: neighbouring work-items read neighbouring words of M
// (its channels are contiguous), 36 times, and store 16 values each.
__kernel void winograd_output(__global const float *m, __global const float *bias,
                              const int has_bias, __global float *y,
                              __global const float *residual, const int COUT,
                              const int COUT_PAD, const int OH, const int OW,
                              const int tiles_h, const int tiles_w, const int NT,
                              const int NT_PAD)
{
    const int gid = get_global_id(0);
    if (gid >= COUT * NT)
        return;
    const int o = gid % COUT, tile = gid / COUT;
    const int tw = tile % tiles_w, th = (tile / tiles_w) % tiles_h;
    const int n = tile / (tiles_w * tiles_h);
    __global const float *in = m + tile * COUT_PAD + o;
    const int position_stride = NT_PAD * COUT_PAD;
    float mm[POSITIONS];
    #pragma unroll
    for (int p = 0; p < POSITIONS; ++p)
        mm[p] = in[p * position_stride];
    float t[TILE_OUT * ALPHA];               // A^T M: TILE_OUT x ALPHA
    #pragma unroll
    for (int j = 0; j < ALPHA; ++j)
        OUTPUT_1D((t + j), (mm + j), ALPHA);
    float out[TILE_OUT * TILE_OUT];          // (A^T M) A
    #pragma unroll
    for (int i = 0; i < TILE_OUT; ++i)
        OUTPUT_1D((out + i * TILE_OUT), (t + i * ALPHA), 1);

    const float b = has_bias ? bias[o] : 0.0f;
    const int oy0 = th * TILE_OUT, ox0 = tw * TILE_OUT;
    #pragma unroll
    for (int i = 0; i < TILE_OUT; ++i) {
        const int oy = oy0 + i;
        if (oy >= OH)
            break;
#if TILE_OUT == 4
        if (ox0 + 4 <= OW) {    // a whole row of the tile: the epilogue on a float4 (epilogue.h)
            const int index = ((n * COUT + o) * OH + oy) * OW + ox0;
            const float4 row = (float4)(out[i * 4], out[i * 4 + 1], out[i * 4 + 2],
                                        out[i * 4 + 3]) + b;
            const float4 v = kuiper_epilogue4(row, residual, index);
            __global float *dst = y + index;
            STORE_4(dst, v);
            continue;
        }
#endif
        #pragma unroll
        for (int j = 0; j < TILE_OUT; ++j) {
            const int ox = ox0 + j;
            if (ox >= OW)
                break;
            const int index = ((n * COUT + o) * OH + oy) * OW + ox;
            y[index] = kuiper_epilogue(out[i * TILE_OUT + j] + b, residual, index);
        }
    }
}
