// Linear layer: y (rows x out) = x (rows x in) @ W^T + b, with W stored (out, in) as in
// PyTorch: the B operand of the GEMM is read transposed (TRANS_B), so the weight is used as is.
#define TRANS_B 1
#include "gemm.h"
