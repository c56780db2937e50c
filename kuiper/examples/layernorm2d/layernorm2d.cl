// LayerNorm2d on OpenCL: layer normalisation over the channels of an (N, C, H, W) tensor, the
// normalisation of ConvNeXt-style networks (kuiper/examples/layernorm2d/modules.py).
//
// One work-item per pixel (n, h, w): it reads the C values of its pixel, `inner` = H * W floats
// apart. Neighbouring work-items take neighbouring pixels, so at every step of the loops they
// read neighbouring addresses: on a GPU, one wide memory transaction serves a whole group.
// Two passes over the channels (the mean, then the spread around it), as the CPU layer does:
// the one-pass E[x^2] - E[x]^2 loses every digit when the mean is large against the spread.
__kernel void layernorm2d(__global const float *x, __global float *y,
                          __global const float *weight, __global const float *bias,
                          const float eps, const int pixels, const int channels,
                          const int inner) {
    const int p = get_global_id(0);
    if (p >= pixels) return;  // the global size was rounded up to a multiple of 64
    // The first of the pixel's values: image p / inner, position p % inner within the plane
    const int first = (p / inner) * channels * inner + p % inner;

    float sum = 0.0f;
    for (int c = 0; c < channels; ++c) sum += x[first + c * inner];
    const float mean = sum / channels;

    float squares = 0.0f;
    for (int c = 0; c < channels; ++c) {
        const float d = x[first + c * inner] - mean;
        squares += d * d;
    }
    const float inv_std = 1.0f / sqrt(squares / channels + eps);

    for (int c = 0; c < channels; ++c) {
        const int i = first + c * inner;
        y[i] = (x[i] - mean) * (weight[c] * inv_std) + bias[c];
    }
}
