// Helpers for the kernels generated from pnnx.Expression (layers/opencl_helpers/expression_codegen.py).
//
// OpenCL C has `/`, `%`, fmod, pow ... but with C's semantics, while an expression means
// PyTorch's (which follows Python):
//
//   floor_divide   rounds toward -inf:  -7 // 2 == -4   (C: -7 / 2 == -3)
//   remainder      takes the divisor's sign: -7 % 2 == 1   (C: -7 % 2 == -1)
//   max / min      propagate NaN   (OpenCL's fmax/fmin return the other operand), and give
//                  the first operand on a tie, as PyTorch's scalar kernels do (signed zeros)
//   sign           0.0 for -0.0 and NaN  (OpenCL's sign(-0.0) is -0.0)
//   lshift/rshift  shifting by the width or more gives 0 (or -1)   (C: undefined)
//   pow of ints    exact integer powers; 2 ** -1 == 0 as in PyTorch
//   round          half to even: that is rint() (OpenCL's round() goes half away from zero)
//
// OpenCL C has no overloading, so each helper is stamped out once per type by a macro and
// named with the type: floor_divide_long, floor_divide_float ... The generator picks the name.
// An integer division by zero, which PyTorch reports as an error, gives 0 here: a kernel
// cannot raise, and 0 is what NumPy gives.

#ifndef KUIPER_EXPRESSION_H
#define KUIPER_EXPRESSION_H

// T: the integer type, U: its unsigned twin (shifting signed negatives left is undefined in C).
#define EXPRESSION_INT_HELPERS(T, U)                                                          \
    T floor_divide_##T(T a, T b)                                                              \
    {                                                                                         \
        if (b == 0)                                                                           \
            return 0;                                                                         \
        T q = a / b;                                   /* C truncates toward zero ... */      \
        if (a % b != 0 && ((a < 0) != (b < 0)))        /* ... so step down when signs differ */\
            q -= 1;                                                                           \
        return q;                                                                             \
    }                                                                                         \
    T remainder_##T(T a, T b)                                                                 \
    {                                                                                         \
        if (b == 0)                                                                           \
            return 0;                                                                         \
        T r = a % b;                                                                          \
        if (r != 0 && ((r < 0) != (b < 0)))            /* give r the divisor's sign */        \
            r += b;                                                                           \
        return r;                                                                             \
    }                                                                                         \
    T fmod_##T(T a, T b)                                                                      \
    {                                                                                         \
        return b == 0 ? (T)0 : (T)(a % b);                                                    \
    }                                                                                         \
    T lshift_##T(T a, T b)                                                                    \
    {                                                                                         \
        if (b < 0 || b >= (T)(sizeof(T) * 8))                                                 \
            return 0;                                                                         \
        return (T)((U)a << b);                                                                \
    }                                                                                         \
    T rshift_##T(T a, T b)                                                                    \
    {                                                                                         \
        if (b < 0 || b >= (T)(sizeof(T) * 8))                                                 \
            return a < 0 ? (T)-1 : (T)0;                                                      \
        return (T)(a >> b);                                                                   \
    }                                                                                         \
    T pow_##T(T a, T b)                                                                       \
    {                                                                                         \
        if (b < 0) /* the integer part of a ** b */                                           \
            return a == 1 ? (T)1 : a == (T)-1 ? ((b & 1) ? (T)-1 : (T)1) : (T)0;              \
        T result = 1;                                                                         \
        while (b != 0) { /* square-and-multiply */                                            \
            if (b & 1)                                                                        \
                result *= a;                                                                  \
            b >>= 1;                                                                          \
            a *= a;                                                                           \
        }                                                                                     \
        return result;                                                                        \
    }

EXPRESSION_INT_HELPERS(char, uchar)
EXPRESSION_INT_HELPERS(uchar, uchar)
EXPRESSION_INT_HELPERS(short, ushort)
EXPRESSION_INT_HELPERS(int, uint)
EXPRESSION_INT_HELPERS(long, ulong)

#define EXPRESSION_FLOAT_HELPERS(T)                                                           \
    T floor_divide_##T(T a, T b)                                                              \
    {                                                                                         \
        if (b == 0)                                                                           \
            return a / b;                              /* inf or nan */                       \
        T mod = fmod(a, b);                                                                   \
        T div = (a - mod) / b;                         /* exact multiple: no rounding error */\
        if (mod != 0 && ((b < 0) != (mod < 0)))                                               \
            div -= 1;                                                                         \
        if (div == 0)                                                                         \
            return copysign((T)0, a / b);                                                     \
        T floored = floor(div);                                                               \
        return div - floored > (T)0.5 ? floored + 1 : floored;                                \
    }                                                                                         \
    T remainder_##T(T a, T b)                                                                 \
    {                                                                                         \
        T r = fmod(a, b);                                                                     \
        if (r != 0 && ((b < 0) != (r < 0)))                                                   \
            r += b;                                                                           \
        return r;                                                                             \
    }                                                                                         \
    T maximum_##T(T a, T b)                    /* a on a tie: max(0.0, -0.0) is 0.0 */        \
    {                                                                                         \
        return isnan(a) ? a : isnan(b) ? b : a < b ? b : a;                                   \
    }                                                                                         \
    T minimum_##T(T a, T b)                    /* a on a tie: min(-0.0, 0.0) is -0.0 */       \
    {                                                                                         \
        return isnan(a) ? a : isnan(b) ? b : b < a ? b : a;                                   \
    }                                                                                         \
    T logaddexp_##T(T a, T b)                                                                 \
    {                                                                                         \
        if (isinf(a) && a == b)                        /* inf - inf would give nan */         \
            return a;                                                                         \
        return fmax(a, b) + log1p(exp(-fabs(a - b)));  /* log(e^a + e^b) without overflow */  \
    }

EXPRESSION_FLOAT_HELPERS(float)

#ifdef cl_khr_fp64
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
EXPRESSION_FLOAT_HELPERS(double)
#endif

#endif // KUIPER_EXPRESSION_H
