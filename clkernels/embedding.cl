// Embedding: y[k, j] = table[index[k], j], one work-item per output element (k = i / dim).
// INDEX_T is long (int64 indices, the usual) or int, set by the host. An index outside
// [0, rows) cannot raise an error inside a kernel: it yields zeros and never reads outside the
// table (the CPU layer reports it as an error).
#ifndef INDEX_T
#define INDEX_T long
#endif

__kernel void embedding(__global const INDEX_T *index, __global const float *table,
                        __global float *y, const int n, const int dim, const int rows)
{
    const int i = get_global_id(0);
    if (i >= n)
        return;
    const INDEX_T row = index[i / dim];
    y[i] = (row >= 0 && row < rows) ? table[(long)row * dim + i % dim] : 0.0f;
}
