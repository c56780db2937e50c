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
// Being macros, their names (keep_nan, sigmoid, softplus, log_sigmoid, kuiper_erf and its
// KUIPER_ERF_ helpers, gelu) are taken in every kernel file that includes this one, directly or
// through epilogue.h / gemm.h.

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

// erf(v) from multiplies, adds and one exp, for PoCL: its erf() is a library call for every
// element even on vectors (1.2M values: 8.6 ms as floats, 1.5 ms as float8; exp of a float8:
// 0.28 ms). GELU is erf's user: ConvNeXt's first linear layers of each block spent as long in
// it as in their GEMM. Two pieces, with a = |v| (NaN stays NaN) clamped to 4, beyond which
// erf is 1 in float32:
//   a <= 1:      erf = a * A(a^2),              A fits erf(sqrt(t)) / sqrt(t) on t in [0, 1]
//   1 < a <= 4:  erf = 1 - exp(B(a) - a^2),     B fits log(erfc(a)) + a^2 on [1, 4]
// The polynomials were fitted for Kuiper by Chebyshev least squares (numpy.polynomial's
// chebfit, degrees 5 and 7 on 400 and 600 Chebyshev nodes) and written in powers for Horner's
// rule. Measured in float32 against math.erf on 2M points of [-5, 5]: at most 1.2e-7 off
// (2 units in the last place of 1.0), and 1.8e-7 relative below 1; tests/layers/
// test_activation.py holds GELU to it on every device (NVIDIA's erf is fast, but one formula
// everywhere keeps the backends' answers alike). Both pieces are computed and one is chosen,
// so the macro works on vectors (per component). The sign is put back with copysign, so the
// two pieces are written out once: as `v < 0 ? -erf(|v|) : erf(|v|)` they were written twice,
// and a GEMM that stores 64 values per work-item through a fused GELU inlines the macro 64
// times (on an H200, 6304 x 1536 x 384 with GELU took 1.08-1.31x its time without).
#define KUIPER_ERF_ABS(v) ((v) < 0.0f ? -(v) : (v))
#define KUIPER_ERF_CLAMP(a) ((a) > 4.0f ? 4.0f : (a))
#define KUIPER_ERF_A(t) \
    (((((-0.000565410592f * (t) + 0.00492327753f) * (t) - 0.026716385f) * (t) \
       + 0.112803645f) * (t) - 0.376123488f) * (t) + 1.12837911f)
#define KUIPER_ERF_B(a) \
    (((((((-1.33093899e-05f * (a) + 0.000317572034f) * (a) - 0.00343686761f) * (a) \
         + 0.0226219855f) * (a) - 0.103318982f) * (a) + 0.36090669f) * (a) - 1.1259259f) \
     * (a) - 0.000756968628f)
#define KUIPER_ERF_OF_ABS(a) \
    ((a) <= 1.0f ? (a) * KUIPER_ERF_A((a) * (a)) : 1.0f - exp(KUIPER_ERF_B(a) - (a) * (a)))
#define kuiper_erf(v) copysign(KUIPER_ERF_OF_ABS(KUIPER_ERF_CLAMP(KUIPER_ERF_ABS(v))), (v))

// GELU, x * Phi(x): exact with erf, or (use_tanh != 0) the tanh fit of the Gaussian CDF.
// x * Phi(x) is inf * 0 at -inf: NaN in PyTorch (both forms), and inf at +inf.
#define gelu(x, use_tanh) \
    (fabs(x) == INFINITY ? ((x) > 0.0f ? (x) : NAN) \
     : ((use_tanh) != 0.0f \
        ? 0.5f * (x) * (1.0f + tanh(0.7978845608f * ((x) + 0.044715f * (x) * (x) * (x)))) \
        : 0.5f * (x) * (1.0f + kuiper_erf((x) * M_SQRT1_2_F))))

#endif  // KUIPER_ACTIVATION_H
