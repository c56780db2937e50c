// Dtype casts: y[i] = (DST) x[i]. Build with -DSRC=<type> -DDST=<type> (OpenCL C types of the
// same meaning as the NumPy dtypes: float, long, int, uchar for bool...), -DTO_BOOL when the
// result is a bool (stored as uchar 0/1: any nonzero becomes 1, as in PyTorch), and
// -DUSE_FP64 when either side is double. C casts truncate floats toward zero, like PyTorch.
#ifdef USE_FP64
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#endif
#ifndef SRC
#define SRC float
#endif
#ifndef DST
#define DST float
#endif

__kernel void cast(__global const SRC *x, __global DST *y, const int n)
{
    const int i = get_global_id(0);
    if (i < n) {
#ifdef TO_BOOL
        y[i] = (DST)(x[i] != (SRC)0);
#else
        y[i] = (DST)x[i];
#endif
    }
}
