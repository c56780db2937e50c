// conv_direct.cl: direct convolution for CPU devices, output channels as the SIMD lanes.
//
// Good for: CPU devices (PoCL), 2-D (and 1-D) convolutions with zero padding and enough output
// channels to fill a vector (16 per group or more), above all stride 2 and kernels larger than
// 3x3, which Winograd cannot take and whose column matrix (im2col_gemm) is as big as the
// product is long to compute. The selector (layers/opencl_conv/selector.py) picks it
// when the cost model (layers/opencl_conv/direct.py) says it is the cheapest.
//
// The convolution as gemm_blocked's matrix product with the roles of the operands swapped:
//
//     y[img][co][oy][ox] = sum over (c, i, j) of
//                          w[co][c][i][j] * xp[img][c][oy*SH + i*DH][ox*SW + j*DW]
//
// A work-item computes PIX consecutive pixels of one output row for 16*NV output channels, as
// PIX*NV float16 accumulators (a column of C per pixel, the channels as lanes). Per step
// k = (c, i, j) it loads NV vectors of weights (16 channels' w[co][c][i][j], stored side by
// side by the host: the packed weight below) and PIX input values, each broadcast to a vector:
// PIX*NV vector multiply-adds for NV + PIX loads, the same ratio as gemm_blocked's 8x32 block.
// The input is the broadcast operand, so where it lies does not matter: at stride 2 an input
// value is one scalar load like any other (implicit_gemm_blocked, whose vectors run along the
// pixels, needs two vector loads and a shuffle there, and a gather beyond), and the input is
// not copied KH*KW times (im2col_gemm writes a column matrix and reads it back).
//
// Packed weight wp[g][block][k][16*NV] (k = (c*KH + i)*KW + j, block = co / (16*NV) within the
// group; lanes past COUT/G are zeros): a step's NV vectors are contiguous, and a work-item
// walks its block's K steps in order. The host packs a weight that is an attribute once, with
// NumPy; a weight that is an input (F.conv2d) is packed by `direct_pack` below at each run.
//
// Padding: `direct_pad` first copies the input with its zeros around it (xp, HP x WP per
// channel, wide enough for the last run of a row to read past the output's end), so the loop
// has no test at all. A test per value at the edges cost more than the copy: with a second
// loop for the runs that touch the padding, PoCL kept the accumulators in memory, and on
// 20 x 20 outputs two runs of three touch it. The copy is one input's worth of values, a
// ninth of a 3x3 column matrix; without padding and with whole runs it is skipped.
//
// Kernel size, stride, dilation, PIX and NV are compiled in (-D): the pixel offsets of a step
// are constants and the pixel loops unroll.

#include "epilogue.h"
#include "index_math.h"   // imin(), iclamp(): PoCL's min() and clamp() of ints are calls

#define LANES (16 * NV)

// A vector's 16 lanes as values: the store writes each channel's values to its own plane.
typedef union {
    float16 v;
    float s[16];
} lanes16_t;

// The epilogue of 16 channels of one pixel: as a vector, with the residual (when fused) read
// lane by lane from each channel's plane, `plane` values apart; lanes past `valid` re-read the
// last valid channel (their results are not stored).
inline float16 epilogue_channels(float16 v, __global const float *residual, const int index,
                                 const int plane, const int valid)
{
    v = EPI_ACT(v);
#if EPI_RESIDUAL
    lanes16_t r;
    for (int l = 0; l < 16; ++l)
        r.s[l] = residual[index + imin(l, valid - 1) * plane];
    v += r.v;
#endif
    return EPI_POST(v);
}

// The bias of 16 channels from `first` on, `valid` of them real (the others repeat the last).
inline float16 channel_bias(__global const float *bias, const int has_bias, const int first,
                            const int valid)
{
    lanes16_t b;
    for (int l = 0; l < 16; ++l)
        b.s[l] = has_bias && valid > 0 ? bias[first + imin(l, valid - 1)] : 0.0f;
    return b.v;
}

// Store the 16 channels of one pixel (the first `valid` of them): each value to its channel's
// plane, through the epilogue.
inline void store_channels(__global float *y, const float16 sum, __global const float *residual,
                           const int index, const int plane, const int valid)
{
    if (valid <= 0)
        return;
    lanes16_t out;
    out.v = epilogue_channels(sum, residual, index, plane, imin(valid, 16));
    for (int l = 0; l < imin(valid, 16); ++l)
        y[index + l * plane] = out.s[l];
}

