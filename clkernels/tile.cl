// torch.tile: a copy of a strided view with stride-0 repeat dims (layers/opencl/expand.py says
// how Tensor.repeat builds it); the generic kernel is strided_copy in strided.h.
#include "strided.h"
