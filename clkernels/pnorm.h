// Vector p-norms in pieces, shared by reduce.cl (torch.norm) and normalize.cl (F.normalize):
//
//     acc = pnorm_init();  for each element: acc = pnorm_fold(acc, |x|, p);
//     norm = pnorm_finish(pnorm_group(s, acc), p);
//
// PKIND (a build option) picks the norm at compile time, so the common p = 2 costs one
// multiply-add per element and no pow().

#ifndef PNORM_H
#define PNORM_H

#include "local_reduce.h"

#define P_TWO 0
#define P_ONE 1
#define P_INF 2    // max |x|
#define P_NINF 3   // min |x|
#define P_ZERO 4   // number of non-zeros
#define P_ANY 5    // (sum |x|^p)^(1/p)

#ifndef PKIND
#define PKIND P_TWO
#endif

inline float pnorm_init(void)
{
    return PKIND == P_NINF ? INFINITY : 0.0f;
}

inline float pnorm_fold(float acc, float a, float p)
{
#if PKIND == P_TWO
    return acc + a * a;
#elif PKIND == P_ONE
    return acc + a;
#elif PKIND == P_INF
    return fmax(acc, a);
#elif PKIND == P_NINF
    return fmin(acc, a);
#elif PKIND == P_ZERO
    return acc + (a != 0.0f ? 1.0f : 0.0f);
#else
    return acc + pow(a, p);
#endif
}

inline float pnorm_group(__local float *s, float acc)
{
#if PKIND == P_INF
    return wg_max(s, acc);
#elif PKIND == P_NINF
    return wg_min(s, acc);
#else
    return wg_sum(s, acc);
#endif
}

inline float pnorm_finish(float total, float p)
{
#if PKIND == P_TWO
    return sqrt(total);
#elif PKIND == P_ANY
    return pow(total, 1.0f / p);
#else
    return total;
#endif
}

#endif
