// PReLU: y = x > 0 ? x : slope * x, one work-item per element. With one slope (`n_slopes` == 1)
// every element shares it; otherwise element i is in channel (i / inner) % channels.
__kernel void prelu(__global const float *x, __global float *y, __global const float *slopes,
                    const int n, const int channels, const int inner, const int n_slopes)
{
    const int i = get_global_id(0);
    if (i >= n)
        return;
    const float v = x[i];
    const float a = n_slopes == 1 ? slopes[0] : slopes[(i / inner) % channels];
    y[i] = v > 0.0f ? v : a * v;
}
