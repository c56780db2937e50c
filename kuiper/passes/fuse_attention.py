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

The same models split heads and put them back together with permutes around the chain:

    q = x.view(n, l, h, d).permute(0, 2, 1, 3)       Tensor.reshape, Tensor.permute (a copy)
    out = out.permute(0, 2, 1, 3).reshape(n, l, e)   Tensor.permute (a copy), Tensor.reshape

A permute that only the chain reads (Q's, K^T's, V's), and one that only reads the chain's
result, is absorbed too: the fused operator reads the tensor the permute read, through the
permutation (`q_perm`, `k_perm`, `v_perm`, `o_perm`), so the kernel walks the heads in place
with other strides and four copies per attention disappear. Only where the head dim stays the
contiguous one (the kernel reads rows of Q, V and the output as vectors), and for K^T where
either of its last two dims is.

And when Q, K and V are three linear layers of the same tensor, each only split into heads
(`self.query(x).view(...)`: nn.Linear, then Tensor.reshape, then the absorbed permute), the
fused operator takes the three projections too (`projected`): it reads x, and on OpenCL runs
one GEMM with the three weights side by side into a (tokens, Eq + Ek + Ev) scratch buffer, the
heads read from it in place, as nn.MultiheadAttention's fused path does. Three narrow products
become one three times wider: at 128 tokens a 768-wide projection leaves most of a GPU idle.
"""

from __future__ import annotations

import numpy as np

from kuiper.core.ir import RuntimeOperator
from kuiper.core.registry import is_kuipers, layer_for
from kuiper.layers.cpu.attention import FUSED_TYPE
from kuiper.layers.cpu.permute import PermuteLayer
from kuiper.layers.cpu.reshape import Reshape
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
        # timm scales the query before the product (q = q * d ** -0.5): the same scale
        scaler = graph.operands[q].producer
        if (scaler is not None and scaler.type == "pnnx.Expression" and _own(scaler)
                and sole_reader(q) is producer and len(scaler.inputs) == 1):
            found = _scale_and_mask(scaler, plan)
            if found is not None and found[1] is None:
                scale *= found[0]
                q = found[2]
                chain.append(scaler)
        names = [q, kt, v] + ([mask] if mask is not None else [])
        if not all(plain(n) for n in names + [scores, probs, second.outputs[0].name]):
            continue
        moves = _layout_moves(graph, plan, names, [producer, *chain, softmax, second],
                              readers, kept)
        projections = _projections(graph, plan, moves, readers, kept)
        op = _fused_operator(graph, second, names, scale, moves, projections)
        if op is None and projections:   # shapes it refuses: try without the projections
            projections = {}
            op = _fused_operator(graph, second, names, scale, moves, projections)
        if op is None and moves:   # or without the moves
            moves = {}
            op = _fused_operator(graph, second, names, scale, moves, projections)
        if op is None:
            continue
        absorbed = [producer, *chain, softmax, *(move for move, _, _ in moves.values()),
                    *(o for role in projections for o in projections[role])]
        plan.replaced[second.name] = op
        for old in absorbed:
            plan.absorbed[old.name] = second.name
        plan.unavailable.update(o.outputs[0].name for o in absorbed
                                if o.outputs[0].name not in {x.name for x in op.outputs})
        if "o" in moves:   # the chain's own result is never written: the permute's is
            plan.unavailable.add(second.outputs[0].name)
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


def _layout_moves(graph, plan: Plan, names: list[str], chain: list, readers, kept) -> dict:
    """{role: (permute operator, permutation, the operand it reads)} of the permutes the fused
    operator can absorb (the module docstring says which): "q", "k", "v" before the chain, "o"
    after it."""
    specs = graph.specs
    members = {op.name for op in chain}
    moves = {}
    for role, name in zip(("q", "k", "v"), names):
        move = graph.operands[name].producer
        if (move is None or not isinstance(move.layer, PermuteLayer) or not _own(move)
                or name in kept or move.name in plan.replaced
                or any(r.name not in members for r in readers.get(name, []))):
            continue
        perm = list(move.layer.perm)
        source = plan.resolve(move.inputs[0].name)
        contiguous = len(perm) - 1   # the source's last dim: the one read as vectors
        ok = (perm[-2] == contiguous or perm[-1] == contiguous) if role == "k" \
            else perm[-1] == contiguous
        if ok and specs[source].dtype == np.float32 and not specs[source].dynamic:
            moves[role] = (move, perm, source)
    result = chain[-1].outputs[0].name
    after = readers.get(result, [])
    if len(after) == 1 and result not in kept:
        move = after[0]
        if (isinstance(move.layer, PermuteLayer) and _own(move) and move.name not in plan.replaced
                and list(move.layer.perm)[-1] == len(move.layer.perm) - 1):
            moves["o"] = (move, list(move.layer.perm), None)
    return moves


LINEAR_TYPES = ("nn.Linear",)


def _projections(graph, plan: Plan, moves: dict, readers, kept) -> dict:
    """{role: (linear layer, reshape)} for Q, K and V when all three are linear layers of one
    tensor, each read only by a reshape that only the absorbed permute reads (the module
    docstring); else {}."""
    if not {"q", "k", "v"} <= set(moves):   # (moves may hold "o" without one of these)
        return {}
    found, sources = {}, set()
    for role in ("q", "k", "v"):
        move, _perm, split = moves[role]
        reshape = graph.operands[split].producer
        if (reshape is None or not isinstance(reshape.layer, Reshape) or not _own(reshape)
                or split in kept or [r.name for r in readers.get(split, [])] != [move.name]):
            return {}
        projected = plan.resolve(reshape.inputs[0].name)
        linear = graph.operands[projected].producer
        if (linear is None or linear.type not in LINEAR_TYPES or not _own(linear)
                or getattr(linear.layer, "weight", None) is None or projected in kept
                or linear.name in plan.epilogues
                or [r.name for r in readers.get(projected, [])] != [reshape.name]):
            return {}
        sources.add(plan.resolve(linear.inputs[0].name))
        found[role] = (linear, reshape)
    widths = {found[role][0].layer.weight.shape[1] for role in found}
    return found if len(sources) == 1 and len(widths) == 1 else {}


def _fused_operator(graph, second, inputs: list[str], scale: float, moves: dict,
                    projections: dict) -> RuntimeOperator | None:
    """The fused operator standing in for `second` (the last matmul): same name and line, its
    layer made and its shapes inferred now; None if the layer refuses the shapes. `moves`:
    _layout_moves' permutes, whose inputs it reads instead (and whose output it writes);
    `projections`: _projections' linear layers, whose input it reads instead of Q, K and V."""
    params = {"scale": scale, "masked": len(inputs) == 4}
    attributes = {}
    inputs = list(inputs)
    for index, role in enumerate(("q", "k", "v")):
        if role in moves:
            _move, perm, source = moves[role]
            inputs[index] = source
            params[f"{role}_perm"] = perm
    if projections:   # x, then the mask: Q, K and V are computed inside
        linear = projections["q"][0]
        inputs = [linear.inputs[0].name] + inputs[3:]
        params["projected"] = True
        for role, (linear, _reshape) in projections.items():
            params[f"{role}_shape"] = list(graph.specs[moves[role][2]].shape)
            attributes[f"{role}_weight"] = np.asarray(linear.layer.weight, np.float32)
            if linear.layer.bias is not None:
                attributes[f"{role}_bias"] = np.asarray(linear.layer.bias, np.float32)
    outputs = list(second.outputs)
    if "o" in moves:
        move, perm, _ = moves["o"]
        outputs = list(move.outputs)
        params["o_perm"] = perm
    op = RuntimeOperator(second.name, FUSED_TYPE, params=params, attributes=attributes,
                         inputs=[graph.operands[n] for n in inputs], outputs=outputs,
                         line=second.line, source=second.source)
    cls = layer_for(FUSED_TYPE, graph.backend)
    layer = cls.from_operator(op)
    try:
        (out,) = layer.infer([graph.specs[n] for n in inputs])
    except Exception:  # noqa: BLE001 - shapes it cannot take: leave the chain as it is
        return None
    if out.shape != graph.specs[outputs[0].name].shape:
        return None
    op.layer = layer
    return op
