// index_math.h: the smaller and the larger of two ints, and an int clamped into a range, for the
// index arithmetic of the kernels that run on CPU devices.
//
// Why not OpenCL's own min(), max() and clamp()? PoCL 3.0 (LLVM 14) compiles their integer
// versions to a call into its kernel library rather than to an instruction, and a call inside a
// kernel that keeps its results in vector registers makes the compiler save all of them to the
// stack and load them back around it. gemm_blocked.h called min() about 30 times per work-item
// (clamped row and column indices, the count of a row's last stored vector), each call spilling
// its 12 to 16 registers of C: on the small-K products of 1x1 convolutions (MobileNetV2's 16
// -> 96 channels at 112 x 112: M x N x K = 96 x 12544 x 16) a work-item's few dozen steps of k
// cost less than those calls, and the kernel ran 1.5-1.9x faster without them (PoCL on a
// 2-core AMD EPYC; the disassembly of PoCL's cached kernel, `objdump -d` of the .so under
// POCL_CACHE_DIR, shows every `call _Z7_cl_minii`). A comparison compiles to a cmov or a min
// instruction on every device, GPUs included.
//
// Ints only: a float's min has to say what happens to NaN (activation.h's macros do that).

#ifndef KUIPER_INDEX_MATH_H
#define KUIPER_INDEX_MATH_H

inline int imin(const int a, const int b)
{
    return a < b ? a : b;
}

inline int imax(const int a, const int b)
{
    return a > b ? a : b;
}

// x limited to [lo, hi] (lo <= hi)
inline int iclamp(const int x, const int lo, const int hi)
{
    return imin(imax(x, lo), hi);
}

#endif  // KUIPER_INDEX_MATH_H
