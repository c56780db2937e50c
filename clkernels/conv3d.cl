// 3-D convolution: the kernels of conv2d.cl, which are written for (N, C, D, H, W) volumes (a
// 2-D convolution is the case D = 1). The host is layers/opencl/conv3d.py.
#include "conv2d.cl"
