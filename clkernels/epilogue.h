// epilogue.h: what a convolution or GEMM does to each value as it stores it ("fused epilogue").
//
// `conv -> add(residual) -> relu` costs three passes over the output if each operator is its own
// kernel; applied in the producer's store, the add and the ReLU read one more value and cost
// nothing else (TFLite GPU's "linkable" operators). Which operators fuse is decided once for the
// graph (kuiper/passes/, layers/common/epilogue.py); the host then builds the producer's program
// with these options:
//
//   -DEPI_ACT(x)=<expression>   what happens to v before the residual add: the fused activations
//                               (expressions of layers/opencl/activation.py, parameters written
//                               in as literals) and elementwise expressions (`x*2.0f`), nested
//                               in model order (default: x)
//   -DEPI_RESIDUAL=1            add residual[index] (an operand of the output's shape)
//   -DEPI_POST(x)=<expression>  what happens after the residual add (default: x)
//
// So ResNet's block end, relu(v + r), is EPI_RESIDUAL=1 and EPI_POST(x)=relu; YOLO's bottleneck,
// silu(v) + r, is EPI_ACT(x)=silu and EPI_RESIDUAL=1.
//
// A kernel that stores a fusable output takes `__global const float *residual` (NULL when unused)
// and writes `y[index] = kuiper_epilogue(v, residual, index)`, where v already includes the bias
// and `index` is the flat position of the value in the output tensor.

#ifndef KUIPER_EPILOGUE_H
#define KUIPER_EPILOGUE_H

#include "activation.h"

#ifndef EPI_ACT
#define EPI_ACT(x) (x)
#endif
#ifndef EPI_RESIDUAL
#define EPI_RESIDUAL 0
#endif
#ifndef EPI_POST
#define EPI_POST(x) (x)
#endif

inline float kuiper_epilogue(float v, __global const float *residual, const int index)
{
    v = EPI_ACT(v);
#if EPI_RESIDUAL
    v += residual[index];
#endif
    return EPI_POST(v);
}

#endif  // KUIPER_EPILOGUE_H
