// conv_depthwise.cl: depthwise convolution (one input channel per group), output blocks per work-item.
//
// Good for: MobileNet's and EfficientNet's 3x3 / 5x5 depthwise layers, stride 1 or 2, with a
// channel multiplier too (output channel o reads input channel o / MULT), any dilation and any
// padding mode; 3-D volumes as well (the depth axis is a loop). The kernel selector picks it for
// every depthwise convolution (a GEMM with K = 9 has nothing to tile; see
// layers/opencl_conv/depthwise.py for the cost model).
//
// Why it is faster than conv2d.cl's `depthwise` (one work-item per output row, the kernel size
// a runtime loop, a table lookup per tap and output): the kernel size, stride and dilation are
// build options (-DKH -DKW -DSH -DSW -DDH -DDW), so every loop below has a constant trip count
// and unrolls, and the KH x KW weights sit in registers. A work-item computes a block of
// BH rows x BW columns of one output plane: it walks the input rows the block needs once, loads
// each row's segment of input columns once into registers, and adds it into every output of the
// block that uses it. For 3x3 stride 1, BW = 8: a row segment of 10 values feeds up to 24
// multiply-adds. Stores: a work-item writes BW consecutive values, its neighbour the next BW.
//
// Padding (every mode) is read through the source tables of layers/common/conv_geometry.py,
// extended with -1 (zeros) by the host past the padded length, so that the blocks sticking out of
// the output read no further checks. Global size (ceil(OW / BW), ceil(OH / BH), N * COUT * OD).

#include "epilogue.h"
#include "index_math.h"   // imax(): PoCL's max() of ints is a call

#define SEG_W ((BW - 1) * SW + (KW - 1) * DW + 1)   // input columns a block row reads
#define ROWS ((BH - 1) * SH + (KH - 1) * DH + 1)    // input rows a block reads

// A row of the block is one vector of BW floats: every multiply-add below is a vector one.
// COLUMNS(s, j) gathers the inputs of the block's BW outputs for kernel column j out of the row
// segment s (registers): the compiler turns it into a vector load or a shuffle, not BW loads.
#if BW == 1
typedef float floatw;
#define COLUMNS(s, j) (s[(j) * DW])
#elif BW == 2
typedef float2 floatw;
#define COLUMNS(s, j) ((float2)(s[(j) * DW], s[SW + (j) * DW]))
#elif BW == 4
typedef float4 floatw;
#define EPILOGUE_W kuiper_epilogue4
#define STORE_W STORE_4
#define COLUMNS(s, j) ((float4)(s[(j) * DW], s[SW + (j) * DW], s[2 * SW + (j) * DW], \
                                s[3 * SW + (j) * DW]))
#elif BW == 8
typedef float8 floatw;
#define EPILOGUE_W kuiper_epilogue8
#define STORE_W STORE_8
#define COLUMNS(s, j) ((float8)(s[(j) * DW], s[SW + (j) * DW], s[2 * SW + (j) * DW], \
                                s[3 * SW + (j) * DW], s[4 * SW + (j) * DW], \
                                s[5 * SW + (j) * DW], s[6 * SW + (j) * DW], \
                                s[7 * SW + (j) * DW]))
#else
#error "BW must be 1, 2, 4 or 8"
#endif

__kernel void depthwise_block(__global const float *x, __global const float *w,
                              __global const float *bias, const int has_bias,
                              __global float *y, __global const float *residual,
                              __global const int *src_z, __global const int *src_y,
                              __global const int *src_x,
                              const int C, const int D, const int H, const int W,
                              const int COUT, const int MULT, const int KD, const int SD,
                              const int DD, const int OD, const int OH, const int OW)
{
    const int ox0 = get_global_id(0) * BW, oy0 = get_global_id(1) * BH;
    const int z = get_global_id(2);              // (n * COUT + o) * OD + oz
    if (ox0 >= OW || oy0 >= OH)
        return;
    const int oz = z % OD, no = z / OD;
    const int o = no % COUT, n = no / COUT;
    __global const float *volume = x + (n * C + o / MULT) * D * H * W;

    int sx[SEG_W];                               // the input column of each segment value
#pragma unroll
    for (int q = 0; q < SEG_W; ++q)
        sx[q] = src_x[ox0 * SW + q];

    // Away from the left and right edges the segment's columns are consecutive input columns
    // (in every padding mode): every step of a source table is +1, a jump back, or a -1 (zero),
    // so first >= 0 and last - first == SEG_W - 1 means all steps are +1.
    const bool inside = sx[0] >= 0 && sx[SEG_W - 1] - sx[0] == SEG_W - 1;

    floatw acc[BH];
#pragma unroll
    for (int r = 0; r < BH; ++r)
        acc[r] = (floatw)(0.0f);

    for (int a = 0; a < KD; ++a) {
        const int iz = src_z[oz * SD + a * DD];
        if (iz < 0)
            continue;
        __global const float *plane = volume + iz * H * W;
        float taps[KH][KW];
        __global const float *wk = w + (o * KD + a) * KH * KW;
#pragma unroll
        for (int i = 0; i < KH; ++i)
#pragma unroll
            for (int j = 0; j < KW; ++j)
                taps[i][j] = wk[i * KW + j];

#pragma unroll
        for (int row = 0; row < ROWS; ++row) {   // input row oy0*SH + row of the padded plane
            const int iy = src_y[oy0 * SH + row];
            if (iy < 0)
                continue;                        // a padding row: zeros add nothing
            __global const float *line = plane + iy * W;
            float seg[SEG_W];
            if (inside) {                        // plain loads of consecutive values
                __global const float *start = line + sx[0];
#pragma unroll
                for (int q = 0; q < SEG_W; ++q)
                    seg[q] = start[q];
            } else {                             // the edges: one table lookup per value
#pragma unroll
                for (int q = 0; q < SEG_W; ++q)
                    seg[q] = sx[q] >= 0 ? line[imax(sx[q], 0)] : 0.0f;
            }
            // output row r of the block uses this input row with kernel row i when
            // r*SH + i*DH == row: all constants once unrolled, the test folds away
#pragma unroll
            for (int r = 0; r < BH; ++r)
#pragma unroll
                for (int i = 0; i < KH; ++i)
                    if (r * SH + i * DH == row)
#pragma unroll
                        for (int j = 0; j < KW; ++j)
                            acc[r] += (floatw)(taps[i][j]) * COLUMNS(seg, j);
        }
    }

    const float b = has_bias ? bias[o] : 0.0f;
#pragma unroll
    for (int r = 0; r < BH; ++r) {
        const int oy = oy0 + r;
        if (oy >= OH)
            break;
        const int base = (z * OH + oy) * OW;
#ifdef EPILOGUE_W
        if (ox0 + BW <= OW) {   // a whole row of the block: the epilogue on the vector
            const floatw v = EPILOGUE_W(acc[r] + b, residual, base + ox0);
            __global float *out = y + base + ox0;
            STORE_W(out, v);
            continue;
        }
#endif
        union { floatw vector; float value[BW]; } row = {acc[r]};   // the vector's lanes
#pragma unroll
        for (int c = 0; c < BW; ++c) {
            const int ox = ox0 + c;
            if (ox < OW)
                y[base + ox] = kuiper_epilogue(row.value[c] + b, residual, base + ox);
        }
    }
}
