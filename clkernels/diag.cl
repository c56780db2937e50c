// torch.diag, one work-item per output element. Build with -DT=<move type>.
// Good for turning a vector into a (shifted) diagonal matrix, or reading a matrix's diagonal.

// vector x (n) -> matrix y (side x side), y[r, c] = x[min(r, c)] where c - r == k, else 0.
__kernel void diag_embed(__global const T *x, __global T *y, const int side, const int k,
                         const int n)
{
    const int i = get_global_id(0);
    if (i >= n)
        return;
    const int r = i / side, c = i - r * side;
    y[i] = (c - r == k) ? x[min(r, c)] : (T)0;
}

// matrix x (rows x cols) -> y (n): y[j] = x[j + max(0, -k), j + max(0, k)].
__kernel void diag_extract(__global const T *x, __global T *y, const int cols, const int k,
                           const int n)
{
    const int j = get_global_id(0);
    if (j < n)
        y[j] = x[(j + max(0, -k)) * cols + j + max(0, k)];
}
