// Tensor.slice, Tensor.select, torch.narrow: a strided copy through the indexed view.
#include "strided.h"
