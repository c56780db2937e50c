"""Attention on OpenCL: bgemm (clkernels/matmul.cl) for every product, masked_softmax and
head_mean (clkernels/attention.cl) for the rest.

No tensor is ever transposed or split into heads in memory: each GEMM reads its operands
through offset tables and strides (layers/opencl_gemm/launch.py), so "head h of batch n" is just an
offset into the projected (L, N, E) or (N, L, E) buffer.
"""

from __future__ import annotations

import math

import numpy as np

from kuiper.core.registry import register
from kuiper.layers.cpu import attention
from kuiper.layers.opencl_base import Launch, OpenCLLayer, round_up
from kuiper.layers.opencl_gemm.launch import (
    Strided,
    explicit,
    strided,
    strided_gemm_launch,
    strided_index,
    transposed,
)
from kuiper.layers.opencl_helpers.buffers import keep_alive
from kuiper.layers.opencl_helpers.reduction import work_group_size

ADD, KEEP, DROP = 1, 2, 3   # mask kinds of masked_softmax


def row_offsets(view: Strided, rows_per_batch: int) -> np.ndarray:
    """Per-row offsets of a (batch, rows, cols) view: offsets[b] + r * row stride."""
    r = np.arange(rows_per_batch, dtype=np.int64) * view.row
    return (view.offsets.astype(np.int64)[:, None] + r[None, :]).reshape(-1).astype(np.int32)


class _AttentionLaunches(OpenCLLayer):
    """Helpers shared by both attention layers."""

    def take_workspaces(self, workspaces, in_specs, out_specs) -> None:
        """The arrays bind hands out with `scratch`, in `workspace_shapes`' order."""
        self.unused_workspaces = list(workspaces) or self.own_workspaces(in_specs, out_specs)

    def scratch(self, *shape: int):
        """The next workspace (it lives during this layer's launches only): the shapes bind
        asks for, in order, are those `workspace_shapes` declared."""
        array = self.unused_workspaces.pop(0)
        assert array.shape == shape, f"workspace {array.shape} handed out for {shape}"
        keep_alive(self, [array])
        return array

    def softmax_launch(self, scores, rows: int, cols: int, length: int,
                       masks: list[tuple[object, np.ndarray, int, int, np.dtype]],
                       causal: bool, safe: bool) -> Launch:
        """masks: up to two (device array, per-row offsets, column stride, kind, dtype)."""
        wg = work_group_size(cols)
        options = [f"-DWG={wg}", f"-DCAUSAL={int(causal)}", f"-DSAFE={int(safe)}"]
        args = []
        for k in (1, 2):
            if k <= len(masks):
                array, offsets, col, kind, dtype = masks[k - 1]
                table = self.upload(offsets)
                keep_alive(self, [table])
                options += [f"-DMASK{k}={kind}",
                            f"-DMT{k}={'uchar' if dtype == np.bool_ else 'float'}"]
                args += [array.data, table.data, np.int32(col)]
            else:
                options += [f"-DMASK{k}=0"]
                args += [None, None, np.int32(0)]
        kernel = self.kernel("masked_softmax", options, stem="attention")
        kernel.set_args(scores.data, np.int32(cols), np.int32(length), *args)
        return Launch(kernel, (rows * wg,), (wg,))


