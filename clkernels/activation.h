// activation.h: the helpers every activation expression may use (layers/opencl/activation.py).
// Included by activation.cl (one activation per kernel) and epilogue.h (an activation fused into
// the store of a convolution or GEMM), so both compute exactly the same formula.

#ifndef KUIPER_ACTIVATION_H
#define KUIPER_ACTIVATION_H

// Helpers the expressions share. Written so that exp() never sees a large positive argument.

// NaN stays NaN, as in PyTorch: OpenCL's fmin/fmax (and clamp, built on them) return the other
// operand when one is NaN, so `clamp(NaN, 0, 6)` is 0. Piecewise activations built on them
// wrap their formula in this.
inline float keep_nan(const float x, const float y) { return isnan(x) ? x : y; }

// 1 / (1 + e^-x): for x << 0, e^-x overflows to inf and the quotient is a correct 0.
inline float sigmoid(const float x) { return 1.0f / (1.0f + exp(-x)); }

// log(1 + e^(beta x)) / beta, and x itself above the threshold (as in PyTorch): there the two
// agree to float precision, and e^(beta x) would overflow.
inline float softplus(const float x, const float beta, const float threshold)
{
    const float bx = beta * x;
    return bx > threshold ? x : log1p(exp(bx)) / beta;
}

// log(sigmoid(x)) = min(x, 0) - log(1 + e^-|x|): only e^(non-positive) is ever computed.
inline float log_sigmoid(const float x) { return fmin(x, 0.0f) - log1p(exp(-fabs(x))); }

// GELU, x * Phi(x): exact with erf, or (use_tanh != 0) the tanh fit of the Gaussian CDF.
inline float gelu(const float x, const float use_tanh)
{
    if (isinf(x)) // x * Phi(x) is inf * 0 at -inf: NaN in PyTorch (both forms), and inf at +inf
        return x > 0.0f ? x : NAN;
    if (use_tanh != 0.0f)
        return 0.5f * x * (1.0f + tanh(0.7978845608f * (x + 0.044715f * x * x * x)));
    return 0.5f * x * (1.0f + erf(x * M_SQRT1_2_F));
}

#endif  // KUIPER_ACTIVATION_H
