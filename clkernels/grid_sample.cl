// F.grid_sample: read x (N, C, D, H, W) at the points of a grid (N, P, dims) given in
// normalised [-1, 1] coordinates (x, y(, z)); layers/cpu/grid_sample.py has the maths.
// A 4-D input arrives as depth D = 1 with dims = 2, its points at z = 0.
// One work-item per output point: the coordinates and weights are computed once, then every
// channel is read at them. Build options (indices into the CPU layer's MODES / PADDING_MODES):
//     MODE    0 bilinear, 1 nearest, 2 bicubic (4-D only)
//     PADDING 0 zeros, 1 border, 2 reflection

#define BILINEAR 0
#define NEAREST 1
#define BICUBIC 2
#define ZEROS 0
#define BORDER 1
#define REFLECTION 2

// [-1, 1] to a pixel coordinate: -1/1 are the edge pixels' centres (align_corners) or their
// outer edges (otherwise).
inline float unnormalize(const float coord, const int size, const int align_corners)
{
    return align_corners ? (coord + 1.0f) / 2.0f * (float)(size - 1)
                         : ((coord + 1.0f) * (float)size - 1.0f) / 2.0f;
}

// Mirror `coord` into [twice_low / 2, twice_high / 2] (the bounds are doubled to stay ints).
inline float reflect(float coord, const int twice_low, const int twice_high)
{
    if (twice_low == twice_high)
        return 0.0f;
    const float low = (float)twice_low / 2.0f;
    const float span = (float)(twice_high - twice_low) / 2.0f;
    coord = fabs(coord - low);
    const float extra = fmod(coord, span);
    const int flips = (int)floor(coord / span);
    return (flips % 2 == 0) ? extra + low : span - extra + low;
}

// Where the padding mode sends a coordinate (zeros leaves it: reads outside give 0).
inline float pad_coordinate(float coord, const int size, const int align_corners)
{
#if PADDING == REFLECTION
    coord = align_corners ? reflect(coord, 0, 2 * (size - 1)) : reflect(coord, -1, 2 * size - 1);
#endif
#if PADDING != ZEROS
    coord = clamp(coord, 0.0f, (float)(size - 1));
#endif
    return coord;
}

// A tap at integer (z, y, x): its offset in a channel's volume and its weight, which becomes 0
// outside the volume (padding_mode zeros; the other modes never get there). Taps are computed
// once per point, then reused for every channel.
inline void tap(const int z, const int y, const int x, const float weight, const int D,
                const int H, const int W, long *offset, float *tap_weight)
{
    const bool inside = z >= 0 && z < D && y >= 0 && y < H && x >= 0 && x < W;
    *offset = inside ? ((long)z * H + y) * W + x : 0;
    *tap_weight = inside ? weight : 0.0f;
}

// Keys' cubic convolution weights (A = -0.75) of the taps at -1, 0, 1, 2 for fraction t.
inline float4 cubic_weights(const float t)
{
    const float A = -0.75f;
#define NEAR(x) ((((A + 2.0f) * (x) - (A + 3.0f)) * (x) * (x)) + 1.0f)
#define FAR(x) ((((A * (x) - 5.0f * A) * (x) + 8.0f * A) * (x)) - 4.0f * A)
    return (float4)(FAR(t + 1.0f), NEAR(t), NEAR(1.0f - t), FAR(2.0f - t));
#undef NEAR
#undef FAR
}

#if MODE == BICUBIC
#define TAPS 16
#elif MODE == NEAREST
#define TAPS 1
#else
#define TAPS 8
#endif

__kernel void grid_sample(__global const float *x, __global const float *grid,
                          __global float *y, const int points, const int out_spatial,
                          const int C, const int dims, const int D, const int H, const int W,
                          const int align_corners)
{
    const int p = get_global_id(0);
    if (p >= points)
        return;
    const int batch = p / out_spatial, s = p % out_spatial;
    __global const float *g = grid + (long)p * dims;
    float fx = unnormalize(g[0], W, align_corners);
    float fy = unnormalize(g[1], H, align_corners);
    float fz = dims == 3 ? unnormalize(g[2], D, align_corners) : 0.0f;

    long offsets[TAPS];
    float weights[TAPS];
    int taps = TAPS;
#if MODE == BICUBIC
    const float x0 = floor(fx), y0 = floor(fy);
    const float4 cx = cubic_weights(fx - x0), cy = cubic_weights(fy - y0);
    const float wx[4] = {cx.x, cx.y, cx.z, cx.w}, wy[4] = {cy.x, cy.y, cy.z, cy.w};
    // the padding moves each tap (not the point), as in PyTorch
    int tx[4], ty[4];
    for (int k = 0; k < 4; ++k) {
        tx[k] = (int)pad_coordinate(x0 - 1.0f + k, W, align_corners);
        ty[k] = (int)pad_coordinate(y0 - 1.0f + k, H, align_corners);
    }
    for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j)
            tap(0, ty[i], tx[j], wy[i] * wx[j], D, H, W, &offsets[i * 4 + j],
                &weights[i * 4 + j]);
#else
    fx = pad_coordinate(fx, W, align_corners);
    fy = pad_coordinate(fy, H, align_corners);
    if (dims == 3)
        fz = pad_coordinate(fz, D, align_corners);
#if MODE == NEAREST
    tap((int)rint(fz), (int)rint(fy), (int)rint(fx), 1.0f, D, H, W, &offsets[0], &weights[0]);
#else
    // (tri)linear: the 2^dims corners around the point (a 4-D input's lie in the z = 0 plane)
    const float x0 = floor(fx), y0 = floor(fy), z0 = floor(fz);
    const float tx = fx - x0, ty = fy - y0, tz = fz - z0;
    taps = 1 << dims;
    for (int corner = 0; corner < taps; ++corner) {
        const int dz = corner >> 2, dy = (corner >> 1) & 1, dx = corner & 1;
        const float weight = (dz ? tz : 1.0f - tz) * (dy ? ty : 1.0f - ty) * (dx ? tx : 1.0f - tx);
        tap((int)z0 + dz, (int)y0 + dy, (int)x0 + dx, weight, D, H, W, &offsets[corner],
            &weights[corner]);
    }
#endif
#endif
    const long volume_size = (long)D * H * W;
    for (int c = 0; c < C; ++c) {
        __global const float *volume = x + ((long)batch * C + c) * volume_size;
        float total = 0.0f;
        for (int t = 0; t < taps; ++t)
            total += weights[t] * volume[offsets[t]];
        y[((long)batch * C + c) * out_spatial + s] = total;
    }
}
