"""pnnx.Expression on OpenCL: one generated kernel per expression (see expression_codegen.py).

Build time, once per input shape:
- results known from shapes alone (`[size(@0,0),-1,3]`, `mul(size(@0,1),2)`) never reach this
  layer: infer gives them a value and the executor folds them, so they cost no kernel;
- otherwise the generator writes the source of one fused kernel, with the input shapes, dtypes
  and constant inputs baked in; the runtime builds each distinct source once
  (`program_from_source`), so a model that repeats an expression (every block of a ResNet)
  compiles it once;
- the kernel's arguments (the input buffers and the output) are bound once.

The one case without a kernel is a list whose items are only known at run time
(`[size(@0,0),@1]` with @1 computed on the device): it is evaluated on the host, like a CPU
fallback, since a list is not a tensor a kernel could write.
"""

from __future__ import annotations

from kuiper.core.registry import register
from kuiper.layers.cpu import expression
from kuiper.layers.opencl_base import FRESH, HOST_ONLY, HostFallback, Launch, OpenCLLayer, round_up
from kuiper.layers.opencl_helpers.expression_codegen import KERNEL_NAME, CodegenError, generate
from kuiper.parser.expression import Symbolic


@register(backend="opencl")
class Expression(OpenCLLayer, expression.Expression):
    wide_indices = True  # the generated kernel indexes with long past 2**31 elements

    def output_kinds(self, in_specs, out_specs):
        # `expr=None` (pnnx's placeholder for an absent argument) has no numbers to store.
        return [HOST_ONLY] if out_specs[0].dtype == object else [FRESH]

    def bind(self, inputs, outputs, in_specs, out_specs):
        self._host = None
        if outputs[0] is None:
            return
        result = self.symbolic_result(in_specs)
        if not isinstance(result, Symbolic):
            tensors = [f"item {i} is a {'x'.join(map(str, v.shape))} tensor"
                       for i, v in enumerate(result) if isinstance(v, Symbolic) and v.shape]
            if tensors:  # `[@0]`: a Python list of tensors, which no device buffer can hold
                raise self.op.error(f"expr={self.expr} is a list of tensors ({', '.join(tensors)})"
                                    ": on OpenCL a list may only hold numbers (a shape); run "
                                    "this model on the cpu backend")
            # A list with run-time items: evaluate it on the host (download, compute, upload).
            self._host = HostFallback(expression.Expression.from_operator(self.op), self.runtime)
            self._host.bind(inputs, outputs, in_specs, out_specs)
            return
        try:
            code = generate(self.expr, self.rpn, in_specs, out_specs[0])
        except CodegenError as e:
            # complex values, float16 ...: the NumPy evaluator computes them (graph.fallbacks)
            return self.fall_back_to_host(inputs, outputs, in_specs, out_specs, str(e))
        label = f"pnnx.Expression {self.expr}"
        program = self.runtime.program_from_source(code.source, [], label)
        self.source = code.source  # kept for reading and debugging: print(layer.source)
        if code.n == 0:
            return
        kernel = self.runtime.kernel_of(program, KERNEL_NAME, label)
        kernel.set_args(*[inputs[k].data for k in code.inputs], outputs[0].data)
        self.launches = [Launch(kernel, (round_up(code.n, 64),))]

    def enqueue(self, queue, wait_for):
        if self._host is not None:
            return self._host.enqueue(queue, wait_for)
        return super().enqueue(queue, wait_for)
