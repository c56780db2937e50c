"""LSTM / GRU / RNN on OpenCL.

Per layer: one bgemm (clkernels/matmul.cl) projects every time step of both directions at
once, then T launches of `rnn_step` (clkernels/rnn.cl) run the recurrence, each step handling
both directions. The arguments are bound here, once, to one kernel object per kernel; the step
number is the one argument set per launch, as it is enqueued (`Steps`, layers/opencl_base.py),
so binding costs the same for 10 steps as for 100,000 (a kernel object per step took 175 s
and 1 GB for 100,000).
"""

from __future__ import annotations

import numpy as np

from kuiper.core.registry import register
from kuiper.layers.cpu import rnn
from kuiper.layers.opencl_base import Launch, OpenCLLayer, Steps, round_up
from kuiper.layers.opencl_gemm.launch import explicit, strided_gemm_launch
from kuiper.layers.opencl_helpers.buffers import keep_alive

CELLS = {"lstm": "CELL_LSTM", "gru": "CELL_GRU"}


@register(backend="opencl")
class RNN(OpenCLLayer, rnn.RNN):
    def device(self, host: np.ndarray):
        array = self.upload(np.ascontiguousarray(host, dtype=np.float32))
        keep_alive(self, [array])
        return array

    def scratch(self, size: int):
        array = self.runtime.empty((max(size, 1),), np.float32)
        keep_alive(self, [array])
        return array

    def bind(self, inputs, outputs, in_specs, out_specs):
        self.bound_arrays = []   # a rebind (new input shape) releases the previous ones
        x = in_specs[0].shape
        self.launches = []
        t_len = x[0] if len(x) == 2 else (x[1] if self.batch_first else x[0])
        n = 1 if len(x) == 2 else (x[0] if self.batch_first else x[1])
        bf = int(self.batch_first and len(x) == 3)
        hid, out, d = self.hidden, self.out_size, self.directions
        gates = rnn.GATES[self.op.type]
        gh = gates * hid
        states = self.num_layers * d
        rows = t_len * n
        if rows == 0:
            return
        by_name = dict(zip(self.outputs, outputs))
        h0 = inputs[1] if len(inputs) > 1 else self.device(np.zeros(states * n * out))
        c0 = inputs[2] if len(inputs) > 2 else self.device(np.zeros(states * n * hid))
        # Final states go straight into the outputs when they are used, else into scratch.
        hn = by_name["h"] if "h" in by_name else self.scratch(states * n * out)
        cn = by_name["c"] if "c" in by_name else self.scratch(states * n * hid)
        g = self.scratch(rows * d * gh)
        m = self.scratch(d * n * hid) if self.proj else None
        cell = CELLS.get(self.cell, "CELL_RELU" if self.activation == "relu" else "CELL_TANH")
        options = [f"-DCELL={cell}", f"-DGATES={gates}", f"-DPROJ={int(bool(self.proj))}"]
        i32 = np.int32

        x_in, width = inputs[0], self.input_size
        for k, row in enumerate(self.weights):
            last = k == self.num_layers - 1
            y = by_name["y"] if last and "y" in by_name else self.scratch(rows * d * out)
            # 1. Input projections of all steps and directions: G = X @ [W_fwd; W_rev]^T + b.
            w_ih = self.device(np.concatenate([w["ih"] for w in row]))
            bias = self.device(np.concatenate([self._folded_bias(w) for w in row]))
            self.launches.append(strided_gemm_launch(
                self, rows, d * gh, width, explicit(x_in, [0], width, 1),
                explicit(w_ih, [0], 1, width), explicit(g, [0], d * gh, 1),
                explicit(bias, [0], 0, 1)))
            # 2. The recurrence, one launch per step (plus the projection for proj_size).
            w_hh = self.device(np.concatenate([w["hh"] for w in row]))
            b_hn = self.device(np.concatenate([w["b_hh"][2 * hid:] for w in row])) \
                if self.cell == "gru" else None
            w_hr = self.device(np.concatenate([w["hr"] for w in row])) if self.proj else None
            kernel = self.kernel("rnn_step", options)
            kernel.set_args(g.data, w_hh.data, None if b_hn is None else b_hn.data,
                            h0.data, c0.data, y.data, hn.data, cn.data,
                            None if m is None else m.data, i32(0), i32(t_len), i32(n),
                            i32(hid), i32(out), i32(d), i32(k * d), i32(bf))
            step = [Launch(kernel, (round_up(hid * n * d, 64),), step_arg=9)]
            if self.proj:
                kernel = self.kernel("lstm_project", options)
                kernel.set_args(m.data, w_hr.data, y.data, hn.data, i32(0), i32(t_len),
                                i32(n), i32(hid), i32(out), i32(d), i32(k * d), i32(bf))
                step.append(Launch(kernel, (round_up(out * n * d, 64),), step_arg=4))
            self.launches.append(Steps(step, t_len))  # the `step` argument set per launch
            x_in, width = y, d * out

    def _folded_bias(self, w: dict) -> np.ndarray:
        """The part of the biases that can be added once, in the input projection GEMM: all of
        b_ih and b_hh, except the GRU's b_hn (it is multiplied by the reset gate)."""
        if self.cell != "gru":
            return w["b_ih"] + w["b_hh"]
        hid = self.hidden
        return w["b_ih"] + np.concatenate([w["b_hh"][:2 * hid], np.zeros(hid, np.float32)])
