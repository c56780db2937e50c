// histc.cl: torch.histc, one work-group per bin.
//
// Good for: the small histograms of mixture-of-experts routers (the tokens sent to each expert)
// and any torch.histc: every group reads the whole input for its own bin, bins x n reads in all,
// which is nothing next to the layers around a router (46 values into 4 bins in Mixtral's).
// layers/opencl/histc.py binds it for float32 inputs.
//
// A value's bin is PyTorch's: int((v - lo) * BINS / (hi - lo)) in float, the last bin also
// taking v == hi. OpenCL lets a float division be 2.5 ulp off, which would move a value that
// sits on a bin's edge (an integer expert id, say) into the bin below; the division is done in
// double and rounded once to float, which is the correctly rounded float quotient (53 bits are
// enough that rounding twice never differs from rounding once, for a quotient). Devices without
// cl_khr_fp64 run the CPU layer instead (the host decides).
//
// AUTO_RANGE (min == max): lo and hi are the data's own min and max (one wider each way if
// equal), found by every group before it counts: the same values in every group.
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#include "local_reduce.h"

__kernel void histc(__global const float *x, __global float *counts, const int n,
                    float lo, float hi)
{
    __local float s[WG];
    const int bin = get_group_id(0), l = get_local_id(0);
#if AUTO_RANGE
    float low = INFINITY, high = -INFINITY;
    for (int i = l; i < n; i += WG) {
        const float v = x[i];
        low = v < low ? v : low;     // (NaN never wins: torch's min/max of the values)
        high = v > high ? v : high;
    }
    low = wg_min(s, low);
    high = wg_max(s, high);
    if (n > 0) {
        lo = low;
        hi = high;
    }
    if (lo == hi) {
        lo -= 1.0f;
        hi += 1.0f;
    }
    if (isinf(lo) || isinf(hi)) {   // PyTorch refuses an infinite range: no count is right
        if (l == 0)
            counts[bin] = NAN;
        return;
    }
#endif
    const double width = (double)(hi - lo);
    float count = 0.0f;
    for (int i = l; i < n; i += WG) {
        const float v = x[i];
        if (v >= lo && v <= hi) {                         // NaN: both false, not counted
            const float scaled = (v - lo) * (float)BINS;  // float, as PyTorch computes it
            int b = (int)(float)((double)scaled / width);
            b = b < BINS - 1 ? b : BINS - 1;              // v == hi: the last bin
            count += (float)(b == bin);
        }
    }
    count = wg_sum(s, count);
    if (l == 0)
        counts[bin] = count;
}
