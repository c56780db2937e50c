"""torch.matmul's shape rules, shared by matmul, attention and the recurrent layers.

The last two dims are the matrix, the leading dims are a batch that broadcasts like NumPy
(`(2,1,4,5) @ (3,5,6) -> (2,3,4,6)`), and a 1-D operand is a row (left) or a column (right)
vector whose dim disappears from the result.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass
class MatmulShapes:
    """torch.matmul of an (a) and (b) shape, reduced to a batch of (M,K) @ (K,N) products."""

    batch: tuple[int, ...]     # broadcast batch dims
    m: int
    k: int
    n: int
    out: tuple[int, ...]       # result shape, with the dims of 1-D operands removed
    a_view: tuple[int, ...]    # `a` as a matrix (a 1-D `a` is a 1xK row)
    b_view: tuple[int, ...]    # `b` as a matrix (a 1-D `b` is a Kx1 column)


def matmul_shapes(a: Sequence[int], b: Sequence[int]) -> MatmulShapes:
    """Shapes of torch.matmul(a, b); raises ValueError with the reason when they do not fit."""
    a, b = tuple(a), tuple(b)
    if not a or not b:
        raise ValueError(f"both operands need at least 1 dim, got {a} and {b}")
    a_view = (1,) + a if len(a) == 1 else a
    b_view = b + (1,) if len(b) == 1 else b
    if a_view[-1] != b_view[-2]:
        raise ValueError(f"inner dims differ: {a} @ {b} needs a.shape[-1] == "
                         f"{'b.shape[0]' if len(b) == 1 else 'b.shape[-2]'}")
    try:
        batch = tuple(np.broadcast_shapes(a_view[:-2], b_view[:-2]))
    except ValueError:
        raise ValueError(f"batch dims {a_view[:-2]} and {b_view[:-2]} do not broadcast") from None
    m, k, n = a_view[-2], a_view[-1], b_view[-1]
    out = batch + ((m,) if len(a) > 1 else ()) + ((n,) if len(b) > 1 else ())
    return MatmulShapes(batch, m, k, n, out, a_view, b_view)
