"""Attention: F.scaled_dot_product_attention, nn.MultiheadAttention, and the attention a model
writes out by hand, which the fuse_attention pass (kuiper/passes/fuse_attention.py) turns into
one `kuiper.fused_attention` operator.

    scores = Q K^T * scale   ->   + masks   ->   softmax over keys   ->   @ V

SDPA gets Q, K, V ready-made (any batch dims, heads included). nn.MultiheadAttention projects
its inputs first, splits the embedding into `num_heads` heads of `embed_dim / num_heads`, runs
the same attention per head and projects the concatenated heads back. Masks differ in meaning:
for SDPA a bool mask says where attention is *allowed*; for MultiheadAttention a bool
attn_mask / key_padding_mask says where it is *forbidden*. Float masks are added in both.
Dropout is a training feature and is ignored.
"""

from __future__ import annotations

import math

import numpy as np

from kuiper.core.registry import register
from kuiper.core.tensor_spec import TensorSpec
from kuiper.layers.base import Layer, finish_output
from kuiper.layers.common.attention_roles import (
    MHADims,
    MHARoles,
    mha_output_shapes,
    resolve_inputs,
)
from kuiper.layers.cpu_helpers.online_softmax import streaming_attention
from kuiper.parser.values import DTYPES

# The type of the operator fuse_attention makes: not a type pnnx writes
FUSED_TYPE = "kuiper.fused_attention"
# Keys per block of FusedAttention's online softmax: short sequences take one block (one
# NumPy product each way); long ones never hold more than L x 512 scores per batch item.
KEY_BLOCK = 512


def add_mask(scores: np.ndarray, mask: np.ndarray, bool_means_keep: bool) -> np.ndarray:
    if mask.dtype == np.bool_:
        keep = mask if bool_means_keep else ~mask
        return np.where(keep, scores, -np.inf).astype(scores.dtype)
    return scores + mask.astype(scores.dtype)


@register("F.scaled_dot_product_attention", backend="cpu")
class ScaledDotProductAttention(Layer):
    @classmethod
    def from_operator(cls, op):
        layer = cls(op)
        layer.is_causal = op.bool_param("is_causal", False)
        layer.scale = op.float_param("scale") if op.param("scale", None) is not None else None
        layer.gqa = op.bool_param("enable_gqa", False)
        op.float_param("dropout_p", 0.0)  # validated; dropout does nothing at inference
        return layer

    def infer(self, inputs):
        self.expect_inputs(inputs, 3, 4)
        q, k, v = (s.shape for s in inputs[:3])
        if len(q) < 2 or len(k) < 2 or len(v) < 2:
            raise self.shape_error(f"query, key and value need at least 2 dims, got {q}, {k}, {v}")
        if any(s.dtype != np.float32 for s in inputs[:3]):
            raise self.op.error("query, key and value should be float32")
        if k[-1] != q[-1] or k[-2] != v[-2]:
            raise self.shape_error(f"need query (..., L, E), key (..., S, E), value (..., S, Ev);"
                                   f" got {q}, {k}, {v}")
        self.groups = 1
        if self.gqa and len(q) >= 3 and k[-3] != q[-3]:
            if len(k) < 3 or q[-3] % k[-3] or k[-3] != v[-3]:
                raise self.shape_error(f"enable_gqa needs the query heads ({q[-3]}) to be a "
                                       f"multiple of the key/value heads, got {k} and {v}")
            self.groups = q[-3] // k[-3]
        def expanded(shape):   # batch dims of k / v after GQA repeats their heads
            b = list(shape[:-2])
            if self.groups > 1:
                b[-1] *= self.groups
            return tuple(b)
        try:
            batch = tuple(np.broadcast_shapes(q[:-2], expanded(k), expanded(v)))
        except ValueError:
            raise self.shape_error(f"batch dims of {q}, {k}, {v} do not broadcast") from None
        self.batch, self.length, self.source = batch, q[-2], k[-2]
        # forward builds the (..., L, S) score matrix, larger than any output
        self.check_budget((*batch, self.length, self.source), np.float32)
        if len(inputs) == 4:
            if self.is_causal:
                raise self.op.error("is_causal=True together with attn_mask (torch refuses this "
                                    "too): give one or the other")
            mask = inputs[3].shape
            try:
                np.broadcast_shapes(mask, batch + (q[-2], k[-2]))
            except ValueError:
                raise self.shape_error(f"attn_mask {mask} does not broadcast to the scores "
                                       f"{batch + (q[-2], k[-2])}") from None
        self.scale_value = self.scale if self.scale is not None else 1.0 / math.sqrt(q[-1])
        return [TensorSpec.of(batch + (q[-2], v[-1]), np.float32)]

    def forward(self, inputs):
        q, k, v = inputs[:3]
        if self.groups > 1:  # grouped-query attention: each K/V head serves `groups` Q heads
            k = np.repeat(k, self.groups, axis=-3)
            v = np.repeat(v, self.groups, axis=-3)
        scores = np.matmul(q, np.swapaxes(k, -1, -2)) * np.float32(self.scale_value)
        if self.is_causal:  # query i sees keys 0..i (top-left aligned when L != S)
            keep = np.tril(np.ones((self.length, self.source), dtype=bool))
            scores = add_mask(scores, keep, bool_means_keep=True)
        if len(inputs) == 4:
            scores = add_mask(scores, inputs[3], bool_means_keep=True)
        return [np.matmul(softmax_last(scores, safe=True), v).astype(np.float32)]

    def flops(self, inputs, outputs):
        b = int(np.prod(self.batch, dtype=np.int64))
        e = self.moved("q", inputs[0].shape)[-1]
        ev = self.moved("v", inputs[2].shape)[-1]
        return 2 * b * self.length * self.source * (e + ev)


