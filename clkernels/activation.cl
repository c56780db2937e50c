// Every elementwise activation is this one kernel: y = ACT(x).
//
// ACT is not written here: the host builds this file with a build option such as
//     -DACT(x)=x<0.0f?0.0f:(x>6.0f?6.0f:x)
// (one program per activation, compiled once and cached), so an activation is one expression
// in layers/opencl/activation.py. Its float parameters (LeakyReLU's slope, Softplus's beta
// and threshold, ...) are ordinary kernel arguments p0, p1, p2: a model with ten different
// slopes still compiles the LeakyReLU program only once.
//
// One work-item computes 8 consecutive values as one float8 (ACT works on vectors, see
// activation.h): on a CPU that is one SIMD register, and math functions such as exp() run as
// SIMD code instead of a call per value (SiLU 5x faster under PoCL). The last work-item does
// the n % 8 values left over one at a time. The 8 loads are written one by one, which the
// compiler merges into a vector load (PoCL compiles vload8 to a call).

#ifndef ACT
#error "build activation.cl with -DACT(x)=<expression of x, p0, p1, p2>"
#endif

#include "activation.h"

__kernel void activation(__global const float *in, __global float *out, const int n,
                         const float p0, const float p1, const float p2)
{
    const int i = get_global_id(0) * 8;
    if (i + 8 <= n) {
        __global const float *p = in + i;
        const float8 x = (float8)(p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7]);
        const float8 y = (ACT(x));
        __global float *q = out + i;
        q[0] = y.s0; q[1] = y.s1; q[2] = y.s2; q[3] = y.s3;
        q[4] = y.s4; q[5] = y.s5; q[6] = y.s6; q[7] = y.s7;
    } else {
        for (int j = i; j < n; ++j) {
            const float x = in[j];
            out[j] = (ACT(x));
        }
    }
}
