// 1-D convolution: the kernels of conv2d.cl with D = H = 1 (kernel 1 x 1 x K, stride 1 x 1 x S,
// ...). The host (layers/opencl/conv1d.py) describes a (N, C, L) input as (N, C, 1, 1, L).
#include "conv2d.cl"