@register("nn.MultiheadAttention", backend="cpu")
class MultiheadAttention(Layer):
    # a following activation / residual add is applied to the output (the pass fuses only
    # into a producer with one output: MultiheadAttention without its weights)
    accepts_epilogue = True

    @classmethod
    def from_operator(cls, op):
        layer = cls(op)
        e = op.int_param("embed_dim")
        heads = op.int_param("num_heads")
        if heads <= 0 or e % heads:
            raise op.error(f"embed_dim={e} should be a multiple of num_heads={heads}")
        # add_bias_kv appends one learned key/value position (bias_k, bias_v) after the
        # projections, add_zero_attn one of zeros after that: every query also attends to
        # them, and the masks are padded with "allowed" for the extra columns.
        layer.bias_kv = op.bool_param("add_bias_kv", False)
        layer.zero_attn = op.bool_param("add_zero_attn", False)
        layer.extra = int(layer.bias_kv) + int(layer.zero_attn)
        if layer.bias_kv:
            layer.bias_k = op.weight("bias_k", (1, 1, e)).reshape(e)
            layer.bias_v = op.weight("bias_v", (1, 1, e)).reshape(e)
        layer.dims = MHADims(e, heads, op.int_param("kdim", e), op.int_param("vdim", e),
                             op.bool_param("batch_first", False))
        d = layer.dims
        if "in_proj_weight" in op.attributes:
            w = op.weight("in_proj_weight", (3 * e, e))
            if d.kdim != e or d.vdim != e:
                raise op.error("@in_proj_weight (packed) needs kdim == vdim == embed_dim; "
                               f"got kdim={d.kdim}, vdim={d.vdim}")
            layer.w_q, layer.w_k, layer.w_v = w[:e], w[e:2 * e], w[2 * e:]
            layer.w_in = w   # self-attention projects Q, K and V in one GEMM (forward)
        else:
            layer.w_in = None
            layer.w_q = op.weight("q_proj_weight", (e, e))
            layer.w_k = op.weight("k_proj_weight", (e, d.kdim))
            layer.w_v = op.weight("v_proj_weight", (e, d.vdim))
        bias = op.bool_param("bias", True)
        b_in = op.weight("in_proj_bias", (3 * e,)) if bias else np.zeros(3 * e, np.float32)
        layer.b_in = b_in
        layer.b_q, layer.b_k, layer.b_v = b_in[:e], b_in[e:2 * e], b_in[2 * e:]
        layer.w_out = op.weight("out_proj.weight", (e, e))
        layer.b_out = op.weight("out_proj.bias", (e,)) if bias else np.zeros(e, np.float32)
        layer.outputs, layer.average = _which_outputs(op, layer.dims, layer.extra)
        return layer

    def extra_positions(self) -> list[tuple[np.ndarray, np.ndarray]]:
        """(key, value) rows appended after the projected source positions, in order."""
        e = self.dims.embed_dim
        rows = [(self.bias_k, self.bias_v)] if self.bias_kv else []
        if self.zero_attn:
            rows.append((np.zeros(e, np.float32), np.zeros(e, np.float32)))
        return rows

    def infer(self, inputs):
        self.expect_inputs(inputs, 1, 2, 3, 4, 5)
        roles = resolve_inputs([s.shape for s in inputs], [s.dtype for s in inputs], self.dims)
        if roles is None:
            d = self.dims
            layout = "(N, L, E)" if d.batch_first else "(L, N, E)"
            raise self.shape_error(
                f"cannot match inputs {', '.join(str(s) for s in inputs)} to query {layout} "
                f"with E={d.embed_dim}, key/value of last dim {d.kdim}/{d.vdim}, attn_mask "
                "(L, S) or (N*heads, L, S), key_padding_mask (N, S) (unbatched inputs are not "
                "supported)")
        self.roles: MHARoles = roles
        q, k = inputs[roles.query].shape, inputs[roles.key].shape
        self.n, self.length = (q[0], q[1]) if self.dims.batch_first else (q[1], q[0])
        self.source = k[1] if self.dims.batch_first else k[0]
        self.keys = self.source + self.extra   # key positions attended to
        # forward builds the (N, heads, L, S) score matrix, larger than any output
        self.check_budget((self.n, self.dims.num_heads, self.length, self.keys), np.float32)
        out, weights = mha_output_shapes(q, self.keys, self.dims, self.average)
        shapes = {"output": out, "weights": weights}
        return [TensorSpec.of(shapes[o], np.float32) for o in self.outputs]

    def forward(self, inputs, epilogue=None, residual=None):
        r, d = self.roles, self.dims
        n, length, source, heads = self.n, self.length, self.source, d.num_heads
        hd = d.embed_dim // heads

        def heads_of(x, w, b, t, parts=None):   # (.., E_in) -> projected: (N, heads, t, hd)
            if not d.batch_first:
                x = np.swapaxes(x, 0, 1)
            y = x @ w.T
            y += b
            if parts is None:
                return y.reshape(n, t, heads, hd).transpose(0, 2, 1, 3)
            y = y.reshape(n, t, parts, heads, hd)
            return [y[:, :, i].transpose(0, 2, 1, 3) for i in range(parts)]

        if self.w_in is not None and r.query == r.key == r.value:
            # self-attention: one (rows, E) x (E, 3E) GEMM instead of three of a third of it
            # (BLAS is faster on the wider one: ViT-S's 197 x 384 rows 1.45 -> 1.34 ms)
            q, k, v = heads_of(inputs[r.query], self.w_in, self.b_in, length, parts=3)
        else:
            q = heads_of(inputs[r.query], self.w_q, self.b_q, length)
            k = heads_of(inputs[r.key], self.w_k, self.b_k, source)
            v = heads_of(inputs[r.value], self.w_v, self.b_v, source)
        for bias_k, bias_v in self.extra_positions():  # (N, heads, 1, hd) each
            k = np.concatenate([k, np.broadcast_to(bias_k.reshape(1, heads, 1, hd),
                                                   (n, heads, 1, hd))], axis=2)
            v = np.concatenate([v, np.broadcast_to(bias_v.reshape(1, heads, 1, hd),
                                                   (n, heads, 1, hd))], axis=2)
        keys = self.keys
        # the scale on Q (length x embed values) rather than on the scores (heads x length x
        # keys, 3x more for ViT-S), as PyTorch's own MultiheadAttention does
        scores = np.matmul(q * np.float32(1.0 / math.sqrt(hd)), np.swapaxes(k, -1, -2))
        if r.attn_mask is not None:
            mask = pad_columns(inputs[r.attn_mask], self.extra)
            if mask.ndim == 3:
                mask = mask.reshape(n, heads, length, keys)
            scores = add_mask(scores, mask, bool_means_keep=False)
        if r.key_padding_mask is not None:
            pad = pad_columns(inputs[r.key_padding_mask], self.extra).reshape(n, 1, 1, keys)
            scores = add_mask(scores, pad, bool_means_keep=False)
        if "weights" in self.outputs:
            p = softmax_last(scores, safe=False)
            o = np.matmul(p, v)
        else:   # divided after the product: heads x length x hd values, not x keys
            e_scores, total, _ = exp_rows(scores)
            o = np.matmul(e_scores, v)
            o /= total
        o = o.transpose(0, 2, 1, 3).reshape(n, length, d.embed_dim)
        out = (o @ self.w_out.T + self.b_out).astype(np.float32)
        if not d.batch_first:
            out = np.ascontiguousarray(np.swapaxes(out, 0, 1))
        if epilogue:   # only with the output alone (see accepts_epilogue)
            out = finish_output(out, inputs, epilogue, residual)
        results = {"output": out}
        if "weights" in self.outputs:
            results["weights"] = p.mean(axis=1) if self.average else p
        return [results[o].astype(np.float32, copy=False) for o in self.outputs]

    def flops(self, inputs, outputs):
        d, n, length, source = self.dims, self.n, self.length, self.keys
        e = d.embed_dim
        projections = n * (length * e * e + source * e * (d.kdim + d.vdim) + length * e * e)
        return 2 * (projections + 2 * n * length * source * e)


