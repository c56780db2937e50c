// epilogue.h: what a convolution or GEMM does to each value as it stores it ("fused epilogue").
//
// `conv -> add(residual) -> relu` costs three passes over the output if each operator is its own
// kernel; applied in the producer's store, the add and the ReLU read one more value and cost
// nothing else (TFLite GPU's "linkable" operators). Which operators fuse is decided once for the
// graph (kuiper/passes/, kuiper/passes/epilogue.py); the host then builds the producer's program
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
// The numbers in EPI_ACT and EPI_POST (an activation's parameters, a fused scale or shift) are
// written as EPI_K(0), EPI_K(1) ... when the epilogue adds no residual: they are then read
// from the `residual` argument, which carries them instead (the executor binds a buffer of
// them: kuiper/passes/epilogue.py, Epilogue.opencl_constants). Layers whose epilogues differ
// only in their numbers then share one program: one compile instead of one per layer (PoCL's
// first launch of a GEMM kernel takes seconds). With a residual, the numbers are literals.
//
// A kernel that stores a fusable output takes `__global const float *residual` (NULL when unused)
// and writes `y[index] = kuiper_epilogue(v, residual, index)`, where v already includes the bias
// and `index` is the flat position of the value in the output tensor.

#ifndef KUIPER_EPILOGUE_H
#define KUIPER_EPILOGUE_H

#include "activation.h"

// (expanded inside the functions below, whose `residual` argument holds the numbers)
#define EPI_K(i) residual[i]
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

// The same for 4, 8 or 16 consecutive outputs held in one vector (`index`: the first one's).
// EPI_ACT and EPI_POST are type-generic (activation.h), so a kernel that computes a run of
// outputs as a SIMD vector (the CPU kernels: gemm_blocked, implicit_gemm_blocked, depthwise,
// Winograd's output tiles) applies the activation to the whole register. Under PoCL that is
// what makes a fused SiLU cheap: exp() of a float8 is SIMD code, exp() of a float a call per
// value (YOLOv5s's first convolution on PoCL: 15.8 ms with a SiLU per value, 5.3 on vectors).
// The residual's values are loaded one by one, which the compiler merges (vloadn: a call).
#define RESIDUAL_4(r) (float4)((r)[0], (r)[1], (r)[2], (r)[3])
#define RESIDUAL_8(r) (float8)(RESIDUAL_4(r), (r)[4], (r)[5], (r)[6], (r)[7])
#define RESIDUAL_16(r) (float16)(RESIDUAL_8(r), RESIDUAL_8((r) + 8))

// A vector's values stored one by one to p[0], p[1] ...: the compiler merges them into one
// store (vstoren: a call in PoCL). p and v must be plain names.
#define STORE_4(p, v) { p[0] = v.s0; p[1] = v.s1; p[2] = v.s2; p[3] = v.s3; }
#define STORE_8(p, v) { p[0] = v.s0; p[1] = v.s1; p[2] = v.s2; p[3] = v.s3; \
                        p[4] = v.s4; p[5] = v.s5; p[6] = v.s6; p[7] = v.s7; }
#define STORE_16(p, v) { STORE_8(p, v.lo); __global float *p##_hi = p + 8; STORE_8(p##_hi, v.hi); }

// (inside the functions below, whose arguments are named residual and index)
#if EPI_RESIDUAL
#define ADD_RESIDUAL(v, N) v += RESIDUAL_##N(residual + index)
#else
#define ADD_RESIDUAL(v, N)
#endif

// kuiper_epilogue4, kuiper_epilogue8 and kuiper_epilogue16: the body of kuiper_epilogue above,
// written once for the three vector widths.
#define VECTOR_EPILOGUE(N)                                                                     \
    inline float##N kuiper_epilogue##N(float##N v, __global const float *residual,            \
                                       const int index)                                       \
    {                                                                                          \
        v = EPI_ACT(v);                                                                        \
        ADD_RESIDUAL(v, N);                                                                    \
        return EPI_POST(v);                                                                    \
    }
VECTOR_EPILOGUE(4)
VECTOR_EPILOGUE(8)
#ifndef KUIPER_NARROW_VECTORS   // set where the compiler cannot build float16 (vector_width.py)
VECTOR_EPILOGUE(16)
#endif

#endif  // KUIPER_EPILOGUE_H
