// PixelShuffle / PixelUnshuffle / ChannelShuffle: a strided copy through a permuted view.
// The host describes the view (layers/cpu/pixel_shuffle.py plans it); strided.h copies it.
#include "strided.h"
