// epilogue.cl: a fused epilogue as one pass of its own, for producers whose kernels do not
// apply it in their store (kuiper/opencl/execution/epilogue_step.py).
//
// When the passes fuse `conv -> add(residual) -> relu`, the add and the ReLU no longer run as
// operators. A convolution whose kernels call kuiper_epilogue() in their store does the work
// for free; any other producer (a host fallback, a matmul, an expression) runs this kernel
// once after its own launches: one read and one write of the output (plus the residual),
// instead of one per absorbed operator. The build options say what it computes (epilogue.h).

#include "epilogue.h"

__kernel void epilogue(__global float *y, __global const float *residual, const int n)
{
    const int i = get_global_id(0);
    if (i < n)
        y[i] = kuiper_epilogue(y[i], residual, i);
}
