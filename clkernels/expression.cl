// Template of the kernel generated for every pnnx.Expression (layers/opencl_helpers/expression_codegen.py).
//
// This file is not compiled as it is: the generator fills in the placeholders below, then builds it.
// One work-item computes one output element: it turns its index `i` into output coordinates,
// reads each input at the offset those coordinates have under broadcasting (a broadcast
// dimension has stride 0, so every coordinate along it reads the same element), then evaluates
// the expression one operation per line. Shapes, strides and scalar constants are baked into
// the source as literals, so the kernel takes nothing but buffers.
//
// Example, for add(@0,mul(@1,2)) with @0 of shape 2x1x5 and @1 of shape 3x1 (output 2x3x5):
//
//     __kernel void expression(__global const float *in0, __global const float *in1,
//                              __global float *out)
//     {
//         const int i = get_global_id(0);
//         if (i >= 30)
//             return;
//         int r = i;
//         const int c2 = r % 5; r /= 5;
//         const int c1 = r % 3; r /= 3;
//         const int c0 = r;
//         const float x0 = in0[c0 * 5 + c2];
//         const float x1 = in1[c1];
//         const float t0 = (x1 * 2.0f);
//         const float t1 = (x0 + t0);
//         out[i] = t1;
//     }

${comment}
#include "expression.h"

__kernel void expression(${params}__global ${out_type} *out)
{
    const ${index} i = get_global_id(0);
    if (i >= ${n})
        return;
${coordinates}${reads}${body}    out[i] = ${result};
}
