// Complex tensors on OpenCL: a complex64 buffer is read as float2 (x = real, y = imaginary),
// the bytes NumPy's complex64 uses, so complex tensors move between operators (and to and from
// the host) unchanged. torch.view_as_real / view_as_complex need no kernel at all; these two do
// the element-wise work of torch.complex and torch.real / torch.imag.
#include "strided.h"

// torch.complex(re, im): one work-item per output element. Each part may be broadcast, so it
// is read through a strided view: meta = [output shape, strides of that part] (strided.h).
__kernel void make_complex(__global const float *re, __global const float *im,
                           __global float2 *z, __global const int *re_meta,
                           __global const int *im_meta, const int rank, const int n)
{
    const int i = get_global_id(0);
    if (i < n)
        z[i] = (float2)(re[strided_offset(i, re_meta, rank, 0)],
                        im[strided_offset(i, im_meta, rank, 0)]);
}

// torch.real (part = 0) and torch.imag (part = 1).
__kernel void complex_part(__global const float2 *z, __global float *y, const int part,
                           const int n)
{
    const int i = get_global_id(0);
    if (i < n)
        y[i] = part == 0 ? z[i].x : z[i].y;
}
