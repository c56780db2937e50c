// ReLU: one work-item per element. `n` guards the tail when the global size is rounded up.
//
// Written as a comparison, not fmax(v, 0.0f): a comparison with NaN is false, so NaN passes
// through as in PyTorch, where OpenCL's fmax would return 0.
__kernel void relu(__global const float *x, __global float *y, const int n)
{
    const int i = get_global_id(0);
    if (i < n) {
        const float v = x[i];
        y[i] = v < 0.0f ? 0.0f : v;
    }
}
