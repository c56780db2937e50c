"""aten::_grouped_mm(input, weight, offs, bias, out_dtype): one matrix product per group of rows.

    2-D input, 3-D weight, offs:   out[offs[g-1]:offs[g]] = input[offs[g-1]:offs[g]] @ weight[g]
    3-D input, 3-D weight:         out[g] = input[g] @ weight[g]               (a batched matmul)

`offs` holds the end of each group's rows (a cumulative count, offs[-1] <= the rows), so a
mixture-of-experts layer can send each expert only its own tokens, sorted by expert: Mixtral
in Hugging Face transformers 5 runs its experts this way (pnnx writes `aten::_grouped_mm`,
after an `aten::sort` of the tokens by expert and an `aten::histc` of their counts). Rows after
offs[-1] belong to no group and come out 0. `offs` may be an integer tensor or integer-valued
floats (a cumsum of histc's float counts). bias and out_dtype must be None (what Mixtral
passes); the other forms of the operator (2-D by 2-D, offsets along K) are refused by name.
"""

from __future__ import annotations

import numpy as np

from kuiper.core.registry import register
from kuiper.core.tensor_spec import TensorSpec
from kuiper.layers.base import Layer

FLOATS = (np.dtype(np.float32),)


def is_none(spec: TensorSpec) -> bool:
    """An input pnnx wrote as `expr=None` (Python's None, folded)."""
    return spec.value is None and np.dtype(spec.dtype) == np.dtype(object)


@register("aten::_grouped_mm", backend="cpu")
class GroupedMM(Layer):
    def infer(self, inputs):
        if not 2 <= len(inputs) <= 5:
            raise self.op.error(f"expected 2 to 5 inputs (input, weight, offs, bias, out_dtype), "
                                f"got {len(inputs)}")
        x, w, *rest = inputs
        offs = rest[0] if rest and not is_none(rest[0]) else None
        if any(not is_none(spec) for spec in rest[1:]):
            raise self.op.error("a bias or an out_dtype is not supported: both should be None "
                                "(as Mixtral passes them)")
        if np.dtype(x.dtype) not in FLOATS or np.dtype(w.dtype) not in FLOATS:
            raise self.op.error(f"input and weight should be float32, got "
                                f"{np.dtype(x.dtype).name} and {np.dtype(w.dtype).name}")
        if len(w.shape) != 3:
            raise self.shape_error(f"the weight should be 3-D (groups, K, N), got {w.shape}")
        groups, k, n = w.shape
        if len(x.shape) == 2 and offs is not None:
            if x.shape[1] != k or tuple(offs.shape) != (groups,):
                raise self.shape_error(f"input {x.shape}, weight {w.shape} and offs {offs.shape} "
                                       f"do not fit: expected (M, {k}), and offs ({groups},)")
            self.batched = False
            return [TensorSpec((x.shape[0], n), x.dtype)]
        if len(x.shape) == 3 and offs is None:
            if x.shape[0] != groups or x.shape[2] != k:
                raise self.shape_error(f"input {x.shape} and weight {w.shape} do not fit: "
                                       f"expected ({groups}, M, {k})")
            self.batched = True
            return [TensorSpec((groups, x.shape[1], n), x.dtype)]
        raise self.op.error(f"only a 2-D input with offs (groups of rows) or a 3-D input without "
                            f"(a batch) is supported, got a {len(x.shape)}-D input "
                            f"{'with' if offs is not None else 'without'} offs")

    def group_ends(self, offs, rows: int) -> np.ndarray:
        """offs as integers, checked: non-decreasing, within the rows, whole numbers."""
        ends = np.asarray(offs)
        whole = ends.astype(np.int64)
        if (not np.array_equal(whole, ends) or (whole[:-1] > whole[1:]).any()
                or (whole.size and not (0 <= whole[0] and whole[-1] <= rows))):
            raise self.op.error(f"offs {ends.tolist()} should be whole numbers, non-decreasing, "
                                f"from 0 to the input's {rows} rows")
        return whole

    def forward(self, inputs):
        x, w = np.asarray(inputs[0]), np.asarray(inputs[1])
        if self.batched:
            return [np.matmul(x, w)]
        ends = self.group_ends(inputs[2], x.shape[0])
        out = np.zeros((x.shape[0], w.shape[2]), x.dtype)
        start = 0
        for g, end in enumerate(ends):
            np.matmul(x[start:end], w[g], out=out[start:end])
            start = end
        return [out]

    def flops(self, inputs, outputs) -> int:
        return 2 * outputs[0].numel * inputs[1].shape[1]