// The accumulators are named variables, acc0_p (channels 0-15 of pixel p) and acc1_p
// (channels 16-31), one per pixel listed by FOR_PIX, like gemm_blocked's c0 ... c7: what the
// kernel keeps in registers can be read in its source.
#define PIX_1(X) X(0)
#define PIX_2(X) PIX_1(X) X(1)
#define PIX_3(X) PIX_2(X) X(2)
#define PIX_4(X) PIX_3(X) X(3)
#define PIX_5(X) PIX_4(X) X(4)
#define PIX_6(X) PIX_5(X) X(5)
#define PIX_7(X) PIX_6(X) X(6)
#define PIX_8(X) PIX_7(X) X(7)
#define PIX_9(X) PIX_8(X) X(8)
#define PIX_10(X) PIX_9(X) X(9)
#define PIX_11(X) PIX_10(X) X(10)
#define PIX_12(X) PIX_11(X) X(11)
#define PIX_13(X) PIX_12(X) X(12)
#define PIX_14(X) PIX_13(X) X(13)
#define PIX_15(X) PIX_14(X) X(14)
#define PIX_16(X) PIX_15(X) X(15)
#if PIX < 1 || PIX > 16
#error "PIX must be 1 to 16"
#endif
// (two steps: PIX_LIST_OF expands PIX to its number before PIX_LIST pastes it to PIX_)
#define PIX_LIST(n) PIX_##n
#define PIX_LIST_OF(n) PIX_LIST(n)
#define FOR_PIX PIX_LIST_OF(PIX)

#if NV == 2
#define DECLARE(p) float16 acc0_##p = 0.0f, acc1_##p = 0.0f;
#define FMA(p, value) {                                                                    \
        const float16 a = (float16)(value);                                                 \
        acc0_##p += a * w0;                                                                 \
        acc1_##p += a * w1;                                                                 \
    }
#define LOAD_WEIGHTS const float16 w0 = wk[2 * k], w1 = wk[2 * k + 1]
#else
#define DECLARE(p) float16 acc0_##p = 0.0f;
#define FMA(p, value) acc0_##p += (float16)(value) * w0;
#define LOAD_WEIGHTS const float16 w0 = wk[k]
#endif
// PREFETCH_STEPS (PoCL's CPU devices): ask for the weights that many steps ahead: they come
// from main memory (layers/opencl_conv/launch.py has the measurements).
// __builtin_prefetch is Clang's (OpenCL's `prefetch()` made no difference under PoCL). A
// prefetch never faults; the loop still clamps the step to the last one, with a conditional:
// PoCL's min() is a call, and cost 2x here.
#ifdef PREFETCH_STEPS
#define PREFETCH_LINE(p) __builtin_prefetch((__global const char *)(p))
#if NV == 2
#define PREFETCH_WEIGHTS(k) PREFETCH_LINE(wk + 2 * (k)); PREFETCH_LINE(wk + 2 * (k) + 1)
#else
#define PREFETCH_WEIGHTS(k) PREFETCH_LINE(wk + (k))
#endif
#endif
// pixel p's input value (its window's corner plus the tap's offset, p runs of SW apart)
#define FMA_PIXEL(p) FMA(p, corner[e + (p) * SW])

// Store: bias and epilogue on each pixel's vectors, then each channel's value to its plane.
// A whole block (PIX pixels, 16 * NV channels) goes through store_block: a channel's PIX
// values side by side, from unrolled loops with no test. The pixel-by-pixel store (STORE),
// now for the blocks at the edges only, took 0.4 of the 1.0 ms of ResNet-18's stem (K = 147
// steps) when every block went through it; store_block brought the stem to 0.87 ms.
inline void store_block(__global float *y, const lanes16_t *out, const int plane)
{
    #pragma unroll
    for (int l = 0; l < 16; ++l) {
        __global float *row = y + l * plane;
        #pragma unroll
        for (int p = 0; p < PIX; ++p)
            row[p] = out[p].s[l];
    }
}

