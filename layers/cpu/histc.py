"""torch.histc(input, bins=100, min=0, max=0): how many values fall in each of `bins` equal bins.

    bin of v = int((v - min) * bins / (max - min)),   v == max counted in the last bin

Values outside [min, max] (and NaN) are not counted. With min == max (the default 0, 0) the
range is the data's own smallest and largest value (one wider each way if those are equal too).
The arithmetic is the input's float type, in that order: PyTorch's, so a value on a bin's edge
lands where PyTorch puts it (checked on thousands of random cases, integer-valued ones
included). The counts come back in the input's dtype, as in PyTorch.

Mixture-of-experts routers (Mixtral in Hugging Face transformers 5) count the tokens sent to
each expert this way; pnnx writes that call as `aten::histc` with bins, min and max as inputs
it computed at export.
"""

from __future__ import annotations

import numpy as np

from kuiper.core.registry import register
from kuiper.core.tensor_spec import TensorSpec
from kuiper.layers.base import Layer
from kuiper.layers.common.datamove import known_ints

FLOAT_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


@register("torch.histc", "aten::histc", backend="cpu")
class Histc(Layer):
    @classmethod
    def from_operator(cls, op):
        layer = cls(op)
        if op.type == "torch.histc":
            layer.given = (op.int_param("bins", 100), op.float_param("min", 0.0),
                           op.float_param("max", 0.0))
        else:
            layer.given = None   # inputs 1-3, known when the model is built
        return layer

    def arguments(self, inputs) -> tuple[int, float, float]:
        if self.given is not None:
            self.expect_inputs(inputs, 1)
            return self.given
        if len(inputs) != 4:
            raise self.op.error(f"expected 4 inputs (self, bins, min, max), got {len(inputs)}")
        bins = known_ints(self, inputs[1], "bins")
        bounds = []
        for spec, name in zip(inputs[2:], ("min", "max")):
            if not spec.known or np.size(spec.value) != 1:
                got = spec.value if spec.known else "a tensor known only at run time"
                raise self.op.error(f"the {name} input should be one number known when the "
                                    f"model is built, got {got}")
            bounds.append(float(np.asarray(spec.value).reshape(-1)[0]))
        if len(bins) != 1:
            raise self.op.error(f"the bins input should be one integer, got {bins}")
        return bins[0], bounds[0], bounds[1]

    def infer(self, inputs):
        self.bins, self.low, self.high = self.arguments(inputs)
        x = inputs[0]
        if np.dtype(x.dtype) not in FLOAT_DTYPES:
            raise self.op.error(f"histc counts float32 or float64 values (as PyTorch), got "
                                f"{np.dtype(x.dtype).name}: cast it first (Tensor.to)")
        if self.bins < 1:
            raise self.op.error(f"bins={self.bins} must be >= 1")
        if not (np.isfinite(self.low) and np.isfinite(self.high)) or self.low > self.high:
            raise self.op.error(f"min={self.low} and max={self.high} should be finite with "
                                "min <= max")
        return [TensorSpec((self.bins,), x.dtype)]

    def value_range(self, x: np.ndarray) -> tuple:
        """(min, max) in x's dtype: the parameters, or the data's own range (min == max)."""
        t = x.dtype.type
        low, high = t(self.low), t(self.high)
        if low == high and x.size:
            low, high = x.min(), x.max()
            if not (np.isfinite(low) and np.isfinite(high)):
                raise self.op.error(f"the values' range [{low}, {high}] is not finite: give "
                                    "histc a min and a max")
        if low == high:
            low, high = low - t(1), high + t(1)
        return low, high

    def flops(self, inputs, outputs) -> int:
        return 4 * inputs[0].numel

    def forward(self, inputs):
        x = np.asarray(inputs[0]).reshape(-1)
        low, high = self.value_range(x)
        with np.errstate(invalid="ignore"):   # NaN compares False: it is not counted
            counted = x[(x >= low) & (x <= high)]
        position = (counted - low) * x.dtype.type(self.bins) / (high - low)
        index = np.minimum(position.astype(np.int64), self.bins - 1)   # max: the last bin
        return [np.bincount(index, minlength=self.bins).astype(x.dtype)]
