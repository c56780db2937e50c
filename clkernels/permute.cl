// Permute, transpose, t, mT, T, movedim: a strided copy through the permuted view.
#include "strided.h"
