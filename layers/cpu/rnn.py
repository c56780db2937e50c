"""Recurrent layers: nn.LSTM, nn.GRU and nn.RNN (tanh or relu), any number of layers,
one or two directions, batch_first or not, optional initial states, LSTM projections.

Each layer and direction runs in two parts, which is also how the OpenCL twin is organised:

1. the input projection of *every* time step at once: G = X @ W_ih^T + b (one big GEMM);
2. the recurrence, step by step: gates = G[t] + h @ W_hh^T, then the cell update.

Gate order (PyTorch's): LSTM i, f, g, o; GRU r, z, n; RNN a single gate. For the GRU the
hidden bias of n sits *inside* the reset gate product, n = tanh(G_n + r * (W_hn h + b_hn)),
so it cannot be folded into G like the other biases.

pnnx lists only the outputs that are used (y, h_n, c_n); `which_outputs` tells them apart by
the shapes it declares. When shapes cannot (h_n and c_n of an LSTM without projection have the
same shape), the earlier name wins: a lone state output is h_n, (y, state) is (y, h_n).
"""

from __future__ import annotations

import itertools

import numpy as np

from kuiper.core.registry import register
from kuiper.core.tensor_spec import TensorSpec
from kuiper.layers.base import Layer
from kuiper.layers.cpu.activation import sigmoid  # the overflow-free form the activations use

GATES = {"nn.LSTM": 4, "nn.GRU": 3, "nn.RNN": 1}