@register(backend="opencl")
class ScaledDotProductAttention(_AttentionLaunches, attention.ScaledDotProductAttention):
    def workspace_shapes(self, in_specs, out_specs):
        if out_specs[0].numel == 0:
            return []
        nb = int(np.prod(self.batch, dtype=np.int64))
        return [((nb, self.length, self.source), np.float32)]   # the scores

    def bind(self, inputs, outputs, in_specs, out_specs, *, workspaces=()):
        self.bound_arrays = []   # a rebind (new input shape) releases the previous ones
        self.take_workspaces(workspaces, in_specs, out_specs)
        q, k, v = (s.shape for s in in_specs[:3])
        batch, length, source = self.batch, self.length, self.source
        self.launches = []
        if out_specs[0].numel == 0:
            return
        nb = int(np.prod(batch, dtype=np.int64))

        def kv_view(shape, array):   # GQA: K/V head j serves query heads j*g .. j*g+g-1
            index = np.arange(int(np.prod(shape, dtype=np.int64))).reshape(shape)
            if self.groups > 1:
                index = np.repeat(index, self.groups, axis=-3)
            return strided_index(index, batch + shape[-2:], array)

        scores = self.scratch(nb, length, source)
        grid = strided(batch + (length, source), batch + (length, source), scores)
        self.launches.append(strided_gemm_launch(
            self, length, source, q[-1], strided(q, batch + (length, q[-1]), inputs[0]),
            transposed(kv_view(k, inputs[1])), grid, alpha=self.scale_value))
        masks = []
        if len(in_specs) == 4:
            m = in_specs[3]
            view = strided(m.shape, batch + (length, source))
            kind = KEEP if m.dtype == np.bool_ else ADD
            masks.append((inputs[3], row_offsets(view, length), view.col, kind, m.dtype))
        self.launches.append(self.softmax_launch(scores, nb * length, source, length, masks,
                                                 self.is_causal, safe=True))
        out = strided(out_specs[0].shape, batch + (length, v[-1]), outputs[0])
        self.launches.append(strided_gemm_launch(self, length, v[-1], source, grid,
                                                 kv_view(v, inputs[2]), out))


