// 1-D transposed convolution: the kernels of conv_transpose2d.cl with D = H = 1. The host
// (layers/opencl/conv_transpose1d.py) describes a (N, C, L) input as (N, C, 1, 1, L).
#include "conv_transpose2d.cl"