@register(FUSED_TYPE, backend="cpu")
class FusedAttention(Layer):
    """softmax(Q @ K^T * scale + mask) @ V, for an attention written out as matmul, scale (and
    mask), softmax and matmul: made by the fuse_attention pass (kuiper/passes/
    fuse_attention.py), never by pnnx. Inputs: Q (..., L, E), K^T (..., E, S) as the model's
    first matmul reads it, V (..., S, Ev), and an additive mask broadcast to (..., L, S) when
    `masked`. A row whose every score is -inf is NaN, as torch.softmax makes it.

    Layout moves: the pass may hand Q, K^T or V over as the tensor a permute read (the head
    split of `x.view(n, l, h, d).permute(0, 2, 1, 3)`), with that permutation in `q_perm`,
    `k_perm` or `v_perm`, and may make the output the permute that followed (`o_perm`): the
    layer reads and writes through the permutation (a view here, strides in the OpenCL
    kernel) and the permutes never run.

    Projections (`projected`): the pass may also hand over the linear layers that made Q, K
    and V from one tensor x. The inputs are then x (..., in) and the mask; `q_weight`,
    `q_bias` ... are the layers' weights and `q_shape` ... the shapes their outputs were split
    into (x @ W^T + b, reshaped to q_shape, is what q_perm permutes)."""

    ROLES = ("q", "k", "v")   # inputs 0..2 (the mask, input 3, is read as it is)

    @classmethod
    def from_operator(cls, op):
        layer = cls(op)
        layer.scale = op.float_param("scale")
        layer.masked = op.bool_param("masked")
        layer.perms = {role: op.ints_param(f"{role}_perm") for role in (*cls.ROLES, "o")
                       if op.param(f"{role}_perm", None) is not None}
        layer.projected = op.bool_param("projected", False)
        layer.projections = {}
        if layer.projected:
            for role in cls.ROLES:
                weight = op.weight(f"{role}_weight")
                if weight.ndim != 2:
                    raise op.error(f"{role}_weight must be (out, in), got {weight.shape}")
                bias = op.weight(f"{role}_bias", (weight.shape[0],), optional=True)
                layer.projections[role] = (weight, bias, tuple(op.ints_param(f"{role}_shape")))
        return layer

    def stored_shapes(self, inputs) -> list[tuple[int, ...]]:
        """The shapes Q, K^T and V have before their permutations: the inputs', or with
        projections the shapes the projected x was split into (checked against x)."""
        if not self.projected:
            return [tuple(s.shape) for s in inputs[:3]]
        x = inputs[0].shape
        shapes = []
        for role in self.ROLES:
            weight, _bias, shape = self.projections[role]
            if not x or x[-1] != weight.shape[1] or \
                    int(np.prod(x[:-1], dtype=np.int64)) * weight.shape[0] != \
                    int(np.prod(shape, dtype=np.int64)):
                raise self.shape_error(f"x {tuple(x)} does not project to {role}_shape "
                                       f"{shape} through a {weight.shape} weight")
            shapes.append(shape)
        return shapes

    def project(self, x: np.ndarray) -> list[np.ndarray]:
        """Q, K^T and V as the linear layers and reshapes the pass absorbed made them."""
        out = []
        for role in self.ROLES:
            weight, bias, shape = self.projections[role]
            y = np.matmul(x, weight.T)
            out.append((y if bias is None else y + bias).astype(np.float32).reshape(shape))
        return out

    def moved(self, role: str, shape: tuple[int, ...]) -> tuple[int, ...]:
        """The logical shape of input `role` given the tensor's own shape."""
        perm = self.perms.get(role)
        if perm is None:
            return tuple(shape)
        if sorted(perm) != list(range(len(shape))):
            raise self.shape_error(f"{role}_perm={tuple(perm)} is not a permutation of the "
                                   f"{len(shape)} dims of {tuple(shape)}")
        return tuple(shape[p] for p in perm)

    def infer(self, inputs):
        self.expect_inputs(inputs, (1 if self.projected else 3) + int(self.masked))
        if any(s.dtype != np.float32 for s in inputs):
            raise self.op.error("fused attention computes float32")
        stored = self.stored_shapes(inputs)
        q, kt, v = (self.moved(role, s) for role, s in zip(self.ROLES, stored))
        self.mask_index = 1 if self.projected else 3
        if min(len(q), len(kt), len(v)) < 2 or kt[-2] != q[-1] or kt[-1] != v[-2]:
            raise self.shape_error(f"need Q (..., L, E), K^T (..., E, S), V (..., S, Ev); got "
                                   f"{q}, {kt}, {v}")
        try:
            batch = tuple(np.broadcast_shapes(q[:-2], kt[:-2], v[:-2]))
            if self.masked:
                np.broadcast_shapes(inputs[self.mask_index].shape, batch + (q[-2], kt[-1]))
        except ValueError:
            raise self.shape_error(f"batch dims of {q}, {kt}, {v} (and the mask) do not "
                                   "broadcast") from None
        self.batch, self.length, self.source = batch, q[-2], kt[-1]
        self.check_budget((*batch, self.length, self.source), np.float32)
        self.result_shape = batch + (q[-2], v[-1])   # before o_perm
        out = self.result_shape
        if "o" in self.perms:
            perm = self.perms["o"]
            if sorted(perm) != list(range(len(out))):
                raise self.shape_error(f"o_perm={tuple(perm)} is not a permutation of the "
                                       f"{len(out)} dims of the result {out}")
            out = tuple(out[p] for p in perm)
        return [TensorSpec.of(out, np.float32)]

    def forward(self, inputs):
        # key block by key block, as the OpenCL kernel does: (..., L, KEY_BLOCK) scores at a
        # time, never the (..., L, S) matrix; the absorbed permutes are NumPy views
        stored = self.project(inputs[0]) if self.projected else inputs[:3]
        q, kt, v = (np.transpose(x, self.perms[role]) if role in self.perms else x
                    for role, x in zip(self.ROLES, stored))
        mask = inputs[self.mask_index] if self.masked else None
        out = streaming_attention(q, np.swapaxes(kt, -1, -2), v, self.scale, KEY_BLOCK, mask)
        out = out.astype(np.float32, copy=False)
        if "o" in self.perms:
            out = np.ascontiguousarray(np.transpose(out, self.perms["o"]))
        return [out]

    def flops(self, inputs, outputs):
        b = int(np.prod(self.batch, dtype=np.int64))
        q_shape, _, v_shape = self.stored_shapes(inputs)
        e, ev = self.moved("q", q_shape)[-1], self.moved("v", v_shape)[-1]
        projections = 0
        if self.projected:
            rows = int(np.prod(inputs[0].shape[:-1], dtype=np.int64))
            projections = sum(rows * w.size for w, _, _ in self.projections.values())
        return 2 * (b * self.length * self.source * (e + ev) + projections)


