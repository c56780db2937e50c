"""Attention on OpenCL, two ways.

- fused: one kernel computes softmax(Q K^T * scale + mask) V with an online softmax over tiles
  of keys; the score matrix never exists. Used whenever it can be: heads of at most
  MAX_FUSED_HEAD values, at most one mask, and no caller asking for the attention weights
  themselves. Two kernels of one family, picked by device type (`fused_kernel`):
  `attention_rows` (clkernels/attention_fused.cl, a work-item per query row, tiles of K and V
  shared in local memory: GPUs) and `attention_blocks` (clkernels/attention_blocks.cl, a
  work-item per block of query rows, vector types over keys and head dims, no barrier: CPU
  devices), which reads K transposed: in place when the model gives K^T (the fuse_attention
  pass's operator), else from a workspace that `keys_transposed` fills first.
- unfused: bgemm (clkernels/matmul.cl) for both products, masked_softmax and head_mean
  (clkernels/attention.cl) between them, through a score matrix in a workspace. The weights
  MultiheadAttention may return, two masks at once, and add_bias_kv / add_zero_attn go this way.

nn.MultiheadAttention projects its inputs with the fast GEMM of linear layers
(layers/opencl_gemm/launch.py, `projection_launch`), Q, K and V in ONE GEMM when they come from
the same tensor (self-attention: the packed in_proj_weight), and its output projection too.
No tensor is ever transposed or split into heads in memory: the kernels read their operands
through per-(batch, head) offset tables and row strides, so "head h of batch n" is just an offset
into the projected (L, N, E), (N, L, E) or (tokens, 3E) buffer.

`forced_path("fused" | "unfused" | "fused_rows" | "fused_blocks")` makes every attention bound
inside it take one path, "fused" being the device's fused kernel (tests).
"""

from __future__ import annotations

import contextlib
import functools
import math
from collections.abc import Iterator

import numpy as np

from kuiper.core.registry import register
from kuiper.layers.cpu import attention
from kuiper.layers.opencl_base import Launch, OpenCLLayer, round_up
from kuiper.layers.opencl_gemm.launch import (
    Strided,
    explicit,
    projection_launch,
    strided,
    strided_gemm_launch,
    strided_index,
    transposed,
)
from kuiper.layers.opencl_helpers.buffers import keep_alive
from kuiper.layers.opencl_helpers.reduction import work_group_size
from kuiper.opencl.device.runtime import is_cpu

ADD, KEEP, DROP = 1, 2, 3   # mask kinds of masked_softmax and attention_rows
# The fused kernel keeps a query, an output row and a tile of scores in registers per work-item
MAX_FUSED_HEAD = 256
PATHS = ("fused", "unfused", "fused_rows", "fused_blocks")
FORCED: str | None = None   # one of PATHS: set by forced_path (tests)
FORCED_PARAMETERS: dict | None = None   # WG/BK/KSPLIT of attention_rows: forced_parameters


@contextlib.contextmanager
def forced_path(name: str | None) -> Iterator[None]:
    """Bind every attention inside the block the `name` way (one of PATHS: "fused" is the
    device's fused kernel, "fused_rows" / "fused_blocks" one of them on any device); a forced
    fused path the problem cannot take falls back to the unfused one."""
    global FORCED
    if name is not None and name not in PATHS:
        raise ValueError(f"unknown attention path {name!r}: one of {', '.join(PATHS)}")
    old, FORCED = FORCED, name
    try:
        yield
    finally:
        FORCED = old


@contextlib.contextmanager
def forced_parameters(params: dict | None) -> Iterator[None]:
    """Bind every fused attention inside the block with these WG, BK and KSPLIT (tests run
    each variant the selector can pick on whatever device they have)."""
    global FORCED_PARAMETERS
    old, FORCED_PARAMETERS = FORCED_PARAMETERS, params
    try:
        yield
    finally:
        FORCED_PARAMETERS = old


