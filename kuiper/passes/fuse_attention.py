"""fuse_attention: attention written out by hand becomes one fused attention operator.

Hugging Face models (and many others) do not call F.scaled_dot_product_attention: they write

    scores = torch.matmul(q, k.transpose(-1, -2))      torch.matmul          (..., L, S)
    scores = scores / math.sqrt(d) + mask              pnnx.Expression       (optional)
    probs = torch.softmax(scores, dim=-1)              F.softmax
    out = torch.matmul(probs, v)                       torch.matmul          (..., L, Ev)

and pnnx keeps those four operators. Run as written, the (..., L, S) score matrix is written to
memory and read back three times. This pass finds the chain and gives its last matmul a new
operator, `kuiper.fused_attention` (layers/cpu/attention.py, layers/opencl/attention.py), which
reads q, k^T (as the model computed it), v and the mask, and computes the same value with an
online softmax, the scores never stored (clkernels/attention_fused.cl on OpenCL). The other
three operators do not run; their outputs are no longer available (a run asking for them, or
one with an observer, uses the unfused plan).

The chain must be exactly that: each intermediate read by the next operator only and not a
graph output, float32, static shapes, softmax over the last dim, and an expression of the
scores that only scales them by a number (`div(@0,c)`, `mul(@0,c)`, `mul(c,@0)`) and may add one
other tensor, the mask, broadcast to the scores (`add(div(@0,c),@1)`, `add(@0,@1)` ...).
"""

from __future__ import annotations

import numpy as np

from kuiper.core.ir import RuntimeOperator
from kuiper.core.registry import is_kuipers, layer_for
from kuiper.layers.cpu.attention import FUSED_TYPE
from kuiper.passes.plan import PassReport, Plan

MATMULS = ("torch.matmul",)
SOFTMAXES = ("F.softmax", "nn.Softmax", "torch.softmax")


def fuse_attention(graph, plan: Plan) -> PassReport:
    """Replace each matmul -> [scale, mask] -> softmax -> matmul chain by one fused operator
    (the module docstring says which chains qualify)."""
    specs = graph.specs
    kept = {plan.resolve(name) for name in plan.outputs}
    readers = plan.readers()
    fused = []

    def sole_reader(name: str):
        ops = readers.get(name, [])
        return ops[0] if len(ops) == 1 and name not in kept else None

    def plain(name: str) -> bool:
        spec = specs[name]
        return spec.dtype == np.float32 and not spec.dynamic and not spec.known

    for softmax in list(plan.steps):
        if softmax.type not in SOFTMAXES or not _own(softmax) or softmax.name in plan.replaced:
            continue
        layer = softmax.layer
        scores = plan.resolve(softmax.inputs[0].name)
        rank = len(specs[scores].shape)
        if getattr(layer, "axis", None) != rank - 1 or rank < 2:
            continue
        probs = softmax.outputs[0].name
        second = sole_reader(probs)
        if (second is None or second.type not in MATMULS or not _own(second)
                or len(second.inputs) != 2 or plan.resolve(second.inputs[0].name) != probs):
            continue
        # what produces the scores: the first matmul, perhaps through a scaling expression
        producer = graph.operands[scores].producer
        scale, mask, chain = 1.0, None, []
        if producer is not None and producer.type == "pnnx.Expression" and _own(producer) \
                and sole_reader(scores) is softmax:
            found = _scale_and_mask(producer, plan)
            if found is None:
                continue
            scale, mask, raw = found
            chain.append(producer)
            scores = raw
            producer = graph.operands[raw].producer
        if (producer is None or producer.type not in MATMULS or not _own(producer)
                or len(producer.inputs) != 2 or sole_reader(scores) not in (softmax, *chain)):
            continue
        q, kt = (plan.resolve(o.name) for o in producer.inputs)
        v = plan.resolve(second.inputs[1].name)
        names = [q, kt, v] + ([mask] if mask is not None else [])
        if not all(plain(n) for n in names + [scores, probs, second.outputs[0].name]):
            continue
        op = _fused_operator(graph, second, names, scale)
        if op is None:
            continue
        absorbed = [producer, *chain, softmax]
        plan.replaced[second.name] = op
        for old in absorbed:
            plan.absorbed[old.name] = second.name
        plan.unavailable.update(o.outputs[0].name for o in absorbed)
        readers = plan.readers()
        fused.append(f"{second.name} ({FUSED_TYPE}) computes "
                     f"{', '.join(f'{o.name} ({o.type})' for o in absorbed + [second])}")
    count = len(fused)
    return PassReport("fuse_attention", f"{count} attention{'' if count == 1 else 's'} fused "
                      "(the score matrix never stored)", fused, count)


def _own(op) -> bool:
    """Kuiper's own layer (a plugin's may compute something else under the same type)."""
    return op.layer is not None and is_kuipers(type(op.layer))


def _scale_and_mask(expression, plan: Plan) -> tuple[float, str | None, str] | None:
    """(scale, mask operand or None, raw scores operand) of an expression that scales the
    scores by a number and perhaps adds a mask, else None."""
    from kuiper.parser.expression.ast import Call, Input, Literal

    names = [plan.resolve(o.name) for o in expression.inputs]
    tree = expression.layer.tree

    def number(node) -> float | None:
        if isinstance(node, Literal) and isinstance(node.value, (int, float)) \
                and not isinstance(node.value, bool):
            return float(node.value)
        return None

    def scaled(node) -> tuple[float, int] | None:
        """(scale, input index) of @k, div(@k,c), mul(@k,c) or mul(c,@k)."""
        if isinstance(node, Input):
            return 1.0, node.index
        if isinstance(node, Call) and len(node.args) == 2 and node.name in ("div", "mul"):
            a, b = node.args
            if isinstance(a, Input) and number(b):
                return (1.0 / number(b) if node.name == "div" else number(b)), a.index
            if node.name == "mul" and isinstance(b, Input) and number(a):
                return number(a), b.index
        return None

    found = scaled(tree)
    if found is not None and isinstance(tree, Call):   # only a scale: no mask
        return found[0], None, names[found[1]]
    if isinstance(tree, Call) and tree.name == "add" and len(tree.args) == 2:
        for left, right in (tree.args, tree.args[::-1]):
            found = scaled(left)
            if found is not None and isinstance(right, Input) and right.index != found[1]:
                return found[0], names[right.index], names[found[1]]
    return None


def _fused_operator(graph, second, inputs: list[str], scale: float) -> RuntimeOperator | None:
    """The fused operator standing in for `second` (the last matmul): same name, outputs and
    line, its layer made and its shapes inferred now; None if the layer refuses the shapes."""
    op = RuntimeOperator(second.name, FUSED_TYPE,
                         params={"scale": scale, "masked": len(inputs) == 4},
                         inputs=[graph.operands[n] for n in inputs], outputs=list(second.outputs),
                         line=second.line, source=second.source)
    cls = layer_for(FUSED_TYPE, graph.backend)
    layer = cls.from_operator(op)
    try:
        (out,) = layer.infer([graph.specs[n] for n in inputs])
    except Exception:  # noqa: BLE001 - shapes it cannot take: leave the chain as it is
        return None
    if out.shape != graph.specs[second.outputs[0].name].shape:
        return None
    op.layer = layer
    return op
