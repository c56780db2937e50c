// split, chunk, tensor_split, unbind: one strided copy per output piece.
#include "strided.h"
