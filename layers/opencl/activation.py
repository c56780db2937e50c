"""Activations on OpenCL: one kernel source, one expression per activation.

clkernels/activation.cl computes `y = ACT(x)` for every element; each activation below is the
C expression for ACT (passed as the build option `-DACT(x)=...`) in terms of `x` and its
parameters `p0 p1 p2`, which are the CPU class's `params` in order. Adding an activation is one
class on the CPU side and one line in `EXPRESSIONS`.

The expressions may use the helpers defined in activation.h (keep_nan, sigmoid, softplus,
log_sigmoid, gelu) and must not contain whitespace: build options are split on spaces. Each must
work on a float and on a float8/float16 alike (activation.cl applies it to 8 values at once,
the CPU GEMM to a row of its block): plain arithmetic, `?:` and OpenCL's math functions do.
Comparisons are preferred to fmin/fmax/clamp (PoCL compiles those to calls). NaN must come out
NaN, as in PyTorch: comparisons are written so that NaN takes the branch returning x
(`x<=p0?p1:x`, not `x>p0?x:p1`), and formulas built on fmin/fmax are wrapped in keep_nan.
tests/opencl/test_nan_inf.py checks every one.

The kernel computes float32; a tensor of another dtype runs the CPU layer (graph.fallbacks).
"""

from __future__ import annotations

import numpy as np

from kuiper.core.registry import register
from kuiper.layers.cpu import activation as cpu
from kuiper.layers.opencl_base import Launch, OpenCLLayer, round_up

# ELU-family constants are spelled out as float literals: double literals would need fp64.
EXPRESSIONS: dict[type, str] = {
    cpu.ReLU6: "x<0.0f?0.0f:(x>6.0f?6.0f:x)",
    cpu.LeakyReLU: "x>0.0f?x:x*p0",
    cpu.RReLU: "x>=0.0f?x:x*(0.5f*(p0+p1))",
    cpu.Sigmoid: "sigmoid(x)",
    cpu.SiLU: "x*sigmoid(x)",
    cpu.Hardswish: "x*(x<-3.0f?0.0f:(x>3.0f?6.0f:x+3.0f))/6.0f",
    cpu.Hardsigmoid: "x<-3.0f?0.0f:(x>3.0f?1.0f:(x+3.0f)/6.0f)",
    cpu.GELU: "gelu(x,p0)",
    cpu.Tanh: "tanh(x)",
    cpu.ELU: "x>0.0f?x:p0*expm1(x)",
    cpu.CELU: "keep_nan(x,fmax(x,0.0f)+fmin(p0*expm1(x/p0),0.0f))",
    cpu.SELU: f"{cpu.SELU_SCALE:.9g}f*(x>0.0f?x:{cpu.SELU_ALPHA:.9g}f*expm1(x))",
    cpu.Mish: "x*tanh(softplus(x,1.0f,20.0f))",
    cpu.Softplus: "softplus(x,p0,p1)",
    cpu.Hardtanh: "x<p0?p0:(x>p1?p1:x)",
    cpu.Softsign: "x/(1.0f+fabs(x))",
    cpu.LogSigmoid: "log_sigmoid(x)",
    cpu.Threshold: "x<=p0?p1:x",
    cpu.Tanhshrink: "x-tanh(x)",
    cpu.Hardshrink: "x>=-p0&&x<=p0?0.0f:x",
    cpu.Softshrink: "x>=-p0&&x<=p0?0.0f:(x>p0?x-p0:x+p0)",
}


class OpenCLActivation(OpenCLLayer):
    """Twin mixin for any `cpu.Activation`: build activation.cl with this class's `expr`."""

    kernel_file = "activation"
    expr = ""
    writes_in_place = True  # activation.cl reads x[i], writes y[i]: it may overwrite its input

    def bind(self, inputs, outputs, in_specs, out_specs):
        if self.falls_back_unless([np.float32], inputs, outputs, in_specs, out_specs):
            return  # float16, float64, integers: the CPU layer, as the CPU backend computes
        n = out_specs[0].numel
        values = [np.float32(v) for v in self.values]
        values += [np.float32(0)] * (3 - len(values))
        kernel = self.kernel("activation", [f"-DACT(x)={self.expr}"])
        kernel.set_args(inputs[0].data, outputs[0].data, np.int32(n), *values)
        per_item = 8  # activation.cl: 8 values per work-item, as one float8
        self.launches = [Launch(kernel, (round_up(-(-n // per_item), 64),))] if n else []


def _make_twin(cpu_class: type, expr: str) -> type:
    """class <Name>(OpenCLActivation, cpu.<Name>): expr = ..., registered like its CPU twin."""
    assert not any(c.isspace() for c in expr), f"no whitespace in build options: {expr!r}"
    twin = type(cpu_class.__name__, (OpenCLActivation, cpu_class),
                {"expr": expr, "__module__": __name__,
                 "__doc__": f"{cpu_class.__name__} on OpenCL: ACT(x) = {expr}"})
    return register(backend="opencl")(twin)


for _cpu_class, _expr in EXPRESSIONS.items():
    globals()[_cpu_class.__name__] = _make_twin(_cpu_class, _expr)
