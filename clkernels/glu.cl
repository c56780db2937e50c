// GLU: the input is (outer, 2 * half_len, inner); y[o, j, i] = a * sigmoid(b) with
// a = x[o, j, i] and b = x[o, j + half_len, i]. One work-item per output element.
__kernel void glu(__global const float *x, __global float *y, const int half_len, const int inner,
                  const int n)
{
    const int i = get_global_id(0);
    if (i < n) {
        const int in_row = i % inner;
        const int j = (i / inner) % half_len;
        const int o = i / (inner * half_len);
        const int a = (o * 2 * half_len + j) * inner + in_row;
        // 1 / (1 + e^-b): for very negative b, e^-b is inf and the gate a correct 0.
        y[i] = x[a] / (1.0f + exp(-x[a + half_len * inner]));
    }
}
