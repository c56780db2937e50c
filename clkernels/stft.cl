// STFT and ISTFT on OpenCL: the framing and overlap-add around the FFT.
//
// Good for torch.stft / torch.istft (layers/opencl/stft.py). The FFT of every frame is the
// Stockham FFT of clkernels/fft.cl (its `fft_pass` kernel, run along the frames' last dim);
// these kernels only move samples between the signal and a complex work buffer of frames,
// (B, n_frames, n_fft), and apply the window. Complex values are float2 (x = real, y = imag),
// the bytes of NumPy's complex64. layers/common/stft_plan.py says what torch computes.

// Where sample `pos` of the padded signal comes from in a signal of `len` samples, for the
// centre padding's mode: 0 reflect, 1 constant (-1: a zero), 2 replicate, 3 circular.
inline int padded_index(int pos, const int len, const int mode)
{
    if (pos >= 0 && pos < len)
        return pos;
    if (mode == 0)
        return pos < 0 ? -pos : 2 * (len - 1) - pos;  // the host checked pad < len
    if (mode == 1)
        return -1;
    if (mode == 2)
        return pos < 0 ? 0 : len - 1;
    return ((pos % len) + len) % len;
}

// Frame f of signal b, times the (padded) window: work[(b * n_frames + f) * n_fft + k].
// `pad` samples were added on the left (n_fft / 2 when centred, else 0).
__kernel void stft_frames(__global const float *x, __global const float *window,
                          __global float2 *work, const int len, const int n_fft, const int hop,
                          const int n_frames, const int pad, const int mode, const int n)
{
    const int i = get_global_id(0);
    if (i < n) {
        const int k = i % n_fft;
        const int f = (i / n_fft) % n_frames;
        const int b = i / (n_fft * n_frames);
        const int at = padded_index(f * hop + k - pad, len, mode);
        work[i] = (float2)(at < 0 ? 0.0f : x[b * len + at] * window[k], 0.0f);
    }
}

// The same for a complex signal.
__kernel void stft_frames_complex(__global const float2 *x, __global const float *window,
                                  __global float2 *work, const int len, const int n_fft,
                                  const int hop, const int n_frames, const int pad,
                                  const int mode, const int n)
{
    const int i = get_global_id(0);
    if (i < n) {
        const int k = i % n_fft;
        const int f = (i / n_fft) % n_frames;
        const int b = i / (n_fft * n_frames);
        const int at = padded_index(f * hop + k - pad, len, mode);
        work[i] = at < 0 ? (float2)(0.0f, 0.0f) : x[b * len + at] * window[k];
    }
}

// The transformed frames -> y (B, n_freq, n_frames): a transpose, keeping the first n_freq
// bins (onesided) and scaling. y is float2 also for return_complex=False: the (..., 2) real
// output has the same bytes.
__kernel void stft_store(__global const float2 *work, __global float2 *y, const int n_fft,
                         const int n_freq, const int n_frames, const float scale, const int n)
{
    const int i = get_global_id(0);
    if (i < n) {
        const int f = i % n_frames;
        const int k = (i / n_frames) % n_freq;
        const int b = i / (n_frames * n_freq);
        y[i] = work[((long)b * n_frames + f) * n_fft + k] * scale;
    }
}

// torchaudio's spectrogram with a power: |spectrum * scale| ** power, in stft_store's layout
// (power 1: the magnitude, 2: the power spectrum, without a square root; others through pow).
__kernel void spectrogram_store(__global const float2 *work, __global float *y, const int n_fft,
                                const int n_freq, const int n_frames, const float scale,
                                const float power, const int n)
{
    const int i = get_global_id(0);
    if (i < n) {
        const int f = i % n_frames;
        const int k = (i / n_frames) % n_freq;
        const int b = i / (n_frames * n_freq);
        const float2 v = work[((long)b * n_frames + f) * n_fft + k] * scale;
        const float m = hypot(v.x, v.y);
        y[i] = power == 1.0f ? m : (power == 2.0f ? v.x * v.x + v.y * v.y : pow(m, power));
    }
}

// ISTFT, step 1: the spectrum (B, n_freq, n_frames) -> frames (B, n_frames, n_fft) to inverse
// transform. For a real output (hermitian = 1) bin t > n_fft / 2 is the conjugate of bin
// n_fft - t, so the inverse FFT is real (fft.cl's fft_hermitian_extend explains why).
__kernel void istft_frames(__global const float2 *spec, __global float2 *work, const int n_fft,
                           const int n_freq, const int n_frames, const int hermitian,
                           const int n)
{
    const int i = get_global_id(0);
    if (i < n) {
        const int t = i % n_fft;
        const int f = (i / n_fft) % n_frames;
        const int b = i / (n_fft * n_frames);
        const int mirrored = hermitian && t > n_fft / 2;
        const int bin = mirrored ? n_fft - t : t;
        const float2 v = spec[((long)b * n_freq + bin) * n_frames + f];
        work[i] = mirrored ? (float2)(v.x, -v.y) : v;
    }
}

// ISTFT, step 3: output sample t of signal b sums the frames that cover it (overlap-add),
// each times the window, then divides by the squared window's overlap-add (inv_envelope,
// computed on the host; 0 past the frames' end). `start` drops the centre padding. The output
// is real (complex_out = 0: the real parts) or complex (interleaved pairs).
__kernel void istft_overlap_add(__global const float2 *work, __global const float *window,
                                __global const float *inv_envelope, __global float *y,
                                const int n_fft, const int hop, const int n_frames,
                                const int start, const int out_len, const float scale,
                                const int complex_out, const int n)
{
    const int i = get_global_id(0);
    if (i < n) {
        const int b = i / out_len;
        const int pos = i % out_len + start;
        const int first = pos < n_fft ? 0 : (pos - n_fft) / hop + 1;  // frames with
        const int last = min(pos / hop, n_frames - 1);                 // f*hop <= pos < f*hop+n_fft
        float2 acc = (float2)(0.0f, 0.0f);
        for (int f = first; f <= last; ++f) {
            const int k = pos - f * hop;
            acc += work[((long)b * n_frames + f) * n_fft + k] * window[k];
        }
        const float s = pos < n_fft + hop * (n_frames - 1) ? scale * inv_envelope[pos] : 0.0f;
        if (complex_out) {
            y[2 * i] = acc.x * s;
            y[2 * i + 1] = acc.y * s;
        } else {
            y[i] = acc.x * s;
        }
    }
}
