// LP pooling (nn.LPPool1d/2d): the p-norm of each window. x is a plane view (planes, D, H, W),
// y is (planes, OD, OH, OW); a 1-D or 2-D pool arrives with its missing leading axes of size 1
// and 1-tap windows there (layers/common/pooling.py). One work-item per output element.
//
// As in PyTorch (see layers/cpu/lppool.py): y = (sum(x^p) / taps * kd * kh * kw) ^ (1/p),
// where `taps` counts the window's taps on the input, fewer than kd * kh * kw only for a
// ceil_mode window at the far edge. mode = +1 / -1 (norm_type = +-inf): largest / smallest |x|.
//
// POWER_KIND (a build option) picks how x^p is computed. OpenCL's pow() is a scalar library
// call on a CPU driver (about 50 ns on PoCL): p = 1 and 2 need none, and any other p is
// exp2(p * log2|x|), which vectorises and is 7x faster, with the sign PyTorch's pow gives.
#define P_ANY 0   // a fractional p: NaN for x < 0, as pow()
#define P_ONE 1
#define P_TWO 2
#define P_INT 3   // an integer p other than 1, 2: a negative x keeps its sign for odd p

#if POWER_KIND == P_ONE
#define POWER(v) (v)
#define ROOT(m) (m)
#elif POWER_KIND == P_TWO
#define POWER(v) ((v) * (v))
#define ROOT(m) sqrt(m)
#elif POWER_KIND == P_INT
#define POWER(v) (((v) < 0.0f && odd) ? -exp2(p * log2(-(v))) : exp2(p * log2(fabs(v))))
#define ROOT(m) pow((m), inv_p)
#else
#define POWER(v) exp2(p * log2(v))
#define ROOT(m) exp2(inv_p * log2(m))  // m >= 0 here: a negative x made it NaN already
#endif

__kernel void lppool(__global const float *x, __global float *y, const int n,
                     const int D, const int H, const int W, const int OD, const int OH,
                     const int OW, const int kd, const int kh, const int kw,
                     const int sd, const int sh, const int sw,
                     const float p, const float inv_p, const int mode)
{
    const int i = get_global_id(0);
    if (i >= n)
        return;
    const int ox = i % OW;
    const int oy = (i / OW) % OH;
    const int oz = (i / (OW * OH)) % OD;
    const int plane = i / (OW * OH * OD);
    const int z0 = oz * sd, y0 = oy * sh, x0 = ox * sw;
    const int z1 = min(z0 + kd, D), y1 = min(y0 + kh, H), x1 = min(x0 + kw, W);  // ceil_mode cut
    const bool odd = ((int)p & 1) != 0;

    __global const float *src = x + (long)plane * D * H * W;
    float acc = mode != 0 ? -INFINITY : 0.0f;
    for (int iz = z0; iz < z1; ++iz)
        for (int iy = y0; iy < y1; ++iy)
            for (int ix = x0; ix < x1; ++ix) {
                const float v = src[(iz * H + iy) * W + ix];
                if (mode != 0)
                    acc = fmax(acc, mode * fabs(v));
                else
                    acc += POWER(v);
            }
    if (mode != 0) {
        y[i] = mode * acc;
        return;
    }
    const float mean = acc / (float)((z1 - z0) * (y1 - y0) * (x1 - x0));
    y[i] = ROOT(mean * (float)(kd * kh * kw));
}