@register(backend="opencl")
class MultiheadAttention(_AttentionLaunches, attention.MultiheadAttention):
    def falls_back(self) -> bool:
        """Masks together with add_bias_kv / add_zero_attn run the CPU layer."""
        r = self.roles
        return bool(self.extra and (r.attn_mask is not None
                                    or r.key_padding_mask is not None))

    def workspace_shapes(self, in_specs, out_specs):
        """In bind's order: the projected Q, K and V (K and V are constants of their own with
        add_bias_kv / add_zero_attn), the scores unless they are an output, the heads'
        results side by side."""
        if self.falls_back():
            return []
        n, length, source, e = self.n, self.length, self.source, self.dims.embed_dim
        shapes = [(length * n, e)]
        if not self.extra:
            shapes += [(source * n, e), (source * n, e)]
        if not ("weights" in self.outputs and not self.average):
            shapes.append((n * self.dims.num_heads, length, self.keys))
        shapes.append((length * n, e))
        return [(shape, np.float32) for shape in shapes]

    def bind(self, inputs, outputs, in_specs, out_specs, *, workspaces=()):
        self.bound_arrays = []   # a rebind (new input shape) releases the previous ones
        self.take_workspaces(workspaces, in_specs, out_specs)
        r, d = self.roles, self.dims
        n, length, source, heads = self.n, self.length, self.source, d.num_heads
        keys = self.keys   # source positions, plus bias_kv / zero_attn ones
        e = d.embed_dim
        hd = e // heads
        self.launches = []
        if self.falls_back():
            self.fall_back_to_host(inputs, outputs, in_specs, out_specs,
                                   "masks together with add_bias_kv / add_zero_attn")
            return
        by_name = dict(zip(self.outputs, outputs))

        def seq(t: int, width: int, nn: int, col: int = 0) -> tuple[int, int]:
            """(offset of batch item nn, stride between positions) in a sequence buffer of
            t positions and `width` features, in the model's layout."""
            if d.batch_first:
                return nn * t * width + col, width
            return nn * width + col, n * width

        def project(x, width: int, t: int, w: np.ndarray, b: np.ndarray, out,
                    t_out: int | None = None) -> None:
            rows = t * n   # every token of every batch item, in the input's own order
            weight, bias = self.upload(np.ascontiguousarray(w)), self.upload(b)
            keep_alive(self, [weight, bias])
            ins, outs, batch = [0], [0], 1
            if d.batch_first and t_out not in (None, t):  # room for extra positions per item
                rows, batch = t, n
                ins, outs = [k * t * width for k in range(n)], [k * t_out * e for k in range(n)]
            self.launches.append(strided_gemm_launch(
                self, rows, e, width, explicit(x, ins, width, 1),
                explicit(weight, [0] * batch, 1, width),          # W^T: (k, j) -> W[j, k]
                explicit(out, outs, e, 1), explicit(bias, [0] * batch, 0, 1)))

        qp = self.scratch(length * n, e)
        kp, vp = self.key_value_buffers(n, source, e)
        project(inputs[r.query], e, length, self.w_q, self.b_q, qp)
        project(inputs[r.key], d.kdim, source, self.w_k, self.b_k, kp, keys)
        project(inputs[r.value], d.vdim, source, self.w_v, self.b_v, vp, keys)

        # Scores of head h of batch item nn: Q_h (L, hd) @ K_h^T (hd, S).
        per_head = "weights" in by_name and not self.average
        p = by_name["weights"] if per_head else self.scratch(n * heads, length, keys)
        b_items = [(nn, h) for nn in range(n) for h in range(heads)]
        q_view = [seq(length, e, nn, h * hd) for nn, h in b_items]
        k_view = [seq(keys, e, nn, h * hd) for nn, h in b_items]
        grid = explicit(p, [b * length * keys for b in range(len(b_items))], keys, 1)
        self.launches.append(strided_gemm_launch(
            self, length, keys, hd,
            explicit(qp, [o for o, _ in q_view], q_view[0][1], 1),
            explicit(kp, [o for o, _ in k_view], 1, k_view[0][1]), grid,
            alpha=1.0 / math.sqrt(hd)))

        masks = []
        if r.attn_mask is not None:
            m = in_specs[r.attn_mask]
            view = strided(m.shape, (n * heads, length, source))
            masks.append((inputs[r.attn_mask], row_offsets(view, length), view.col,
                          DROP if m.dtype == np.bool_ else ADD, m.dtype))
        if r.key_padding_mask is not None:
            m = in_specs[r.key_padding_mask]
            view = strided((n, 1, source), (n, heads * length, source))  # same row per item
            offsets = np.repeat(view.offsets, heads * length).astype(np.int32)
            masks.append((inputs[r.key_padding_mask], offsets, view.col,
                          DROP if m.dtype == np.bool_ else ADD, m.dtype))
        self.launches.append(self.softmax_launch(p, n * heads * length, keys, length, masks,
                                                 causal=False, safe=False))

        # Heads back into one (tokens, E) buffer, in the query's layout, then the output proj.
        concat = self.scratch(length * n, e)
        v_view = [seq(keys, e, nn, h * hd) for nn, h in b_items]
        self.launches.append(strided_gemm_launch(
            self, length, hd, keys, grid,
            explicit(vp, [o for o, _ in v_view], v_view[0][1], 1),
            explicit(concat, [o for o, _ in q_view], q_view[0][1], 1)))
        if "output" in by_name:
            project(concat, e, length, self.w_out, self.b_out, by_name["output"])
        if "weights" in by_name and self.average:
            total = n * length * keys
            kernel = self.kernel("head_mean", stem="attention")
            kernel.set_args(p.data, by_name["weights"].data, np.int32(heads),
                            np.int32(length * keys), np.int32(total))
            self.launches.append(Launch(kernel, (round_up(total, 64),)))

    def key_value_buffers(self, n: int, source: int, e: int):
        """Projected K and V, (keys * n, e) in the model's layout. The extra positions of
        add_bias_kv / add_zero_attn are constants: written once here, and the projections
        (which fill the other rows every run) never touch them."""
        if not self.extra:
            return self.scratch(source * n, e), self.scratch(source * n, e)
        keys = source + self.extra
        buffers = []
        for which in (0, 1):   # 0: keys, 1: values
            host = np.zeros((keys, n, e) if not self.dims.batch_first else (n, keys, e),
                            np.float32)
            for k, rows in enumerate(self.extra_positions()):
                if self.dims.batch_first:
                    host[:, source + k] = rows[which]
                else:
                    host[source + k] = rows[which]
            buffer = self.upload(host.reshape(keys * n, e))
            keep_alive(self, [buffer])
            buffers.append(buffer)
        return buffers
