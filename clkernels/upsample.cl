// One separable resize pass along one dim: x is (outer, n_in, inner), y is (outer, n_out, inner).
//
// Output index o along the dim reads the TAPS input indices idx[o*TAPS + k] and weighs them by
// w[o*TAPS + k] (layers/cpu/upsample.py computes both tables on the host, in PyTorch's float32
// arithmetic, and uploads them once). A 2-D bilinear resize is two passes, W then H.
// Build with -DTAPS=1 (nearest: a plain copy, any element type T) or 2 / 4 (linear / cubic).
#ifndef T
#define T float
#endif

__kernel void resample(__global const T *x, __global T *y, __global const int *idx,
                       __global const float *w, const int n_in, const int n_out,
                       const int inner, const int n)
{
    const int i = get_global_id(0);
    if (i >= n)
        return;
    const int c = i % inner;
    const int t = i / inner;
    const int o = t % n_out;
    __global const T *line = x + (t / n_out) * n_in * inner + c;  // x[outer, :, c]
#if TAPS == 1
    y[i] = line[idx[o] * inner];
#else
    const int k0 = o * TAPS;
    float acc = line[idx[k0] * inner] * w[k0];
    for (int k = 1; k < TAPS; ++k)
        acc += line[idx[k0 + k] * inner] * w[k0 + k];
    y[i] = acc;
#endif
}
