// Swish2 on OpenCL: one work-item per element of an (N, C, *rest) tensor.
// alpha holds one value per channel; the channel of element i is (i / inner) % channels.
__kernel void swish2(__global const float *x, __global float *y, __global const float *alpha,
                     const float beta, const int n, const int channels, const int inner) {
    const int i = get_global_id(0);
    if (i >= n) return;
    const float v = x[i];
    const float a = alpha[(i / inner) % channels];
    y[i] = beta * v / (1.0f + exp(-a * v));  // x * sigmoid(a * x); NaN stays NaN
}