# GPU sets by query rows (all heads together): (fewer rows than, set). With few rows one
# work-item per row leaves the GPU nearly empty (ViT-S at batch 1: 6 x 197 rows), so KSPLIT
# work-items share a row. Measured on an NVIDIA H200 (NVIDIA OpenCL, driver 580.159.04; head 64,
# no mask), device ms of one launch, median of 15:
#                             (WG, BK, KSPLIT):  64,32,1  32,32,4  16,32,8  16,64,8  32,64,4
#   ViT-S b1    6 x 197 rows   (1,182)           0.072    0.040    0.026    0.024    0.040
#   encoder    12 x 128 rows   (1,536)           0.048    0.030    0.021    0.019    0.028
#   encoder    12 x 512 rows   (6,144)           0.153    0.090    0.105    0.092    0.082
#   ViT-S b32 192 x 197 rows  (37,824)           0.174    0.257    0.285    0.262    0.256
# (128,32,1 ran the b32 shape in 0.165 and the others slower; KSPLIT 2 sat between 1 and 4.)
GPU_SETS_BY_ROWS = ((4096, {"WG": 16, "BK": 64, "KSPLIT": 8}),
                    (16384, {"WG": 32, "BK": 64, "KSPLIT": 4}))


def fused_kernel(device) -> str:
    """"attention_blocks" on a CPU device, "attention_rows" elsewhere (module docstring), unless
    forced_path names one."""
    if FORCED in ("fused_rows", "fused_blocks"):
        return "attention_" + FORCED.removeprefix("fused_")
    return "attention_blocks" if is_cpu(device) else "attention_rows"


