// Every elementwise activation is this one kernel: y = ACT(x).
//
// ACT is not written here: the host builds this file with a build option such as
//     -DACT(x)=clamp(x,0.0f,6.0f)
// (one program per activation, compiled once and cached), so an activation is one expression
// in layers/opencl/activation.py. Its float parameters (LeakyReLU's slope, Softplus's beta
// and threshold, ...) are ordinary kernel arguments p0, p1, p2: a model with ten different
// slopes still compiles the LeakyReLU program only once.

#ifndef ACT
#error "build activation.cl with -DACT(x)=<expression of x, p0, p1, p2>"
#endif

#include "activation.h"

__kernel void activation(__global const float *in, __global float *out, const int n,
                         const float p0, const float p1, const float p2)
{
    const int i = get_global_id(0);
    if (i < n) {
        const float x = in[i];
        out[i] = (ACT(x));
    }
}
