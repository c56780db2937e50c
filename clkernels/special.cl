// Special elementwise functions: torch.lgamma with OpenCL's built-in lgamma (float).
// (torch.positive needs no kernel: its output is a view of its input.)
__kernel void lgamma_f(__global const float *x, __global float *y, const int n)
{
    const int i = get_global_id(0);
    if (i < n)
        y[i] = lgamma(x[i]);
}
