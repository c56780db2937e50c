// 3-D transposed convolution: the kernels of conv_transpose2d.cl, which are written for
// (N, C, D, H, W) volumes. The host is layers/opencl/conv_transpose3d.py.
#include "conv_transpose2d.cl"