@register("nn.LSTM", "nn.GRU", "nn.RNN", backend="cpu")
class RNN(Layer):
    @classmethod
    def from_operator(cls, op):
        layer = cls(op)
        layer.cell = op.type.split(".")[1].lower()          # lstm / gru / rnn
        layer.input_size = op.int_param("input_size")
        layer.hidden = h = op.int_param("hidden_size")
        layer.num_layers = op.int_param("num_layers", 1)
        layer.batch_first = op.bool_param("batch_first", False)
        layer.directions = 2 if op.bool_param("bidirectional", False) else 1
        layer.proj = op.int_param("proj_size", 0) if layer.cell == "lstm" else 0
        layer.activation = op.str_param("nonlinearity", "tanh", choices=("tanh", "relu")) \
            if layer.cell == "rnn" else "tanh"
        if h <= 0 or layer.num_layers <= 0 or not 0 <= layer.proj < h:
            raise op.error(f"need hidden_size > 0, num_layers > 0 and 0 <= proj_size < "
                           f"hidden_size; got {h}, {layer.num_layers}, {layer.proj}")
        layer.out_size = layer.proj or h
        bias = op.bool_param("bias", True)
        gh = GATES[op.type] * h
        layer.weights = []   # [layer][direction] -> dict of arrays
        for k in range(layer.num_layers):
            width = layer.input_size if k == 0 else layer.directions * layer.out_size
            row = []
            for sfx in ("", "_reverse")[:layer.directions]:
                w = {"ih": op.weight(f"weight_ih_l{k}{sfx}", (gh, width)),
                     "hh": op.weight(f"weight_hh_l{k}{sfx}", (gh, layer.out_size))}
                zeros = np.zeros(gh, np.float32)
                w["b_ih"] = op.weight(f"bias_ih_l{k}{sfx}", (gh,)) if bias else zeros
                w["b_hh"] = op.weight(f"bias_hh_l{k}{sfx}", (gh,)) if bias else zeros
                if layer.proj:
                    w["hr"] = op.weight(f"weight_hr_l{k}{sfx}", (layer.proj, h))
                row.append(w)
            layer.weights.append(row)
        layer.outputs = which_outputs(op, layer)
        return layer

    # --- shapes ---------------------------------------------------------------------------------
    def shapes_for(self, x: tuple[int, ...]) -> dict[str, tuple[int, ...]]:
        """Expected shapes of every input and output for an input `x` of this shape."""
        states = self.num_layers * self.directions
        if len(x) == 2:                      # unbatched (T, input_size)
            t, n = x[0], None
        else:
            t, n = (x[1], x[0]) if self.batch_first else (x[0], x[1])
        batch = () if n is None else (n,)
        y_head = (t,) if n is None else ((n, t) if self.batch_first else (t, n))
        return {"y": y_head + (self.directions * self.out_size,),
                "h": (states,) + batch + (self.out_size,),
                "c": (states,) + batch + (self.hidden,)}

    def infer(self, inputs):
        n_states = 2 if self.cell == "lstm" else 1
        self.expect_inputs(inputs, 1, 1 + n_states)
        x = inputs[0]
        if len(x.shape) not in (2, 3) or x.shape[-1] != self.input_size:
            layout = "(N, T, input)" if self.batch_first else "(T, N, input)"
            raise self.shape_error(f"input should be {layout} or unbatched (T, input) with "
                                   f"input={self.input_size}, got {x.shape}")
        if any(s.dtype != np.float32 for s in inputs):
            raise self.op.error("inputs should be float32")
        shapes = self.shapes_for(x.shape)
        for spec, name in zip(inputs[1:], ("h", "c")):
            if spec.shape != shapes[name]:
                raise self.shape_error(f"initial state {name}0 should be {shapes[name]}, got "
                                       f"{spec.shape}")
        return [TensorSpec.of(shapes[o], np.float32) for o in self.outputs]

    # --- compute --------------------------------------------------------------------------------
    def forward(self, inputs):
        x = inputs[0]
        unbatched = x.ndim == 2
        seq = x[:, None] if unbatched else (np.swapaxes(x, 0, 1) if self.batch_first else x)
        n = seq.shape[1]
        states = self.num_layers * self.directions
        h0 = inputs[1].reshape(states, n, -1) if len(inputs) > 1 else \
            np.zeros((states, n, self.out_size), np.float32)
        c0 = inputs[2].reshape(states, n, -1) if len(inputs) > 2 else \
            np.zeros((states, n, self.hidden), np.float32)
        h_n, c_n = np.empty_like(h0), np.empty_like(c0)
        for k, row in enumerate(self.weights):
            outs = []
            for d, w in enumerate(row):
                s = k * self.directions + d
                y, h_n[s], c_n[s] = self._direction(seq, w, h0[s], c0[s], reverse=d == 1)
                outs.append(y)
            seq = np.concatenate(outs, axis=-1)                   # (T, N, D * out)
        y = seq[:, 0] if unbatched else (np.swapaxes(seq, 0, 1) if self.batch_first else seq)
        if unbatched:
            h_n, c_n = h_n[:, 0], c_n[:, 0]
        results = {"y": np.ascontiguousarray(y), "h": h_n, "c": c_n}
        return [results[o] for o in self.outputs]

    def _direction(self, seq, w, h, c, reverse: bool):
        """One layer, one direction: returns (outputs (T, N, out), last h, last c)."""
        hid = self.hidden
        g_all = seq @ w["ih"].T + w["b_ih"]                       # all input projections
        ys = np.empty(seq.shape[:2] + (self.out_size,), np.float32)
        steps = range(seq.shape[0] - 1, -1, -1) if reverse else range(seq.shape[0])
        for t in steps:
            rec = h @ w["hh"].T + w["b_hh"]
            g = g_all[t]
            if self.cell == "lstm":
                i, f = sigmoid(g[:, :hid] + rec[:, :hid]), sigmoid(g[:, hid:2 * hid]
                                                                  + rec[:, hid:2 * hid])
                cand = np.tanh(g[:, 2 * hid:3 * hid] + rec[:, 2 * hid:3 * hid])
                o = sigmoid(g[:, 3 * hid:] + rec[:, 3 * hid:])
                c = f * c + i * cand
                h = o * np.tanh(c)
                if self.proj:
                    h = h @ w["hr"].T
            elif self.cell == "gru":
                r = sigmoid(g[:, :hid] + rec[:, :hid])
                z = sigmoid(g[:, hid:2 * hid] + rec[:, hid:2 * hid])
                cand = np.tanh(g[:, 2 * hid:] + r * rec[:, 2 * hid:])
                h = (1 - z) * cand + z * h
            else:
                a = g + rec
                h = np.tanh(a) if self.activation == "tanh" else np.maximum(a, 0)
            ys[t] = h
        return ys, h, c

    def flops(self, inputs, outputs):
        x = inputs[0].shape
        tokens = x[0] * (x[1] if len(x) == 3 else 1)
        gh = GATES[self.op.type] * self.hidden
        total = 0
        for k in range(self.num_layers):
            width = self.input_size if k == 0 else self.directions * self.out_size
            total += tokens * gh * (width + self.out_size) + tokens * self.proj * self.hidden
        return 2 * total * self.directions


def which_outputs(op, layer: RNN) -> list[str]:
    """Names of the outputs pnnx kept, in order, matched against the declared shapes."""
    names = ["y", "h", "c"] if layer.cell == "lstm" else ["y", "h"]
    count = len(op.outputs)
    if count > len(names):
        raise op.error(f"expected at most {len(names)} outputs ({', '.join(names)}), got {count}")
    source = op.source
    declared = [s for s in (source.output_shapes if source is not None else [])]
    x_decl = source.input_shapes[0] if source is not None and source.input_shapes else None
    if count == len(names) or not declared or x_decl is None or len(declared) < count \
            or any(d is None for d in declared[:count]):
        return names[:count]
    expected = layer.shapes_for(tuple(x_decl[0]))
    for subset in itertools.combinations(names, count):  # in order: y, h before c
        if all(tuple(d[0]) == expected[name] for d, name in zip(declared, subset)):
            return list(subset)
    return names[:count]