// Per NV: the store of one pixel (STORE), the epilogue of a pixel of a whole block (FINAL),
// the biases, the whole block's outputs and their store; STORE_ALL below puts them together.
#if NV == 2
#define STORE(p) if (p < count) {                                                           \
        store_channels(y, acc0_##p + b0, residual, base + p, plane, M - co);                 \
        store_channels(y, acc1_##p + b1, residual, base + 16 * plane + p, plane, M - co - 16); \
    }
#define FINAL(p)                                                                            \
    out0[p].v = epilogue_channels(acc0_##p + b0, residual, base + p, plane, 16);            \
    out1[p].v = epilogue_channels(acc1_##p + b1, residual, base + 16 * plane + p, plane, 16);
#define BIASES                                                                              \
    const float16 b0 = channel_bias(bias, has_bias, g * M + co, M - co);                    \
    const float16 b1 = channel_bias(bias, has_bias, g * M + co + 16, M - co - 16);
#define BLOCK_OUTPUTS lanes16_t out0[PIX], out1[PIX];
#define STORE_BLOCK_OUTPUTS                                                                 \
    store_block(y + base, out0, plane);                                                     \
    store_block(y + base + 16 * plane, out1, plane);
#else
#define STORE(p) \
    if (p < count) store_channels(y, acc0_##p + b0, residual, base + p, plane, M - co);
#define FINAL(p) out0[p].v = epilogue_channels(acc0_##p + b0, residual, base + p, plane, 16);
#define BIASES const float16 b0 = channel_bias(bias, has_bias, g * M + co, M - co);
#define BLOCK_OUTPUTS lanes16_t out0[PIX];
#define STORE_BLOCK_OUTPUTS store_block(y + base, out0, plane);
#endif
#define STORE_ALL                                                                           \
    BIASES                                                                                  \
    if (count == PIX && M - co >= LANES) {                                                  \
        BLOCK_OUTPUTS                                                                       \
        FOR_PIX(FINAL)                                                                      \
        STORE_BLOCK_OUTPUTS                                                                 \
    } else {                                                                                \
        FOR_PIX(STORE)                                                                      \
    }

// Global size (OH * RUNS rounded up to the work-group's, BLOCKS, N * GROUPS); RUNS =
// ceil(OW / PIX) runs of pixels per output row, BLOCKS = ceil(M / LANES). A work-group is whole
// rows of one block (the host's group_size): the block's weights stay in the core's cache while
// its runs read them.
// xp: the input, padded (HP x WP per channel; the input itself when nothing is padded).
// ktab[k] for k = (c*KH + i)*KW + j: the tap's offset from the window's corner in xp,
// (c*HP + i*DH)*WP + j*DW, made by the host once: the loop over k is one flat loop with no
// division, short enough for the compiler to keep the PIX*NV accumulators in registers.
__kernel void conv_direct(__global const float *xp, __global const float16 *wp,
                          __global const int *ktab,
                          __global const float *bias, const int has_bias,
                          __global const float *residual, __global float *y,
                          const int C, const int HP, const int WP, const int COUT, const int M,
                          const int K, const int OH, const int OW, const int GROUPS,
                          const int RUNS, const int BLOCKS)
{
    const int id = get_global_id(0), block = get_global_id(1), zg = get_global_id(2);
    if (id >= OH * RUNS || block >= BLOCKS)
        return;
    const int oy = id / RUNS, ox0 = id % RUNS * PIX;
    const int img = zg / GROUPS, g = zg % GROUPS;
    const int count = imin(PIX, OW - ox0);      // a short last run computes PIX, stores count
    __global const float *corner = xp + ((img * C + g * (C / GROUPS)) * HP + oy * SH) * WP
                                   + ox0 * SW;
    __global const float16 *wk = wp + (g * BLOCKS + block) * K * NV;

    FOR_PIX(DECLARE)
    for (int k = 0; k < K; ++k) {
        const int e = ktab[k];
#ifdef PREFETCH_STEPS
        PREFETCH_WEIGHTS(k + PREFETCH_STEPS < K ? k + PREFETCH_STEPS : k);
#endif
        LOAD_WEIGHTS;
        FOR_PIX(FMA_PIXEL)
    }
    const int plane = OH * OW, co = block * LANES;      // co: the block's first channel in g
    const int base = (img * COUT + g * M + co) * plane + oy * OW + ox0;
    STORE_ALL;
}

// The padded input: one work-item per row of xp (global size (HP, N*C)), its WP values the
// input row's, zeros left, right, above and below (PAD_H, PAD_W: the padding before).
__kernel void direct_pad(__global const float *x, __global float *xp, const int H, const int W,
                         const int HP, const int WP, const int PAD_H, const int PAD_W,
                         const int NC)
{
    const int r = get_global_id(0), nc = get_global_id(1);
    if (r >= HP || nc >= NC)
        return;
    __global float *out = xp + (nc * HP + r) * WP;
    const int iy = r - PAD_H;
    if (iy < 0 || iy >= H) {
        for (int c = 0; c < WP; ++c)
            out[c] = 0.0f;
        return;
    }
    // three plain loops (zeros, the row, zeros) rather than a test per value: a straight copy
    // in the middle, which the compiler turns into vector moves
    const int left = imin(PAD_W, WP), copied = iclamp(WP - PAD_W, 0, W);
    __global const float *row = x + (nc * H + iy) * W;
    for (int c = 0; c < left; ++c)
        out[c] = 0.0f;
    for (int c = 0; c < copied; ++c)
        out[left + c] = row[c];
    for (int c = left + copied; c < WP; ++c)
        out[c] = 0.0f;
}

// The packed weight of a weight that is an input (F.conv2d): one work-item per packed value,
// global size exactly (LANES, K, GROUPS * BLOCKS); w is (COUT, C/G, KH, KW), K = C/G*KH*KW.
__kernel void direct_pack(__global const float *w, __global float *wp, const int M,
                          const int K, const int BLOCKS)
{
    const int lane = get_global_id(0), k = get_global_id(1), gb = get_global_id(2);
    const int g = gb / BLOCKS, co = gb % BLOCKS * LANES + lane;
    wp[(gb * K + k) * LANES + lane] = co < M ? w[(g * M + co) * K + k] : 0.0f;
}
