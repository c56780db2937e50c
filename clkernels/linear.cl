// Linear layer: y (rows x out) = x (rows x in) @ W^T + b. With W stored (out, in) as in
// PyTorch, the B operand of the GEMM is read transposed (TRANS_B=1, the default); the host
// passes -DTRANS_B=0 where it stored W^T (in, out) at bind time (layers/opencl/linear.py says
// when).
#ifndef TRANS_B
#define TRANS_B 1
#endif
#include "gemm.h"
