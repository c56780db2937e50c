"""Which input of an exported nn.MultiheadAttention is which, and which outputs were kept.

pnnx lists the inputs of nn.MultiheadAttention in the order the traced forward *first uses*
them, and its `$attn_mask=` name points at whatever input came last, so neither position nor
name can be trusted. Measured on pnnx 20261020 / torch 2.13, the order is

    [key_padding_mask if bool] [attn_mask if bool] query [key] [value] [attn_mask if float]
    [key_padding_mask if float]

(torch converts bool masks to float at the top of forward; float masks are first touched after
the projections). Key and value are omitted when they are the same tensor as the one before.

So we resolve by shapes: try every way of giving each input a role, keep the assignments whose
shapes fit MultiheadAttention's rules, and among those prefer one that follows the order above,
then one that calls a lone 2-D mask `attn_mask` (the only case shapes cannot settle is a single
2-D mask when batch size == target length; it is taken to be attn_mask).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

DATA, ATTN_MASK, PADDING_MASK = "data", "attn_mask", "key_padding_mask"


@dataclass
class MHARoles:
    """Input positions of query, key, value and the optional masks."""

    query: int
    key: int
    value: int
    attn_mask: int | None = None
    key_padding_mask: int | None = None


@dataclass
class MHADims:
    embed_dim: int
    num_heads: int
    kdim: int
    vdim: int
    batch_first: bool


def _fits(roles: MHARoles, shapes, dtypes, dims: MHADims) -> bool:
    q, k, v = shapes[roles.query], shapes[roles.key], shapes[roles.value]
    if len(q) != 3 or len(k) != 3 or len(v) != 3:
        return False
    if any(dtypes[i].kind != "f" for i in (roles.query, roles.key, roles.value)):
        return False
    if q[2] != dims.embed_dim or k[2] != dims.kdim or v[2] != dims.vdim:
        return False
    b, t = (0, 1) if dims.batch_first else (1, 0)   # batch and sequence positions
    n, length, source = q[b], q[t], k[t]
    if k[b] != n or v[b] != n or v[t] != source:
        return False
    if roles.attn_mask is not None:
        m = tuple(shapes[roles.attn_mask])
        if m not in ((length, source), (n * dims.num_heads, length, source)):
            return False
    padding = roles.key_padding_mask
    return padding is None or tuple(shapes[padding]) == (n, source)


def _canonical(assignment: Sequence[str], dtypes) -> bool:
    """Does this role assignment follow pnnx's input order (see the module docstring)?"""
    ranks = []
    for role, dtype in zip(assignment, dtypes):
        is_bool = dtype == np.bool_
        if role == DATA:
            ranks.append(2)
        elif role == ATTN_MASK:
            ranks.append(1 if is_bool else 3)
        else:
            ranks.append(0 if is_bool else 4)
    return ranks == sorted(ranks)


def resolve_inputs(shapes: Sequence[tuple[int, ...]], dtypes: Sequence[np.dtype],
                   dims: MHADims) -> MHARoles | None:
    """The most plausible roles for inputs of these shapes/dtypes, or None if none fits."""
    dtypes = [np.dtype(d) for d in dtypes]
    best, best_key = None, None
    for assignment in itertools.product((DATA, ATTN_MASK, PADDING_MASK), repeat=len(shapes)):
        data = [i for i, r in enumerate(assignment) if r == DATA]
        masks = {r: [i for i, a in enumerate(assignment) if a == r]
                 for r in (ATTN_MASK, PADDING_MASK)}
        if not 1 <= len(data) <= 3 or any(len(m) > 1 for m in masks.values()):
            continue
        q = data[0]
        k = data[1] if len(data) > 1 else q
        v = data[2] if len(data) > 2 else k
        roles = MHARoles(q, k, v, (masks[ATTN_MASK] or [None])[0],
                         (masks[PADDING_MASK] or [None])[0])
        if not _fits(roles, shapes, dtypes, dims):
            continue
        key = (not _canonical(assignment, dtypes), len(masks[PADDING_MASK]) - len(
            masks[ATTN_MASK]))
        if best_key is None or key < best_key:
            best, best_key = roles, key
    return best


def mha_output_shapes(query: Sequence[int], source: int, dims: MHADims,
                      average: bool) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(attention output shape, attention weights shape) for a batched query."""
    n, length = (query[0], query[1]) if dims.batch_first else (query[1], query[0])
    weights = (n, length, source) if average else (n, dims.num_heads, length, source)
    return tuple(query[:2]) + (dims.embed_dim,), weights


