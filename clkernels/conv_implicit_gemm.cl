// conv_implicit_gemm.cl: implicit-GEMM convolution, im2col done on the fly inside the GEMM.
//
// Good for: every convolution that is not depthwise (groups allowed; 1-D, 2-D and 3-D, all
// described as 3-D by the host; any padding mode), above all those whose column matrix would
// be large: big images, 3x3 and larger kernels, batch > 1. The im2col path (conv2d.cl) first
// writes Cin*taps*pixels floats to global memory and the GEMM reads them back; here the GEMM's
// B operand is never stored. The selector (layers/opencl_conv/selector.py) picks it when
// the cost model (layers/opencl_conv/implicit_gemm.py) says it is the cheapest, which
// is when the column matrix's traffic costs more than the few extra index operations below.
//
// The convolution as a matrix product, per group g (z = get_group_id(2) = slice * G + g):
//
//     y[img][g*M + m][p] = sum_k  W[g*M + m][k] * B[k][img*P + p]     (M = Cout/G rows)
//     B[k][col] = xpad[img][g*Cin_g + c][oz*SD + a*DD][oy*SH + i*DH][ox*SW + j*DW]
//     where k = ((c*KD + a)*KH + i)*KW + j,  col = img*P + (oz*OH + oy)*OW + ox
//
// The batch is folded into the columns, so batch 1 and batch 32 are both one launch.
// Finding B[k][col] would take a division by KW, KH*KW, ... per element. Instead the host
// uploads `ktab` once per layer: for each k an int4 (channel offset c*D*H*W, a*DD, i*DH, j*DW),
// the part of the address that depends on k alone. A work-item's columns stay the same for the
// whole K loop, so their part (image offset, oz*SD, oy*SH, ox*SW) is computed once, before it.
// An element is then one table entry, three adds and three lookups in the padding tables
// src_z / src_y / src_x (conv2d.cl explains them: -1 means a zero, and every padding mode is
// just a different table).
//
// Two kernels, like gemm.h (read it first: the tiling is the same):
// - implicit_gemm_tiled, for GPUs: a work-group computes a TILE_M x TILE_N tile of y, each
//   work-item a WPT_M x WPT_N block in registers; K is walked TILE_K at a time through local
//   memory. Only the B tile's load differs from gemm_tiled: it gathers from x as above.
// - implicit_gemm_blocked, for CPUs (no local memory, which PoCL emulates slowly): a work-item
//   computes BLOCK_M output channels x a run of VEC_N consecutive pixels, as BLOCK_M SIMD
//   vectors. Per k it builds one vector of VEC_N input values (one vector load when the run's
//   window is inside an input row, two and their even lanes at stride 2, else a gather) and
//   does BLOCK_M vector multiply-adds, so the index work is shared by BLOCK_M * VEC_N
//   multiply-adds. With zero padding (ZERO_PAD=1) the edges are found by comparisons
//   instead of table lookups.
//
// Split-K (conv_split_k.cl includes this file with SPLIT_K=1): slice s of the K axis is
// k in [s*K_SLICE, min(K, (s+1)*K_SLICE)); the result is a partial sum stored raw at
// partial[s][index]; a second kernel adds the slices, the bias and the epilogue.
// Without SPLIT_K the store adds the bias and calls kuiper_epilogue (epilogue.h).

#include "epilogue.h"
#include "index_math.h"   // imin(): PoCL's min() of ints is a call

#ifndef SPLIT_K
#define SPLIT_K 0
#endif

// The arguments both kernels take, in this order (layers/opencl_conv/implicit_gemm.py).
#define IMPLICIT_GEMM_ARGS                                                                    \
    __global const float *x, __global const float *w, __global const float *bias,             \
    const int has_bias, __global const float *residual, __global float *y,                    \
    __global const int4 *ktab, __global const int *src_z, __global const int *src_y,          \
    __global const int *src_x,                                                                \
    const int C, const int D, const int H, const int W, const int COUT, const int M,          \
    const int K, const int K_SLICE, const int OD, const int OH, const int OW,                 \
    const int SD, const int SH, const int SW, const int PAD_D, const int PAD_H,                \
    const int PAD_W, const int COLS,                \
    const int GROUPS

// Where a computed value goes: the output with bias and epilogue, or a raw partial sum.
inline void store_result(__global float *y, __global const float *bias, const int has_bias,
                         __global const float *residual, const int channel, const int index,
                         const int slice, const int total, float v)
{
#if SPLIT_K
    y[slice * total + index] = v;          // y is the partial-sum workspace here
#else
    if (has_bias)
        v += bias[channel];
    y[index] = kuiper_epilogue(v, residual, index);
#endif
}

