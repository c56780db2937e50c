// expand, repeat, repeat_interleave: strided copies through views with stride-0 dims, and
// index_select for repeat_interleave with a list of counts (both from strided.h).
#include "strided.h"
