// F.unfold (im2col) and F.fold (col2im) over images (N, C, H, W) and columns
// (N, C*kh*kw, bh*bw): row (c, i, j) of the columns is channel c seen through kernel tap (i, j),
// column (by, bx) a block position. Block (by, bx) with tap (i, j) covers image pixel
//     y = by*sh - ph + i*dh,   x = bx*sw - pw + j*dw.
// Both kernels run one work-item per *output* element and gather, so nobody writes twice.
// The range is 2-D, (last output dim, every other output index): the divisions that split the
// second index are the same along a whole output row, which a CPU driver (PoCL) vectorises
// three times faster than a flat index split per element.

#define GEOMETRY const int H, const int W, const int BH, const int BW,                        \
                 const int kh, const int kw, const int sh, const int sw, const int ph,       \
                 const int pw, const int dh, const int dw

// Unfold: column element (batch, (c, i, j), by, bx) copies its pixel, or 0 in the padding.
// Range: (BW, N*C*kh*kw*BH).
__kernel void unfold(__global const float *image, __global float *cols, GEOMETRY)
{
    const int bx = get_global_id(0), line = get_global_id(1);
    if (bx >= BW)
        return;
    const int by = line % BH;
    const int row = line / BH;                // batch * C*kh*kw + (c*kh + i)*kw + j
    const int j = row % kw, i = (row / kw) % kh;
    const int plane = row / (kw * kh);        // batch * C + c
    const int y = by * sh - ph + i * dh, x = bx * sw - pw + j * dw;
    const bool inside = y >= 0 && y < H && x >= 0 && x < W;
    cols[(long)line * BW + bx] = inside ? image[((long)plane * H + y) * W + x] : 0.0f;
}

// Fold: image pixel (plane, y, x) sums every (block, tap) pair that covers it. For tap i the
// block row must satisfy by*sh = y + ph - i*dh: one candidate, kept if it divides evenly and
// lies in 0..BH-1 (the same along x). Range: (W, N*C*H).
__kernel void fold(__global const float *cols, __global float *image, GEOMETRY)
{
    const int x = get_global_id(0), line = get_global_id(1);
    if (x >= W)
        return;
    const int y = line % H, plane = line / H;
    float sum = 0.0f;
    for (int i = 0; i < kh; ++i) {
        const int ty = y + ph - i * dh;
        if (ty < 0 || ty % sh != 0 || ty / sh >= BH)
            continue;
        for (int j = 0; j < kw; ++j) {
            const int tx = x + pw - j * dw;
            if (tx < 0 || tx % sw != 0 || tx / sw >= BW)
                continue;
            const long row = ((long)plane * kh + i) * kw + j;
            sum += cols[row * BH * BW + (ty / sh) * BW + tx / sw];
        }
    }
    image[(long)line * W + x] = sum;
}