// ---------------------------------------------------------------------------------------------
// implicit_gemm_tiled. Global size (ceil(COLS/TILE_N)*LOCAL_N, ceil(M/TILE_M)*LOCAL_M,
// slices*GROUPS), local size (LOCAL_N, LOCAL_M, 1). The host checks that THREADS is a multiple
// of TILE_N: then each work-item loads rows of one B-tile column only, the same column for the
// whole K loop.

#include "tile_sizes.h"
#define LOCAL_M (TILE_M / WPT_M)
#define LOCAL_N (TILE_N / WPT_N)
#define THREADS (LOCAL_M * LOCAL_N)
#define B_STEP (THREADS / TILE_N)       // B-tile rows loaded by the work-group per pass

__kernel __attribute__((reqd_work_group_size(LOCAL_N, LOCAL_M, 1)))
void implicit_gemm_tiled(IMPLICIT_GEMM_ARGS)
{
    const int tn = get_local_id(0), tm = get_local_id(1);
    const int tid = tm * LOCAL_N + tn;
    const int n0 = get_group_id(0) * TILE_N, m0 = get_group_id(1) * TILE_M;
    const int g = get_group_id(2) % GROUPS, slice = get_group_id(2) / GROUPS;
    const int k_begin = slice * K_SLICE, k_end = imin(K, k_begin + K_SLICE);
    const int P = OD * OH * OW, DHW = D * H * W;
    w += g * M * K;

    // The column of the B tile this work-item loads, for the whole K loop: its image and the
    // padded coordinates of its window's corner. Divisions happen here, once.
    const int bn = tid % TILE_N;
    const int col = n0 + bn;
    const bool col_valid = col < COLS;
    const int img = imin(col, COLS - 1) / P, p = imin(col, COLS - 1) % P;
    const int pz = p / (OH * OW) * SD, py = (p / OW) % OH * SH, px = p % OW * SW;
    __global const float *xg = x + (img * C + g * (C / GROUPS)) * DHW;

    __local float As[TILE_K][TILE_M];
    __local float Bs[TILE_K][TILE_N];
    float acc[WPT_M][WPT_N];
    for (int i = 0; i < WPT_M; ++i)
        for (int j = 0; j < WPT_N; ++j)
            acc[i][j] = 0.0f;

    for (int k0 = k_begin; k0 < k_end; k0 += TILE_K) {
        for (int l = tid; l < TILE_K * TILE_M; l += THREADS) {   // the weight: as in gemm.h
            const int k = l % TILE_K, m = l / TILE_K;
            const int gm = m0 + m, gk = k0 + k;
            As[k][m] = (gm < M && gk < k_end) ? w[gm * K + gk] : 0.0f;
        }
        for (int k = tid / TILE_N; k < TILE_K; k += B_STEP) {     // im2col, on the fly
            const int gk = k0 + k;
            float v = 0.0f;
            if (col_valid && gk < k_end) {
                const int4 e = ktab[gk];
                const int iz = src_z[pz + e.y], iy = src_y[py + e.z], ix = src_x[px + e.w];
                if ((iz | iy | ix) >= 0)   // all three >= 0: not a zero of the padding
                    v = xg[e.x + (iz * H + iy) * W + ix];
            }
            Bs[k][bn] = v;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int k = 0; k < TILE_K; ++k) {
            float a[WPT_M], b[WPT_N];
            for (int i = 0; i < WPT_M; ++i)
                a[i] = As[k][tm + i * LOCAL_M];
            for (int j = 0; j < WPT_N; ++j)
                b[j] = Bs[k][tn + j * LOCAL_N];
            for (int i = 0; i < WPT_M; ++i)
                for (int j = 0; j < WPT_N; ++j)
                    acc[i][j] += a[i] * b[j];
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }

    const int total = COLS * COUT;   // elements of y
    for (int j = 0; j < WPT_N; ++j) {
        const int c = n0 + tn + j * LOCAL_N;
        if (c >= COLS)
            break;
        const int ci = c / P, cp = c % P;
        for (int i = 0; i < WPT_M; ++i) {
            const int gm = m0 + tm + i * LOCAL_M;
            if (gm >= M)
                break;
            const int channel = g * M + gm;
            store_result(y, bias, has_bias, residual, channel, (ci * COUT + channel) * P + cp,
                         slice, total, acc[i][j]);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// implicit_gemm_blocked. Global size (N*OD*OH*XBLOCKS, ceil(M/BLOCK_M), slices*GROUPS), rounded
// up to the local size (extra work-items return at once); XBLOCKS = ceil(OW/VEC_N) pixel runs
// per output row, so a run never crosses a row (the last one of a row may be short).

#ifndef BLOCK_M
#define BLOCK_M 8
#endif
#ifndef VEC_N
#define VEC_N 8
#endif

#if VEC_N == 8
typedef float8 floatv;
typedef int8 intv;
#define EPILOGUE_V kuiper_epilogue8
#define STORE_V STORE_8
#define LANE_INDEX ((int8)(0, 1, 2, 3, 4, 5, 6, 7))
// A vector of type T from the VEC_N loads p[i.s0], p[i.s1] ...; with i = 0, 1, 2 ... the
// compiler merges them into one vector load (PoCL compiles vload8 to a function call, gemm.h)
#define GATHER(T, p, i) (T)((p)[(i).s0], (p)[(i).s1], (p)[(i).s2], (p)[(i).s3], \
                            (p)[(i).s4], (p)[(i).s5], (p)[(i).s6], (p)[(i).s7])
#elif VEC_N == 16
typedef float16 floatv;
typedef int16 intv;
#define EPILOGUE_V kuiper_epilogue16
#define STORE_V STORE_16
#define LANE_INDEX ((int16)(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15))
#define GATHER(T, p, i) (T)((p)[(i).s0], (p)[(i).s1], (p)[(i).s2], (p)[(i).s3],             \
    (p)[(i).s4], (p)[(i).s5], (p)[(i).s6], (p)[(i).s7], (p)[(i).s8], (p)[(i).s9],           \
    (p)[(i).sa], (p)[(i).sb], (p)[(i).sc], (p)[(i).sd], (p)[(i).se], (p)[(i).sf])
#else
#error "VEC_N must be 8 or 16"
#endif

// ZERO_PAD=1 (padding mode "zeros"): a column outside the input is a zero, found by a
// comparison; the other modes read src_x (a lookup per lane).
#ifndef ZERO_PAD
#define ZERO_PAD 0
#endif

// v clamped into 0 .. n-1, lane by lane. The bounds are vectors too: Oclgrind computes
// min/clamp of an int vector with scalar bounds wrongly (PoCL does not).
#define CLAMP(v, n) clamp((v), (intv)(0), (intv)((n) - 1))

typedef union {
    floatv v;
    float s[VEC_N];
} lanes_t;

// FLAT_RUNS=0: a run is VEC_N pixels of one output row (the host's choice when OW >= VEC_N):
// inside the input its values are neighbours, one vector load. FLAT_RUNS=1: a run is VEC_N
// consecutive pixels of one image, across rows (short rows: 7 pixels would waste 9 of 16
// lanes); every lane then has its own input row and column, and the run is a gather.
#ifndef FLAT_RUNS
#define FLAT_RUNS 0
#endif

__kernel void implicit_gemm_blocked(IMPLICIT_GEMM_ARGS)
{
    const int P = OD * OH * OW, DHW = D * H * W;
#if FLAT_RUNS
    const int RUNS = (P + VEC_N - 1) / VEC_N;      // runs per image
#else
    const int RUNS = (OW + VEC_N - 1) / VEC_N;     // runs per output row
#endif
    const int run = get_global_id(0);
    const int m0 = get_global_id(1) * BLOCK_M;
    const int g = get_global_id(2) % GROUPS, slice = get_global_id(2) / GROUPS;
    if (run >= COLS / (FLAT_RUNS ? P : OW) * RUNS || m0 >= M)
        return;
    const int k_begin = slice * K_SLICE, k_end = imin(K, k_begin + K_SLICE);
#if FLAT_RUNS
    const int img = run / RUNS, p0 = run % RUNS * VEC_N;
    const int count = imin(VEC_N, P - p0);
    // each lane's padded coordinates (a short run repeats its last pixel)
    const intv p = min(p0 + LANE_INDEX, (intv)(P - 1));
    const intv lz = p / (OH * OW) * SD - PAD_D, ly = p / OW % OH * SH - PAD_H,
               lx = p % OW * SW - PAD_W;
#else
    const int row = run / RUNS, ox0 = run % RUNS * VEC_N;    // row = (img*OD + oz)*OH + oy
    const int img = row / (OD * OH), ozy = row % (OD * OH), p0 = ozy * OW + ox0;
    const int pz = ozy / OH * SD, py = ozy % OH * SH, px0 = ox0 * SW;
    const int count = imin(VEC_N, OW - ox0);
    // padded-column offsets of the run's pixels (a short run repeats its last pixel)
    const intv lane_step = min(LANE_INDEX, (intv)(count - 1)) * SW;
#endif
    __global const float *xg = x + (img * C + g * (C / GROUPS)) * DHW;

    // this work-item's weight rows, clamped into the matrix (extra rows are computed, not stored)
    __global const float *wrow[BLOCK_M];
    floatv acc[BLOCK_M];
#pragma unroll
    for (int i = 0; i < BLOCK_M; ++i) {
        wrow[i] = w + (g * M + imin(m0 + i, M - 1)) * K;
        acc[i] = (floatv)(0.0f);
    }

    for (int k = k_begin; k < k_end; ++k) {
        const int4 e = ktab[k];
        floatv bv;
#if FLAT_RUNS
#if ZERO_PAD
        const intv iz = lz + e.y, iy = ly + e.z, ix = lx + e.w;
        const intv inside = iz >= 0 && iz < D && iy >= 0 && iy < H && ix >= 0 && ix < W;
#else
        const intv iz = GATHER(intv, src_z, lz + PAD_D + e.y),
                   iy = GATHER(intv, src_y, ly + PAD_H + e.z),
                   ix = GATHER(intv, src_x, lx + PAD_W + e.w);
        const intv inside = (iz | iy | ix) >= 0;
#endif
        const intv at = (CLAMP(iz, D) * H + CLAMP(iy, H)) * W + CLAMP(ix, W);
        bv = select((floatv)(0.0f), GATHER(floatv, xg + e.x, at), inside);
#else
        const int iz = src_z[pz + e.y], iy = src_y[py + e.z];
        if ((iz | iy) < 0)
            continue;                               // a padding row: every value is zero
        __global const float *line = xg + e.x + (iz * H + iy) * W;
        const int first = px0 + e.w;                // padded column of the run's first pixel
        if (SW == 1 && count == VEC_N && first >= PAD_W && first + VEC_N <= PAD_W + W) {
            bv = GATHER(floatv, line + first - PAD_W, LANE_INDEX);   // inside: a vector load
        } else if (SW == 2 && count == VEC_N && first >= PAD_W
                   && first + 2 * VEC_N <= PAD_W + W) {
            // stride 2, inside: two vector loads and their even lanes (the last lane loaded
            // is not used, hence 2 * VEC_N in the bound). A gather of every other value
            // compiles to one load per lane (PoCL): YOLO's stride-2 3x3 convolutions ran at a
            // third of im2col's speed with it.
            const floatv lo = GATHER(floatv, line + first - PAD_W, LANE_INDEX);
            const floatv hi = GATHER(floatv, line + first - PAD_W + VEC_N, LANE_INDEX);
            bv = (floatv)(lo.even, hi.even);
        } else {                                    // an edge, a short run, or stride > 2
#if ZERO_PAD
            const intv ix = (intv)(first - PAD_W) + lane_step;
            const intv inside = ix >= 0 && ix < W;
#else
            const intv ix = GATHER(intv, src_x + first, lane_step);
            const intv inside = ix >= 0;
#endif
            bv = select((floatv)(0.0f), GATHER(floatv, line, CLAMP(ix, W)), inside);
        }
#endif
#pragma unroll
        for (int i = 0; i < BLOCK_M; ++i)
            acc[i] += (floatv)(wrow[i][k]) * bv;    // a*b+c: one FMA with -cl-mad-enable
    }

    const int total = COLS * COUT;
    for (int i = 0; i < BLOCK_M && m0 + i < M; ++i) {
        const int channel = g * M + m0 + i;
        const int base = (img * COUT + channel) * P + p0;
#if !SPLIT_K
        if (count == VEC_N) {  // a whole run: bias and epilogue on the vector (epilogue.h)
            const floatv v = EPILOGUE_V(acc[i] + (has_bias ? bias[channel] : 0.0f),
                                        residual, base);
            __global float *dst = y + base;
            STORE_V(dst, v);
            continue;
        }
#endif
        lanes_t out;
        out.v = acc[i];
        for (int j = 0; j < count; ++j)
            store_result(y, bias, has_bias, residual, channel, base + j, slice, total,
                         out.s[j]);
    }
}
