"""pnnx.Expression: the arithmetic pnnx gathered from a traced model into one string.

    pnnx.Expression  pnnx_expr_0  2 1 0 1 2  expr=add(@0,mul(@1,2))

The text is parsed once, in `from_operator` (so a bad expression fails when the model is
loaded, pointing at the column), and flattened to RPN; `infer` and `forward` both run that RPN
with `kuiper.parser.expression.evaluate`:

- `infer` runs it on *symbolic* tensors (shape + dtype, no values) for the inputs whose values
  are unknown, which yields the output's broadcast shape and PyTorch dtype. Inputs whose value
  is known at build time (constants, other folded expressions) are used as values; and since
  `size(@0,0)` only needs a shape, size arithmetic such as `[size(@0,0),-1,3]` comes out as a
  known value too, which the backends fold instead of running this operator.
- `forward` runs it on the NumPy arrays.

The output may be a tensor, a Python number or a list (the shape argument of a reshape).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from kuiper.core.errors import ExpressionError
from kuiper.core.registry import register
from kuiper.core.tensor_spec import TensorSpec
from kuiper.layers.base import Layer, finish_output
from kuiper.parser.expression import BroadcastError, Symbolic, evaluate, parse, to_rpn
from kuiper.parser.expression.dtypes import result_type, type_of
from kuiper.parser.expression.functions import FUNCTIONS
from kuiper.parser.expression.rpn import Op


@register("pnnx.Expression", backend="cpu")
class Expression(Layer):
    accepts_epilogue = True  # a following activation / residual add runs on the fresh output

    @classmethod
    def from_operator(cls, op):
        layer = cls(op)
        layer.expr = op.str_param("expr")
        try:
            layer.tree = parse(layer.expr, n_inputs=len(op.inputs))
        except ExpressionError as e:
            raise layer.located(e) from None
        layer.rpn = to_rpn(layer.tree)
        return layer

    def located(self, error: ExpressionError) -> ExpressionError:
        """The same error, its message prefixed with this operator's name (and line)."""
        line = f", line {self.op.line}" if self.op.line else ""
        return ExpressionError(error.expr, error.column,
                               f"operator '{self.name}' ({self.type}{line}): {error.message}")

    def run(self, values: Sequence[Any]) -> Any:
        """Evaluate on `values` (arrays, numbers, or Symbolic); errors name this operator."""
        try:
            return evaluate(self.rpn, values, self.expr)
        except BroadcastError as e:
            raise self.shape_error(f"{e.message} in expr={e.expr} at column {e.column}") from None
        except ExpressionError as e:
            raise self.located(e) from None

    def symbolic_result(self, inputs: Sequence[TensorSpec]) -> Any:
        """The result for these input specs: a value where it is known, else Symbolic."""
        self.expect_inputs(inputs, len(self.op.inputs))
        return self.run([s.value if s.known else Symbolic(s.shape, s.dtype) for s in inputs])

    def infer(self, inputs: Sequence[TensorSpec]) -> list[TensorSpec]:
        result = self.symbolic_result(inputs)
        if isinstance(result, list) and any(v is None for v in result) and any(
                isinstance(v, Symbolic) for v in result):
            raise self.op.error(f"expr={self.expr} is a list of ':' (None) and values known "
                                "only at run time: only Tensor.index reads such an index list, "
                                "and only when its items are plain inputs (@0, @1 ...) or one "
                                "computed item")
        return [spec_of(result)]

    def forward(self, inputs: Sequence[Any], epilogue=None, residual=None) -> list[Any]:
        return [finish_output(self.run(list(inputs)), inputs, epilogue, residual)]

    def flops(self, inputs, outputs) -> int:
        ops = sum(1 for ins in self.rpn if isinstance(ins, Op) and ins.name in FUNCTIONS
                  and FUNCTIONS[ins.name].kind not in ("size", "cast"))
        return ops * outputs[0].numel


def spec_of(result: Any) -> TensorSpec:
    """TensorSpec of an evaluation result (Symbolic = a tensor known only by shape and dtype)."""
    if isinstance(result, Symbolic):
        return TensorSpec(result.shape, result.dtype)
    if isinstance(result, list) and any(isinstance(v, Symbolic) for v in result):
        # A list with run-time items (`[size(@0,0),@1]`): its length is known, its values not.
        dtype = result_type([type_of(v) for v in result]) if result else np.dtype(np.int64)
        return TensorSpec((len(result),), dtype)
    return TensorSpec.of_value(result)
