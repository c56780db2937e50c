// ReLU: one work-item per element. `n` guards the tail when the global size is rounded up.
__kernel void relu(__global const float *x, __global float *y, const int n)
{
    const int i = get_global_id(0);
    if (i < n)
        y[i] = fmax(x[i], 0.0f);
}
