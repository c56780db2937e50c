// Tensor.unfold: the windows along one dim are a view of the input (layers/opencl/tensor_unfold.py
// builds it), copied by the strided copy every view-like layer shares.
#include "strided.h"
