// grouped_mm.cl: aten::_grouped_mm, one matrix product per group of rows (or per batch item).
//
// Good for: a mixture-of-experts layer's expert products (Mixtral in Hugging Face transformers
// 5), where each expert multiplies only the tokens sent to it. layers/opencl/grouped_mm.py binds
// it for every case the operator takes here. One work-item per output value, its dot product
// along K in a loop: simple and exact to the float32 sums, not a tuned GEMM (an expert layer
// at scale would want gemm.h's tiles per group).
//
// Rows (OFFS=1): row r belongs to the first group g with r < offs[g] (offs: each group's end,
// non-decreasing, read as OFFS_T, which may be float: a cumsum of histc's counts); a row past
// the last end belongs to no group and is 0. Offsets out of order, which the CPU layer refuses,
// cannot be refused here (a kernel has no way to fail): each row still goes to the first group
// whose end is past it. Batch (OFFS=0): item g of x times weight g.
// Global size (N, M, groups for a batch), rounded up.

__kernel void grouped_mm(__global const float *x, __global const float *w,
                         __global const OFFS_T *offs, __global float *y,
                         const int m, const int n, const int k, const int groups)
{
    const int j = get_global_id(0), r = get_global_id(1), z = get_global_id(2);
    if (j >= n || r >= m)
        return;
#if OFFS
    int g = 0;
    while (g < groups && (float)r >= (float)offs[g])   // the first group that ends after r
        g++;
    __global const float *row = x + (long)r * k;
    __global float *out = y + (long)r * n + j;
    if (g == groups) {   // past the last group's end: no group, no product
        *out = 0.0f;
        return;
    }
#else
    const int g = z;
    __global const float *row = x + ((long)g * m + r) * k;
    __global float *out = y + ((long)g * m + r) * n + j;
#endif
    __global const float *col = w + (long)g * k * n + j;
    float sum = 0.0f;
    for (int i = 0; i < k; i++)
        sum += row[i] * col[(long)i * n];
    *out = sum;
}
