// torch.where / masked_fill (y = c ? a : b) and comparisons (y = a OP b), with broadcasting.
//
// One work-item per output element. With FLAT every operand has the output's shape and the
// element index is the offset. Otherwise `meta` holds, for ndim dims,
//     meta[0 .. ndim)          output shape
//     meta[ndim .. 2 ndim)     strides of c    (0 along broadcast dims)
//     meta[2 ndim .. 3 ndim)   strides of a
//     meta[3 ndim .. 4 ndim)   strides of b
// and the index is decomposed once, innermost dim first, to find all three elements.
// Scalars pnnx wrote as parameters arrive as one-element buffers with all strides 0.
//
// Build options: TC, TA, TB (operand types), TO (output type), CT (type both sides of a
// comparison are converted to), WHERE (1: select, 0: compare), CMP (which comparison).

#define CMP_GT 0
#define CMP_LT 1
#define CMP_GE 2
#define CMP_LE 3
#define CMP_EQ 4
#define CMP_NE 5
#if CMP == CMP_GT
#define OP >
#elif CMP == CMP_LT
#define OP <
#elif CMP == CMP_GE
#define OP >=
#elif CMP == CMP_LE
#define OP <=
#elif CMP == CMP_EQ
#define OP ==
#else
#define OP !=
#endif

__kernel void where_compare(__global const TC *c, __global const TA *a, __global const TB *b,
                            __global TO *y, __global const int *meta, const int ndim,
                            const int n)
{
    const int i = get_global_id(0);
    if (i >= n)
        return;
    int ic = i, ia = i, ib = i;
#if !FLAT
    ic = ia = ib = 0;
    int rest = i;
    for (int d = ndim - 1; d >= 0; --d) {
        const int k = rest % meta[d];
        rest /= meta[d];
        ic += k * meta[ndim + d];
        ia += k * meta[2 * ndim + d];
        ib += k * meta[3 * ndim + d];
    }
#endif
#if WHERE
    y[i] = c[ic] ? (TO)a[ia] : (TO)b[ib];
#else
    y[i] = (TO)((CT)a[ia] OP (CT)b[ib]);
#endif
}