def blocks_parameters(device, rows: int, value_head: int) -> dict:
    """Build options of attention_blocks: ROWS query rows per work-item, KW keys per score
    vector (the device's float SIMD width, 8 or 16), NKV vectors per tile of keys, VV dims per
    output vector (the widest of 16, 8, 4, 1 that divides the value head and is at most KW).

    PoCL 3.0 on a 2-core AMD EPYC (AVX2, 8 floats), ViT-S/16's attention (6 heads of 64, 197
    tokens), kernel medians of 15 runs on a loaded machine (load average ~10), ms: ROWS x KW x
    NKV x VV 8x8x4x8 1.37, 4x8x4x8 1.61, 6x8x4x8 1.36, 8x8x2x8 1.36, 8x8x8x8 1.26, 12x8x4x8
    1.22, 8x16x2x8 1.96, 4x16x2x16 1.32, 6x16x2x16 1.21; attention_rows (WG 16, BK 32) 31.0.
    Within noise of each other except float16 scores with 8 rows (registers spill on AVX2).
    Fewer rows than ROWS: one block of them (a decoder's single query)."""
    width = int(getattr(device, "preferred_vector_width_float", 8) or 8)
    kw = 16 if width >= 16 else 8
    vv = next(w for w in (16, 8, 4, 1) if w <= kw and value_head % w == 0)
    return {"ROWS": max(1, min(8, rows)), "KW": kw, "NKV": 32 // kw, "VV": vv}


def fused_parameters(device, head: int, value_head: int, rows: int) -> dict:
    """Work-group size WG (query rows per group), keys per tile BK and work-items per row
    KSPLIT of attention_rows, for `rows` query rows over all heads.

    A GPU wants many rows per group (one per work-item, the tile in local memory shared by
    all) and tiles small enough that two groups fit one compute unit's registers; with few
    rows, several work-items per row (KSPLIT). On a CPU device the rows of a group are PoCL's
    SIMD lanes (PoCL 3.0 on 2 cores, ViT-S's 6 heads of 197 tokens: 16 rows per group ran
    1.07x faster than 32, 1.3x than 4, 1.8x than 1)."""
    if FORCED_PARAMETERS is not None:
        return dict(FORCED_PARAMETERS)
    if is_cpu(device):
        return {"WG": 16, "BK": 32, "KSPLIT": 1}
    wide = max(head, value_head) > 64   # wider heads: half the keys per tile (registers)
    for limit, params in GPU_SETS_BY_ROWS:
        if rows < limit:
            return {**params, "BK": params["BK"] // 2} if wide else dict(params)
    return {"WG": 64, "BK": 16 if wide else 32, "KSPLIT": 1}


def fitted(params: dict, head: int, value_head: int, device) -> dict:
    """`params` made small enough for the device: fewer rows per group, then fewer keys per
    tile, then fewer work-items per row, until the local memory and the group size fit (wide
    heads on a device with 32 KB of local memory, Oclgrind's)."""
    p = dict(params)
    while (fused_local_bytes(p, head, value_head) > int(device.local_mem_size)
           or p["WG"] * p["KSPLIT"] > int(device.max_work_group_size)):
        if p["WG"] > 8:
            p["WG"] //= 2
        elif p["BK"] > max(8, p["KSPLIT"]):
            p["BK"] //= 2
        elif p["KSPLIT"] > 1:
            p["KSPLIT"] //= 2
        else:
            break   # the smallest set: the build says what is missing
    return p


# Every set fused_parameters can return (tests run each; `fitted` may shrink it).
FUSED_VARIANTS = ({"WG": 16, "BK": 32, "KSPLIT": 1}, {"WG": 64, "BK": 32, "KSPLIT": 1},
                  {"WG": 64, "BK": 16, "KSPLIT": 1}, {"WG": 16, "BK": 64, "KSPLIT": 8},
                  {"WG": 16, "BK": 32, "KSPLIT": 8}, {"WG": 32, "BK": 64, "KSPLIT": 4},
                  {"WG": 32, "BK": 32, "KSPLIT": 4}, {"WG": 16, "BK": 16, "KSPLIT": 1})


def fused_local_bytes(params: dict, head: int, value_head: int) -> int:
    """Local memory of attention_rows with `params`: the K and V tiles, or with KSPLIT the
    partial outputs of every row's work-items if larger (they share the bytes), plus three
    words per work-item (its m, l and NaN flag)."""
    words = params["BK"] * (head + value_head)
    if params["KSPLIT"] > 1:
        words = max(words, params["KSPLIT"] * params["WG"] * value_head)
        words += 3 * params["KSPLIT"] * params["WG"]
    return 4 * words


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

    def mask_arguments(self, mask: tuple | None, options: list[str]) -> list:
        """A fused kernel's four mask arguments (the mask, its offset table, its row and column
        strides; without a mask none and zeros), its build options added to `options`."""
        if mask is None:
            return [None, None, np.int32(0), np.int32(0)]
        array, view, kind, dtype = mask
        options += [f"-DMASK={kind}", f"-DMT={'uchar' if dtype == np.bool_ else 'float'}"]
        table = self.upload(view.offsets)
        keep_alive(self, [table])
        return [array.data, table.data, np.int32(view.row), np.int32(view.col)]

    def keys_need_transposing(self, k_view: Strided, source: int) -> bool:
        """Whether the fused kernel of this device reads K through a transposed copy (a
        workspace of heads x head x source floats): attention_blocks wants the keys of one
        head dim side by side, which a K^T given in place already has (key stride 1)."""
        return (fused_kernel(self.runtime.device) == "attention_blocks" and source > 1
                and k_view.row != 1)

    def fused_launch(self, rows: int, source: int, head: int, value_head: int, q: Strided,
                     k: Strided, v: Strided, o: Strided, scale: float, mask: tuple | None,
                     causal: bool, safe: bool) -> list[Launch]:
        """The fused kernel's launches for len(q.offsets) heads of `rows` queries over
        `source` keys, heads of `head` (Q, K) and `value_head` (V, O) values. Views are
        (heads, rows, head) with column stride 1; `mask` is (device array, Strided view of it
        as (heads, rows, source), kind, dtype) or None. K may instead be a view of K^T (row
        stride 1: the keys of one head dim side by side). attention_blocks with K not given
        that way first copies K^T into the next workspace (`keys_need_transposing`)."""
        if fused_kernel(self.runtime.device) == "attention_blocks":
            return self.blocks_launches(rows, source, head, value_head, q, k, v, o, scale,
                                        mask, causal, safe)
        device = self.runtime.device
        p = fitted(fused_parameters(device, head, value_head, rows * len(q.offsets)), head,
                   value_head, device)
        if p["BK"] % p["KSPLIT"]:
            raise ValueError(f"attention_rows: KSPLIT={p['KSPLIT']} must divide BK={p['BK']}")
        vw = 4 if head % 4 == 0 and value_head % 4 == 0 else 1
        # K given as K^T: key j of dim d at base + d * col + j (one dim: either way)
        k_transposed = head > 1 and k.col != 1
        options = [f"-DHD={head}", f"-DHV={value_head}", f"-DVW={vw}", f"-DBK={p['BK']}",
                   f"-DWG={p['WG']}", f"-DKSPLIT={p['KSPLIT']}", f"-DCAUSAL={int(causal)}",
                   f"-DSAFE={int(safe)}",
                   f"-DK_TRANSPOSED={int(k_transposed)}"]
        tables = [self.upload(view.offsets) for view in (q, k, v, o)]
        keep_alive(self, tables)
        args = self.mask_arguments(mask, options)
        kernel = self.kernel("attention_rows", options, stem="attention_fused")
        i32 = np.int32
        kernel.set_args(q.array.data, tables[0].data, i32(q.row), k.array.data, tables[1].data,
                        i32(k.col if k_transposed else k.row), v.array.data, tables[2].data,
                        i32(v.row), o.array.data,
                        tables[3].data, i32(o.row), i32(rows), i32(source),
                        np.float32(scale), *args)
        groups = -(-rows // p["WG"])
        return [Launch(kernel, (groups * p["WG"], len(q.offsets) * p["KSPLIT"]),
                       (p["WG"], p["KSPLIT"]))]

    def blocks_launches(self, rows: int, source: int, head: int, value_head: int, q: Strided,
                        k: Strided, v: Strided, o: Strided, scale: float, mask: tuple | None,
                        causal: bool, safe: bool) -> list[Launch]:
        """attention_blocks (fused_launch's arguments), after keys_transposed where K is not
        given as K^T with the keys side by side."""
        heads = len(q.offsets)
        p = blocks_parameters(self.runtime.device, rows, value_head)
        options = [f"-DHD={head}", f"-DHV={value_head}", f"-DCAUSAL={int(causal)}",
                   f"-DSAFE={int(safe)}"] + [f"-D{key}={value}" for key, value in p.items()]
        launches = []
        if self.keys_need_transposing(k, source):
            kt = self.scratch(heads, head, source)
            table = self.upload(k.offsets)
            keep_alive(self, [table])
            copy = self.kernel("keys_transposed", options, stem="attention_blocks")
            copy.set_args(k.array.data, table.data, np.int32(k.row), np.int32(k.col), kt.data,
                          np.int32(source))
            launches.append(Launch(copy, (head, heads)))
            k = explicit(kt, [b * head * source for b in range(heads)], 1, source)
        tables = [self.upload(view.offsets) for view in (q, k, v, o)]
        keep_alive(self, tables)
        args = self.mask_arguments(mask, options)
        kernel = self.kernel("attention_blocks", options, stem="attention_blocks")
        i32 = np.int32
        # K^T: the distance between two dims' rows of keys (key stride 1, or a single key)
        kernel.set_args(q.array.data, tables[0].data, i32(q.row), k.array.data, tables[1].data,
                        i32(k.col), v.array.data, tables[2].data, i32(v.row), o.array.data,
                        tables[3].data, i32(o.row), i32(rows), i32(source), np.float32(scale),
                        *args)
        launches.append(Launch(kernel, (-(-rows // p["ROWS"]), heads), (1, 1)))
        return launches

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
    def fused(self, in_specs) -> bool:
        """Whether bind takes the fused kernel (the module docstring says when)."""
        q, v = in_specs[0].shape, in_specs[2].shape
        return FORCED != "unfused" and max(q[-1], v[-1]) <= MAX_FUSED_HEAD

    def workspace_shapes(self, in_specs, out_specs):
        """The scores (unfused), or K^T for attention_blocks (fused, on a CPU device)."""
        if out_specs[0].numel == 0:
            return []
        nb = int(np.prod(self.batch, dtype=np.int64))
        if self.fused(in_specs):
            head = in_specs[1].shape[-1]
            k_view = Strided(None, np.zeros(1, np.int32), head, 1)   # K's rows: key stride
            if self.keys_need_transposing(k_view, self.source):
                return [((nb, head, self.source), np.float32)]
            return []
        return [((nb, self.length, self.source), np.float32)]   # the scores

    def bind(self, inputs, outputs, in_specs, out_specs, *, workspaces=()):
        self.bound_arrays = []   # a rebind (new input shape) releases the previous ones
        self.take_workspaces(workspaces, in_specs, out_specs)
        q, k, v = (s.shape for s in in_specs[:3])
        batch, length, source = self.batch, self.length, self.source
        self.launches = []
        if out_specs[0].numel == 0:
            return

        def kv_view(shape, array):   # GQA: K/V head j serves query heads j*g .. j*g+g-1
            index = np.arange(int(np.prod(shape, dtype=np.int64))).reshape(shape)
            if self.groups > 1:
                index = np.repeat(index, self.groups, axis=-3)
            return strided_index(index, batch + shape[-2:], array)

        q_view = strided(q, batch + (length, q[-1]), inputs[0])
        k_view, v_view = kv_view(k, inputs[1]), kv_view(v, inputs[2])
        out = strided(out_specs[0].shape, batch + (length, v[-1]), outputs[0])
        mask = None
        if len(in_specs) == 4:
            m = in_specs[3]
            view = strided(m.shape, batch + (length, source))
            mask = (inputs[3], view, KEEP if m.dtype == np.bool_ else ADD, m.dtype)
        if self.fused(in_specs):
            self.launches = self.fused_launch(length, source, q[-1], v[-1], q_view, k_view,
                                              v_view, out, self.scale_value, mask,
                                              self.is_causal, safe=True)
            return
        nb = int(np.prod(batch, dtype=np.int64))
        scores = self.scratch(nb, length, source)
        grid = strided(batch + (length, source), batch + (length, source), scores)
        self.launches.append(strided_gemm_launch(self, length, source, q[-1], q_view,
                                                 transposed(k_view), grid,
                                                 alpha=self.scale_value))
        masks = []
        if mask is not None:
            array, view, kind, dtype = mask
            masks.append((array, row_offsets(view, length), view.col, kind, dtype))
        self.launches.append(self.softmax_launch(scores, nb * length, source, length, masks,
                                                 self.is_causal, safe=True))
        self.launches.append(strided_gemm_launch(self, length, v[-1], source, grid, v_view, out))


@register(backend="opencl")
class FusedAttention(_AttentionLaunches, attention.FusedAttention):
    """The fuse_attention pass's operator: always the fused kernel, reading K^T in place,
    and Q, K^T, V and the output through the permutations the pass absorbed (q_perm ...): a
    head split such as `view(n, l, h, d).permute(0, 2, 1, 3)` is only a different offset table
    and row stride for the kernel. With projections (`projected`), Q, K and V are first one
    GEMM of x with the three weights side by side into a (tokens, Eq + Ek + Ev) workspace,
    each role's values a band of its columns."""

    def view(self, role: str, shape, target, array, index=None) -> Strided:
        """The (batch..., rows, cols) view `target` of a tensor stored with `shape`, read
        through the layer's permutation for `role` (none: as stored). `o`'s permutation maps
        the result to the stored output, so the view goes through its inverse. `index`: where
        each element of the stored tensor is in `array` (default: the tensor is `array`)."""
        if index is None:
            index = np.arange(int(np.prod(shape, dtype=np.int64)), dtype=np.int64)
        index = index.reshape(shape)
        perm = self.perms.get(role)
        if perm is not None:
            index = index.transpose(np.argsort(perm) if role == "o" else perm)
        return strided_index(index, target, array)

    def projection_rows(self, in_specs) -> tuple[int, int]:
        """(rows of x, Eq + Ek + Ev): the shape of the projections' workspace."""
        x = in_specs[0].shape
        return (int(np.prod(x[:-1], dtype=np.int64)),
                sum(w.shape[0] for w, _, _ in self.projections.values()))

    def bands(self, in_specs) -> list:
        """Where Q, K^T and V sit in the projections' workspace: the element indices of each
        role's band of columns (None for each without projections: a role is its own input)."""
        if not self.projected:
            return [None] * 3
        rows, width = self.projection_rows(in_specs)
        columns = np.arange(rows * width, dtype=np.int64).reshape(rows, width)
        bands, start = [], 0
        for role in self.ROLES:
            n = self.projections[role][0].shape[0]
            bands.append(columns[:, start:start + n])
            start += n
        return bands

    def key_view(self, in_specs, array=None, band=None) -> Strided:
        """K read as (batch..., keys, head dims), through the absorbed permutation of K^T and,
        with projections, from K's band of the workspace (`array` None: the strides alone)."""
        stored = self.stored_shapes(in_specs)
        kt = self.moved("k", stored[1])
        return transposed(self.view("k", stored[1], self.batch + (kt[-2], self.source), array,
                                    band))

    def workspace_shapes(self, in_specs, out_specs):
        """The projections' (tokens, Eq + Ek + Ev), and on a CPU device, where K is not read
        as K^T in place, attention_blocks' K^T (keys_need_transposing)."""
        if out_specs[0].numel == 0:
            return []
        shapes = [(self.projection_rows(in_specs), np.float32)] if self.projected else []
        k_view = self.key_view(in_specs, band=self.bands(in_specs)[1])
        if self.keys_need_transposing(k_view, self.source):
            head = self.moved("k", self.stored_shapes(in_specs)[1])[-2]
            shapes.append(((len(k_view.offsets), head, self.source), np.float32))
        return shapes

    def projected_inputs(self, inputs, in_specs) -> tuple[list, list]:
        """(arrays, element indices) of Q, K^T and V: with projections, the workspace the
        one GEMM writes and where each role's band of columns sits in it."""
        bands = self.bands(in_specs)
        if not self.projected:
            return list(inputs[:3]), bands
        qkv = self.scratch(*self.projection_rows(in_specs))
        weights = [self.projections[r][0] for r in self.ROLES]
        biases = [self.projections[r][1] if self.projections[r][1] is not None
                  else np.zeros(w.shape[0], np.float32) for r, w in zip(self.ROLES, weights)]
        self.launches.append(projection_launch(self, len(bands[0]), np.concatenate(weights),
                                               np.concatenate(biases), inputs[0].data,
                                               qkv.data))
        return [qkv] * 3, bands

    def bind(self, inputs, outputs, in_specs, out_specs, *, workspaces=()):
        self.bound_arrays = []   # a rebind (new input shape) releases the previous ones
        stored = self.stored_shapes(in_specs)
        q, _, v = (self.moved(role, s) for role, s in zip(self.ROLES, stored))
        batch, length, source = self.batch, self.length, self.source
        self.launches = []
        if out_specs[0].numel == 0:
            return
        if max(q[-1], v[-1]) > MAX_FUSED_HEAD:
            return self.fall_back_to_host(inputs, outputs, in_specs, out_specs,
                                          f"heads wider than {MAX_FUSED_HEAD} values")
        self.take_workspaces(workspaces, in_specs, out_specs)
        arrays, bands = self.projected_inputs(inputs, in_specs)
        k_view = self.key_view(in_specs, arrays[1], bands[1])
        mask = None
        if self.masked:
            m = in_specs[self.mask_index]
            mask = (inputs[self.mask_index], strided(m.shape, batch + (length, source)), ADD,
                    m.dtype)
        self.launches += self.fused_launch(
            length, source, q[-1], v[-1],
            self.view("q", stored[0], batch + (length, q[-1]), arrays[0], bands[0]), k_view,
            self.view("v", stored[2], batch + (source, v[-1]), arrays[2], bands[2]),
            self.view("o", out_specs[0].shape, batch + (length, v[-1]), outputs[0]),
            self.scale, mask, causal=False, safe=False)


@register(backend="opencl")
class MultiheadAttention(_AttentionLaunches, attention.MultiheadAttention):
    # a fused activation / residual add rides on the output projection's store
    epilogue_in_kernel = True
    # the fused path's four projections run on the linear layers' GEMM (projection_launch) in
    # the plan's precision; the attention kernel itself, and the unfused path, stay fp32
    reduced_precision = True
    precision = "fp32"      # the plan's, set by bind for the projections

    def falls_back(self) -> bool:
        """Masks together with add_bias_kv / add_zero_attn run the CPU layer."""
        r = self.roles
        return bool(self.extra and (r.attn_mask is not None
                                    or r.key_padding_mask is not None))

    def fused(self) -> bool:
        """Whether bind takes the fused path (the module docstring says when)."""
        r, d = self.roles, self.dims
        return (FORCED != "unfused" and not self.extra and "weights" not in self.outputs
                and (r.attn_mask is None or r.key_padding_mask is None)
                and d.embed_dim // d.num_heads <= MAX_FUSED_HEAD)

    def self_attention(self) -> bool:
        """Q, K and V projected from the same tensor: one GEMM with the packed weight."""
        r, d = self.roles, self.dims
        return r.query == r.key == r.value and d.kdim == d.vdim == d.embed_dim

    def workspace_shapes(self, in_specs, out_specs, *, precision="fp32"):
        """In bind's order. Fused: the projected Q, K, V (one (tokens, 3E) buffer for
        self-attention), then the heads' results side by side. Unfused: the projected Q, K
        and V (K and V are constants of their own with add_bias_kv / add_zero_attn), the
        scores unless they are an output, the heads' results side by side."""
        if self.falls_back():
            return []
        n, length, source, e = self.n, self.length, self.source, self.dims.embed_dim
        if self.fused():
            shapes = ([(length * n, 3 * e)] if self.self_attention() else
                      [(length * n, e), (source * n, e), (source * n, e)])
            shapes.append((length * n, e))
            heads = self.dims.num_heads
            width = 3 * e if self.self_attention() else e   # the projected K's buffer
            if self.keys_need_transposing(self.heads_view(None, source, width, 0), source):
                shapes.append((n * heads, e // heads, source))   # attention_blocks' K^T
            return [(shape, np.float32) for shape in shapes]
        shapes = [(length * n, e)]
        if not self.extra:
            shapes += [(source * n, e), (source * n, e)]
        if not ("weights" in self.outputs and not self.average):
            shapes.append((n * self.dims.num_heads, length, self.keys))
        shapes.append((length * n, e))
        return [(shape, np.float32) for shape in shapes]

    def bind(self, inputs, outputs, in_specs, out_specs, *, epilogue=None, residual=None,
             workspaces=(), precision="fp32"):
        self.bound_arrays = []   # a rebind (new input shape) releases the previous ones
        self.precision = precision
        self.take_workspaces(workspaces, in_specs, out_specs)
        self.launches = []
        if self.falls_back():
            self.fall_back_to_host(inputs, outputs, in_specs, out_specs,
                                   "masks together with add_bias_kv / add_zero_attn")
            return
        # the output projection stores through the fused epilogue (on both paths)
        project_out = functools.partial(self.output_projection, epilogue=epilogue,
                                        residual=residual)
        if self.fused():
            self.bind_fused(inputs, outputs, in_specs, project_out)
        else:
            self.bind_unfused(inputs, outputs, in_specs, project_out)

    def output_projection(self, concat, output, epilogue=None, residual=None) -> None:
        """The heads' results (tokens, E) @ W_out^T + b, through the fused epilogue."""
        rows = self.length * self.n
        residual = residual.data if residual is not None else None
        self.launches.append(projection_launch(self, rows, self.w_out, self.b_out, concat.data,
                                               output.data, epilogue, residual,
                                               precision=self.projection_precision()))

    def projection_precision(self) -> str:
        """The output projection's precision: the plan's on the fused path, whose projections
        all run on projection_launch; fp32 on the unfused one, whose input projections run on
        bgemm (matmul.cl) in fp32, so that one layer computes in one precision."""
        return self.precision if self.fused() else "fp32"

    def seq(self, t: int, width: int, nn: int, col: int = 0) -> tuple[int, int]:
        """(offset of batch item nn, stride between positions) in a sequence buffer of t
        positions and `width` features, in the model's layout."""
        if self.dims.batch_first:
            return nn * t * width + col, width
        return nn * width + col, self.n * width

    def heads_view(self, array, t: int, width: int, col: int) -> Strided:
        """Every (batch item, head) of a sequence buffer as a (n * heads, t, head) view, the
        heads starting at column `col` (Q, K and V side by side in a (tokens, 3E) buffer)."""
        d = self.dims
        hd = d.embed_dim // d.num_heads
        starts = [self.seq(t, width, nn, col + h * hd) for nn in range(self.n)
                  for h in range(d.num_heads)]
        return explicit(array, [offset for offset, _ in starts], starts[0][1], 1)

    def bind_fused(self, inputs, outputs, in_specs, project_out) -> None:
        """Projections on the linear layers' GEMM, attention_rows, the output projection."""
        r, d = self.roles, self.dims
        n, length, source, heads, e = self.n, self.length, self.source, d.num_heads, d.embed_dim
        hd = e // heads
        by_name = dict(zip(self.outputs, outputs))
        if self.self_attention():   # one GEMM: (tokens, E) @ [Wq; Wk; Wv]^T -> (tokens, 3E)
            qkv = self.scratch(length * n, 3 * e)
            self.launches.append(projection_launch(
                self, length * n, np.concatenate([self.w_q, self.w_k, self.w_v]),
                np.concatenate([self.b_q, self.b_k, self.b_v]), inputs[r.query].data,
                qkv.data, precision=self.precision))
            views = [self.heads_view(qkv, t, 3 * e, c * e)
                     for c, t in ((0, length), (1, source), (2, source))]
        else:
            views = []
            for index, w, b, t in ((r.query, self.w_q, self.b_q, length),
                                   (r.key, self.w_k, self.b_k, source),
                                   (r.value, self.w_v, self.b_v, source)):
                projected = self.scratch(t * n, e)
                self.launches.append(projection_launch(self, t * n, w, b, inputs[index].data,
                                                       projected.data,
                                                       precision=self.precision))
                views.append(self.heads_view(projected, t, e, 0))
        mask = None
        for index, padding in ((r.attn_mask, False), (r.key_padding_mask, True)):
            if index is None:
                continue
            m = in_specs[index]
            if padding:   # key_padding_mask (N, S): the same row for every head and query
                view = explicit(inputs[index], [nn * source for nn in range(n)
                                                for _ in range(heads)], 0, 1)
            elif len(m.shape) == 2:   # (L, S): every batch item and head
                view = explicit(inputs[index], [0] * (n * heads), source, 1)
            else:                     # (N * heads, L, S)
                view = explicit(inputs[index], [b * length * source for b in range(n * heads)],
                                source, 1)
            mask = (inputs[index], view, DROP if m.dtype == np.bool_ else ADD, m.dtype)
        concat = self.scratch(length * n, e)
        self.launches += self.fused_launch(
            length, source, hd, hd, *views, self.heads_view(concat, length, e, 0),
            1.0 / math.sqrt(hd), mask, causal=False, safe=False)
        project_out(concat, by_name["output"])

    def bind_unfused(self, inputs, outputs, in_specs, project_out) -> None:
        """The unfused chain: bgemm products through a score matrix (module docstring)."""
        r, d = self.roles, self.dims
        n, length, source, heads = self.n, self.length, self.source, d.num_heads
        keys = self.keys   # source positions, plus bias_kv / zero_attn ones
        e = d.embed_dim
        hd = e // heads
        by_name = dict(zip(self.outputs, outputs))

        seq = self.seq
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
            project_out(concat, by_name["output"])
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
