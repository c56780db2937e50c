// F.affine_grid: grid[n, (d,) h, w, k] = theta[n, k, :] . (x_w, y_h, (z_d,) 1), the point an
// affine transform maps each output pixel to (layers/cpu/affine_grid.py has the maths).
// One work-item per grid value; dims is 2 (theta (N, 2, 3)) or 3 (theta (N, 3, 4)), and a
// 2-D grid is computed with depth D = 1.

// Normalised coordinate of pixel i of `size`: -1 .. 1 at the pixel centres (align_corners),
// or at the outer edges (otherwise); a lone pixel sits at 0.
inline float base_coordinate(const int i, const int size, const int align_corners)
{
    if (size <= 1)
        return 0.0f;
    const float centres = -1.0f + 2.0f * (float)i / (float)(size - 1);
    return align_corners ? centres : centres * ((float)(size - 1) / (float)size);
}

__kernel void affine_grid(__global const float *theta, __global float *grid, const int n,
                          const int dims, const int D, const int H, const int W,
                          const int align_corners)
{
    const int i = get_global_id(0);
    if (i >= n)
        return;
    const int k = i % dims;             // which output coordinate: x, y (, z)
    const int point = i / dims;
    const int w = point % W, h = (point / W) % H, d = (point / (W * H)) % D;
    const int batch = point / (W * H * D);
    __global const float *row = theta + (batch * dims + k) * (dims + 1);
    float value = row[0] * base_coordinate(w, W, align_corners)
                  + row[1] * base_coordinate(h, H, align_corners);
    if (dims == 3)
        value += row[2] * base_coordinate(d, D, align_corners);
    grid[i] = value + row[dims];
}
