// Local response normalisation (nn.LocalResponseNorm): x is (N, C, inner) with inner the
// product of the spatial dims. One work-item per element sums the squares of the channels
// c - before .. c + after (missing channels are zeros) and divides:
//     y = x / (k + alpha_over_size * sum) ^ beta
// Windows of neighbouring channels overlap, so each square is read `size` times; LRN windows
// are a few channels wide, which makes that cheaper than a separate pass for running sums.

__kernel void local_response_norm(__global const float *x, __global float *y, const int n,
                                  const int C, const int inner, const int before,
                                  const int after, const float alpha_over_size,
                                  const float beta, const float k)
{
    const int i = get_global_id(0);
    if (i >= n)
        return;
    const int c = (i / inner) % C;
    const int first = max(c - before, 0), last = min(c + after, C - 1);
    __global const float *column = x + (i - c * inner);  // channel 0 at this position
    float energy = 0.0f;
    for (int j = first; j <= last; ++j) {
        const float v = column[j * inner];
        energy += v * v;
    }
    const float base = energy * alpha_over_size + k;
#if POSITIVE_BASE
    // k > 0 and alpha >= 0 (the host checked): base^beta = exp2(beta * log2(base)), which a CPU
    // driver vectorises; its pow() is a scalar library call, 7x slower on PoCL
    y[i] = x[i] / exp2(beta * log2(base));
#else
    y[i] = x[i] / pow(base, beta);
#endif
}