def pad_columns(mask: np.ndarray, extra: int) -> np.ndarray:
    """A mask with `extra` more columns that forbid nothing (0.0, or False)."""
    if not extra:
        return mask
    widths = [(0, 0)] * (mask.ndim - 1) + [(0, extra)]
    return np.pad(mask, widths, constant_values=False if mask.dtype == np.bool_ else 0)


def _which_outputs(op, dims: MHADims, extra: int = 0) -> tuple[list[str], bool]:
    """Output names in order, and whether the weights are averaged over heads.

    pnnx keeps only the used outputs. With two, they are (output, weights); with one, it is the
    output unless its declared shape is that of the weights. Per-head weights
    (average_attn_weights=False) show up as a 4-D declared shape.
    """
    names = ["output", "weights"][:max(1, len(op.outputs))]
    source = op.source
    declared_out = source.output_shapes if source is not None else []
    average = True
    if "weights" in names and len(declared_out) > 1 and declared_out[1]:
        average = len(declared_out[1][0]) != 4
    if len(names) == 1 and declared_out and declared_out[0] and source.input_shapes:
        ins = source.input_shapes
        if all(s is not None for s in ins):
            shapes = [tuple(s[0]) for s in ins]
            dtypes = [DTYPES.get(s[1]) or np.dtype(np.float32) for s in ins]
            roles = resolve_inputs(shapes, dtypes, dims)
            declared = tuple(declared_out[0][0])
            if roles is not None and None not in declared:
                k = shapes[roles.key]
                s_len = (k[1] if dims.batch_first else k[0]) + extra
                out, weights = mha_output_shapes(shapes[roles.query], s_len, dims, True)
                per_head = mha_output_shapes(shapes[roles.query], s_len, dims, False)[1]
                if declared != out and declared in (weights, per_head):
                    names, average = ["weights"], declared == weights
    return names, average


def softmax_last(scores: np.ndarray, safe: bool) -> np.ndarray:
    """Softmax over the last axis. `safe`: a row that is entirely -inf gives zeros (as
    F.scaled_dot_product_attention does) instead of NaN (as nn.MultiheadAttention does)."""
    p, total, row_max = exp_rows(scores)
    with np.errstate(invalid="ignore", divide="ignore"):
        np.divide(p, total, out=p)
    if safe:
        p = np.where(np.isneginf(row_max), 0, p)
    return p.astype(scores.dtype, copy=False)


def exp_rows(scores: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """softmax's parts over the last axis: e = exp(scores - the row's maximum), its row sums
    (softmax = e / sums) and the maxima (-inf where a whole row is -inf, and e NaN)."""
    row_max = np.max(scores, axis=-1, keepdims=True)
    with np.errstate(invalid="ignore", over="ignore"):
        e = scores - row_max           # one new array, then every step in place in it
        np.exp(e, out=e)
        total = np.sum(e, axis=-1, keepdims=True)
    return e, total, row_max
