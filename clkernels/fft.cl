// The FFT on OpenCL: a mixed-radix Stockham FFT, with a direct DFT for large prime factors.
//
// Good for: every torch.fft.* operator (layers/opencl/fft.py) and STFT / ISTFT
// (layers/opencl/stft.py), on complex64 data read as float2 (x = real, y = imaginary: the
// bytes of NumPy's complex64). Any length works; lengths made of small primes (2, 3, 5, 7)
// are fast, and a length with a large prime factor p costs O(n p) for that factor (a prime
// length is a plain direct DFT, O(n^2)). Bluestein's algorithm would make those O(n log n)
// too; it is not here, to keep this file small.
//
// How the FFT works (the Stockham "autosort" formulation). Split n = p1 * p2 * ... into
// radices. Pass number s takes the array made of n / ns interleaved transforms of length ns
// (ns = p1 * ... * p(s-1), 1 at the start) and combines p of them into transforms of length
// ns * p, with the radix p = ps of this pass:
//
//     y[g*ns*p + q*ns + k] = sum_{r < p} x[g*ns + k + r*(n/p)] * w^(r * (k + q*ns))
//     w = e^(sign * 2 pi i / (ns * p)),  0 <= k < ns,  0 <= q < p,  0 <= g < n / (ns * p)
//
// (the twiddle factor w^(r*k) and the p-point DFT w^(r*q*ns) in one power). After the last
// pass ns = n and y is the DFT in natural order: unlike the textbook Cooley-Tukey FFT there is
// no bit-reversal step, because every pass reads from one buffer and writes to the other
// (the host swaps them). A pass costs n * p complex multiply-adds, so small radices (4, 2, 3,
// 5) make the whole FFT O(n log n); if n is prime there is a single pass with p = n, which is
// exactly the direct DFT  y[q] = sum_r x[r] e^(sign 2 pi i r q / n).
//
// The other kernels prepare and finish a transform: resize the input into the complex work
// buffer (fft_load_*), rebuild a full Hermitian spectrum for complex -> real transforms
// (fft_hermitian_extend), and scale, conjugate or cut the result into the output (fft_store_*).
#include "strided.h"

inline float2 cmul(const float2 a, const float2 b)
{
    return (float2)(a.x * b.x - a.y * b.y, a.x * b.y + a.y * b.x);
}

// One Stockham pass along one dim of a (outer, n, inner) array: work-item (t, line) writes
// output element t of line `line` (line = outer index * inner + inner index).
// sign = -1 for the forward transform, +1 for the inverse (unscaled either way).
// roots[m] = e^(2 pi i m / n), computed on the host in double precision: a power of
// w = e^(sign 2 pi i / span) is roots[m * (n / span)] (span divides n), conjugated when
// sign = -1. A table lookup is both faster and more accurate than sin and cos in the loop.
__kernel void fft_pass(__global const float2 *src, __global float2 *dst,
                       __global const float2 *roots, const int n, const int inner, const int p,
                       const int ns, const int sign)
{
    const int t = get_global_id(0);
    const int line = get_global_id(1);
    const long base = (long)(line / inner) * n * inner + line % inner;
    const int k = t % ns;              // position inside a transform of length ns
    const int q = (t / ns) % p;        // which of the p outputs of the radix-p DFT
    const int g = t / (ns * p);        // which group of p transforms is being combined
    const int j = g * ns + k;          // input r of this butterfly is element j + r * (n / p)
    const int span = ns * p;
    const int step = n / span;
    const int stride = n / p;
    float2 acc = (float2)(0.0f, 0.0f);
    for (int r = 0; r < p; ++r) {
        const float2 x = src[base + (long)(j + r * stride) * inner];
        const float2 w = roots[(int)(((long)r * (k + q * ns)) % span) * step];
        acc += cmul(x, (float2)(w.x, sign * w.y));
    }
    dst[base + (long)t * inner] = acc;
}

// Address in the input of work element i, or -1 where the resized input is zero padding.
// meta = [work shape (rank), input shape (rank), input strides (rank)], in elements.
inline long resized_offset(int i, __global const int *meta, const int rank)
{
    long offset = 0;
    for (int d = rank - 1; d >= 0; --d) {
        const int c = i % meta[d];
        i /= meta[d];
        if (c >= meta[rank + d])
            return -1;
        offset += (long)c * meta[2 * rank + d];
    }
    return offset;
}

// The input resized (zero-padded or cut) to the work shape, as complex numbers.
__kernel void fft_load_real(__global const float *x, __global float2 *work,
                            __global const int *meta, const int rank, const int n)
{
    const int i = get_global_id(0);
    if (i < n) {
        const long at = resized_offset(i, meta, rank);
        work[i] = (float2)(at < 0 ? 0.0f : x[at], 0.0f);
    }
}

// The same for a complex input; conjugate = 1 conjugates it (hfft).
__kernel void fft_load_complex(__global const float2 *x, __global float2 *work,
                               __global const int *meta, const int rank, const int conjugate,
                               const int n)
{
    const int i = get_global_id(0);
    if (i < n) {
        const long at = resized_offset(i, meta, rank);
        const float2 v = at < 0 ? (float2)(0.0f, 0.0f) : x[at];
        work[i] = conjugate ? (float2)(v.x, -v.y) : v;
    }
}

// Complex -> real transforms keep only bins 0..n/2 of a Hermitian spectrum (X[n-k] is the
// conjugate of X[k]). Rebuild all n bins along one dim: src is (outer, n/2 + 1, inner),
// dst is (outer, n, inner). An inverse FFT of dst then has a zero imaginary part (up to
// rounding) and its real part is the c2r result: an imaginary part of bin 0 (or of bin n/2
// for even n) contributes only to that imaginary part, and is ignored as in PyTorch.
__kernel void fft_hermitian_extend(__global const float2 *src, __global float2 *dst,
                                   const int n, const int inner, const int total)
{
    const int i = get_global_id(0);
    if (i < total) {
        const int bins = n / 2 + 1;
        const int in_row = i % inner;
        const int t = (i / inner) % n;
        const long row = (long)(i / (inner * n)) * bins;
        if (t <= n / 2) {
            dst[i] = src[(row + t) * inner + in_row];
        } else {
            const float2 v = src[(row + n - t) * inner + in_row];
            dst[i] = (float2)(v.x, -v.y);
        }
    }
}

// The result: work read through meta = [output shape, work strides] (an r2c output keeps the
// first n/2 + 1 bins of the last dim), times `scale`, conjugated when asked (ihfft).
__kernel void fft_store_complex(__global const float2 *work, __global float2 *y,
                                __global const int *meta, const int rank, const float scale,
                                const int conjugate, const int n)
{
    const int i = get_global_id(0);
    if (i < n) {
        const float2 v = work[strided_offset(i, meta, rank, 0)] * scale;
        y[i] = conjugate ? (float2)(v.x, -v.y) : v;
    }
}

// The real part of the result (c2r transforms), times `scale`.
__kernel void fft_store_real(__global const float2 *work, __global float *y,
                             __global const int *meta, const int rank, const float scale,
                             const int n)
{
    const int i = get_global_id(0);
    if (i < n)
        y[i] = work[strided_offset(i, meta, rank, 0)].x * scale;
}
