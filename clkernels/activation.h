// activation.h: the helpers every activation expression may use (layers/opencl/activation.py).
// Included by activation.cl (one activation per kernel) and epilogue.h (an activation fused into
// the store of a convolution or GEMM), so both compute exactly the same formula.
//
// The helpers are macros, not functions, so that one expression works on a float and on a
// float8 or float16 alike: activation.cl and the CPU GEMM's store apply an activation to a
// whole vector register at once. That is what makes them fast under PoCL, which compiles
// exp(), tanh() or isnan() of a scalar to a call into its math library for every element, but
// exp() of a float8 to SIMD code (SiLU over 1.2M floats: 2.9 ms scalar, 0.56 ms as float8, on
// the 2-core development machine). For the same reason the formulas use comparisons where
// they can (x != x for "is NaN", 35x faster than isnan() there; a ?: instead of fmax or clamp).
// On vectors, `c ? a : b` with a vector condition chooses per component (OpenCL C's rule).
// Each argument may be evaluated more than once: pass plain values, not calls with effects.
// Being macros, their names (keep_nan, sigmoid, softplus, log_sigmoid, gelu) are taken in every
// kernel file that includes this one, directly or through epilogue.h / gemm.h.

#ifndef KUIPER_ACTIVATION_H
#define KUIPER_ACTIVATION_H

// NaN stays NaN, as in PyTorch: OpenCL's fmin/fmax (and clamp, built on them) return the other
// operand when one is NaN, so `clamp(NaN, 0, 6)` is 0. Formulas built on them are wrapped in
// keep_nan(x, formula). Only NaN compares unequal to itself.
#define keep_nan(x, y) ((x) != (x) ? (x) : (y))

// 1 / (1 + e^-x): for x << 0, e^-x overflows to inf and the quotient is a correct 0.
#define sigmoid(x) (1.0f / (1.0f + exp(-(x))))

// log(1 + e^(beta x)) / beta, and x itself above the threshold (as in PyTorch): there the two
// agree to float precision, and e^(beta x) would overflow.
#define softplus(x, beta, threshold) \
    ((beta) * (x) > (threshold) ? (x) : log1p(exp((beta) * (x))) / (beta))

// log(sigmoid(x)) = min(x, 0) - log(1 + e^-|x|): only e^(non-positive) is ever computed.
#define log_sigmoid(x) (fmin((x), 0.0f) - log1p(exp(-fabs(x))))

// GELU, x * Phi(x): exact with erf, or (use_tanh != 0) the tanh fit of the Gaussian CDF.
// x * Phi(x) is inf * 0 at -inf: NaN in PyTorch (both forms), and inf at +inf.
#define gelu(x, use_tanh) \
    (fabs(x) == INFINITY ? ((x) > 0.0f ? (x) : NAN) \
     : ((use_tanh) != 0.0f \
        ? 0.5f * (x) * (1.0f + tanh(0.7978845608f * ((x) + 0.044715f * (x) * (x) * (x)))) \
        : 0.5f * (x) * (1.0f + erf((x) * M_SQRT1_2_F))))

#endif  // KUIPER_ACTIVATION_H
