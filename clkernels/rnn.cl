// The recurrent part of LSTM / GRU / RNN, one launch per time step.
//
// Before the steps, one GEMM (matmul.cl) computed the input projections of every time step and
// both directions: g[row, dir * GH + q * H + j] = (x[row] @ W_ih^T + bias)[...], where row is
// the token (t, n) in the input's own layout and GH = GATES * H.
//
// rnn_step, launch `step`: work-item (j, n, dir) owns hidden unit j of batch item n in one
// direction; the forward direction handles time t = step, the reverse one t = T - 1 - step.
// It reads the previous hidden state (h0 at the first step, else the output row it wrote one
// step earlier), adds W_hh @ h_prev to its gates and updates its cell. Every unit reads all of
// h_prev but writes only its own entry of a *different* time row, so there is no race inside a
// launch; launches run in order, so step s sees step s - 1 complete.
//
// Build options: CELL (CELL_LSTM, CELL_GRU, CELL_TANH, CELL_RELU), GATES (4, 3, 1 or 1),
// PROJ (LSTM with proj_size: the step writes o * tanh(c) to `m` and lstm_project finishes).

#define CELL_LSTM 0
#define CELL_GRU 1
#define CELL_TANH 2
#define CELL_RELU 3

inline float sigmoid(float x)
{
    return 1.0f / (1.0f + exp(-x));
}

// Row of token (t, n) in a (T, N, ...) or (N, T, ...) buffer.
inline int token_row(int t, int n, int T, int N, int batch_first)
{
    return batch_first ? n * T + t : t * N + n;
}

__kernel void rnn_step(__global const float *g, __global const float *w_hh,
                       __global const float *b_hn, __global const float *h0,
                       __global const float *c0, __global float *y, __global float *hn,
                       __global float *cn, __global float *m, const int step, const int T,
                       const int N, const int H, const int HOUT, const int D, const int state0,
                       const int batch_first)
{
    const int gid = get_global_id(0);
    if (gid >= H * N * D)
        return;
    const int j = gid % H, n = (gid / H) % N, dir = gid / (H * N);
    const int t = dir ? T - 1 - step : step;
    const int row = token_row(t, n, T, N, batch_first);
    const int state = (state0 + dir) * N + n;        // index of (layer, dir, n) in h0/hn/c0/cn
    __global const float *h_prev;
    if (step == 0) {
        h_prev = h0 + state * HOUT;
    } else {
        const int row_prev = token_row(dir ? t + 1 : t - 1, n, T, N, batch_first);
        h_prev = y + row_prev * D * HOUT + dir * HOUT;
    }

    // Recurrent matrix-vector products of unit j's GATES rows of W_hh.
    __global const float *w = w_hh + dir * GATES * H * HOUT;
    float acc[GATES];
    for (int q = 0; q < GATES; ++q)
        acc[q] = 0.0f;
    for (int k = 0; k < HOUT; ++k) {
        const float hk = h_prev[k];
        for (int q = 0; q < GATES; ++q)
            acc[q] += w[(q * H + j) * HOUT + k] * hk;
    }
    __global const float *gt = g + row * D * GATES * H + dir * GATES * H;

#if CELL == CELL_LSTM
    const float i = sigmoid(gt[j] + acc[0]);
    const float f = sigmoid(gt[H + j] + acc[1]);
    const float cand = tanh(gt[2 * H + j] + acc[2]);
    const float o = sigmoid(gt[3 * H + j] + acc[3]);
    __global float *c = cn + state * H + j;           // the cell state lives in c_n
    const float c_new = f * (step == 0 ? c0[state * H + j] : *c) + i * cand;
    *c = c_new;
    const float h = o * tanh(c_new);
#elif CELL == CELL_GRU
    const float r = sigmoid(gt[j] + acc[0]);
    const float z = sigmoid(gt[H + j] + acc[1]);
    const float cand = tanh(gt[2 * H + j] + r * (acc[2] + b_hn[dir * H + j]));
    const float h = (1.0f - z) * cand + z * h_prev[j];
#elif CELL == CELL_TANH
    const float h = tanh(gt[j] + acc[0]);
#else
    const float h = fmax(gt[j] + acc[0], 0.0f);
#endif

#if PROJ
    m[(dir * N + n) * H + j] = h;                     // lstm_project writes y and h_n
#else
    y[row * D * HOUT + dir * HOUT + j] = h;
    if (step == T - 1)
        hn[state * HOUT + j] = h;
#endif
}

// LSTM with proj_size: h = W_hr @ (o * tanh(c)), one work-item per (p, n, dir).
__kernel void lstm_project(__global const float *m, __global const float *w_hr,
                           __global float *y, __global float *hn, const int step, const int T,
                           const int N, const int H, const int P, const int D, const int state0,
                           const int batch_first)
{
    const int gid = get_global_id(0);
    if (gid >= P * N * D)
        return;
    const int p = gid % P, n = (gid / P) % N, dir = gid / (P * N);
    const int t = dir ? T - 1 - step : step;
    const int row = token_row(t, n, T, N, batch_first);
    __global const float *w = w_hr + (dir * P + p) * H;
    __global const float *mv = m + (dir * N + n) * H;
    float h = 0.0f;
    for (int k = 0; k < H; ++k)
        h += w[k] * mv[k];
    y[row * D * P + dir * P + p] = h;
    if (step == T - 1)
        hn[((state0 + dir) * N + n) * P + p] = h;
}
