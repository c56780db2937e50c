// Reductions: one work-group per output element.
//
// Input element r of output o lives at x[base[o] + inner[r]] (tables built on the host, see
// layers/common/reduce_axes.py); with CONTIG the reduced axes are the trailing ones and inner[r] == r.
// Each work-item folds the elements r = l, l + WG, l + 2*WG, ... into a private partial result,
// then the group combines the WG partials in local memory (clkernels/local_reduce.h).
//
// Build options: MODE (one of the codes below), T (input type), ACC (accumulator type),
// OUT (values output type), WG (local size, a power of two), CONTIG, and for MODE_NORM the
// norm kind PKIND (clkernels/pnorm.h).

#define MODE_SUM 0
#define MODE_MEAN 1
#define MODE_PROD 2
#define MODE_MAX 3         // amax/amin and max/min: values and/or indices
#define MODE_MIN 4
#define MODE_LOGSUMEXP 5
#define MODE_VAR 6
#define MODE_STD 7
#define MODE_NORM 8

#if MODE == MODE_NORM
#include "pnorm.h"         // p-norm pieces; also includes local_reduce.h
#else
#include "local_reduce.h"  // wg_sum, wg_max, wg_arg_best ... over ACC
#endif

#if CONTIG
#define AT(r) x[b + (r)]
#else
#define AT(r) x[b + inner[r]]
#endif

__kernel void reduce(__global const T *x, __global const int *base, __global const int *inner,
                     const int n, __global OUT *y, __global long *yi, const float p,
                     const float divisor)
{
    const int o = get_group_id(0);
    const int l = get_local_id(0);
    const int b = base[o];
    __local ACC s[WG];

#if MODE == MODE_SUM || MODE == MODE_MEAN
    ACC acc = 0;
    for (int r = l; r < n; r += WG)
        acc += (ACC)AT(r);
    const ACC total = wg_sum(s, acc);
    if (l == 0)
        y[o] = (OUT)(MODE == MODE_MEAN ? total / (ACC)n : total);

#elif MODE == MODE_PROD
    ACC acc = 1;
    for (int r = l; r < n; r += WG)
        acc *= (ACC)AT(r);
    const ACC total = wg_prod(s, acc);
    if (l == 0)
        y[o] = (OUT)total;

#elif MODE == MODE_MAX || MODE == MODE_MIN
    // Start from element 0: it is a real member of the set, so no "identity" value (which
    // would differ per type) is needed, and its index 0 loses no tie.
    __local int si[WG];
    ACC best = (ACC)AT(0);
    int best_i = 0;
    for (int r = l; r < n; r += WG) {
        const ACC v = (ACC)AT(r);
        if (MODE == MODE_MAX ? BEATS_MAX(v, best) : BEATS_MIN(v, best)) {
            best = v;
            best_i = r;
        }
    }
    ACC value;
    int index;
    wg_arg_best(s, si, best, best_i, MODE == MODE_MAX, &value, &index);
    if (l == 0) {
#if WANT_VALUES
        y[o] = (OUT)value;
#endif
#if WANT_INDICES
        yi[o] = (long)index;
#endif
    }

#elif MODE == MODE_LOGSUMEXP
    // log(sum(exp(x))) = m + log(sum(exp(x - m))) with m = max(x): no overflow in exp.
    ACC m = (ACC)AT(0);
    for (int r = l; r < n; r += WG)
        m = fmax(m, (ACC)AT(r));
    m = wg_max(s, m);
    const ACC shift = isinf(m) ? 0.0f : m;
    ACC acc = 0;
    for (int r = l; r < n; r += WG)
        acc += exp((ACC)AT(r) - shift);
    const ACC total = wg_sum(s, acc);
    if (l == 0)
        y[o] = (OUT)(log(total) + shift);

#elif MODE == MODE_VAR || MODE == MODE_STD
    // Two passes over the (cached) data: the mean, then the squared deviations from it.
    // Cheaper one-pass formulas (E[x^2] - E[x]^2) lose digits to cancellation.
    ACC acc = 0;
    for (int r = l; r < n; r += WG)
        acc += (ACC)AT(r);
    const ACC mean = wg_sum(s, acc) / (ACC)n;
    ACC dev = 0;
    for (int r = l; r < n; r += WG) {
        const ACC d = (ACC)AT(r) - mean;
        dev += d * d;
    }
    const ACC var = wg_sum(s, dev) / divisor;   // divisor = N - correction (0 gives inf/nan)
    if (l == 0)
        y[o] = (OUT)(MODE == MODE_STD ? sqrt(var) : var);

#elif MODE == MODE_NORM
    float acc = pnorm_init();
    for (int r = l; r < n; r += WG)
        acc = pnorm_fold(acc, fabs((float)AT(r)), p);
    const float total = pnorm_finish(pnorm_group(s, acc), p);
    if (l == 0)
        y[o] = (OUT)total;
#endif
}
