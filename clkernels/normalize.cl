// F.normalize: y = x / max(||x||_p, eps) along one dim; one work-group per vector.
// (Not named `normalize`: that is an OpenCL built-in function.)
//
// The input is seen as (outer, n, inner) with the normalized dim in the middle: vector o starts
// at (o / inner) * n * inner + o % inner and its elements are `inner` apart. The group first
// reduces the norm in local memory (clkernels/pnorm.h), then every work-item scales its share.
// Build options: WG (local size, a power of two), PKIND (which p-norm).

#include "pnorm.h"

__kernel void normalize_lp(__global const float *x, __global float *y, const int n,
                        const int inner, const float p, const float eps)
{
    const int o = get_group_id(0);
    const int l = get_local_id(0);
    const int start = (o / inner) * n * inner + o % inner;
    __local float s[WG];

    float acc = pnorm_init();
    for (int r = l; r < n; r += WG)
        acc = pnorm_fold(acc, fabs(x[start + r * inner]), p);
    const float denom = fmax(pnorm_finish(pnorm_group(s, acc), p), eps);
    for (int r = l; r < n; r += WG)
        y[start + r * inner] = x[start + r * inner] / denom;
}
