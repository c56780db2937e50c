"""fuse_epilogues: an activation and a residual add fold into the convolution, linear or matmul
that produces their input (kuiper/passes/epilogue.py says how each backend carries it out)."""

from __future__ import annotations

import numpy as np

from kuiper.core.registry import is_kuipers
from kuiper.passes.epilogue import Epilogue, Step, expression_c
from kuiper.passes.plan import PassReport, Plan

# The residual adds pnnx writes for `y + r` / `r + y` (torch.add(y, r) is written the same).
RESIDUAL_ADDS = ("add(@0,@1)", "add(@1,@0)")


def fuse_epilogues(graph, plan: Plan) -> PassReport:
    """After a producer whose layer class sets `accepts_epilogue` (convolutions 1-D to 3-D and
    transposed, Linear / F.linear, matmul, pnnx.Expression), fold in what follows, in model
    order: elementwise activations of Kuiper's own (ReLU, ReLU6, LeakyReLU, SiLU, Hardswish,
    Sigmoid, GELU, Tanh, Hardtanh, clamp ...), elementwise expressions of the value and
    numbers (`mul(@0,2)`, `add(@0,0.5)`: + - * / neg square), and at most one residual add
    (`add(@0,@1)` whose other operand has the output's shape, and is computed before the
    producer runs): `act(y + r)`, `act(y) + r`, `mul(silu(y),2)` ...

    Each step needs the value it follows to be float32, of a static shape, read by exactly one
    operator and not a graph output: otherwise someone would see the fused value where the
    model has the raw one. The absorbed operators do not run; their output is the producer's.
    A run that asks for such a raw value (`outputs=`, an observer) uses the unfused plan."""
    specs, position = graph.specs, {op.name: i for i, op in enumerate(plan.order)}
    kept = {plan.resolve(name) for name in plan.outputs}
    readers = plan.readers()
    fused = []

    def plain_float(name: str, shape=None) -> bool:
        spec = specs[name]
        return (spec.dtype == np.float32 and not spec.dynamic and not spec.known
                and len(spec.shape) > 0 and (shape is None or spec.shape == shape))

    def sole_reader(name: str):
        ops = readers.get(name, [])
        return ops[0] if len(ops) == 1 and name not in kept else None

    def residual_of(op, value: str, producer) -> str | None:
        """The other operand of a residual add of `value`, if it may be fused."""
        expr = "".join(str(getattr(op.layer, "expr", "")).split())
        names = [plan.resolve(o.name) for o in op.inputs]
        if op.type != "pnnx.Expression" or expr not in RESIDUAL_ADDS or len(names) != 2 \
                or names.count(value) != 1:
            return None
        other = names[1 - names.index(value)]
        source = graph.operands[other].producer
        ready = (source is None or source.layer is None or source.name in plan.folded
                 or position.get(source.name, len(position)) < position[producer.name])
        shape = specs[value].shape
        if not ready or not plain_float(other, shape) or not plain_float(op.outputs[0].name,
                                                                          shape):
            return None
        return other

    def step_of(op, value: str) -> Step | None:
        """`op` as an elementwise step of `value`, if it may be fused."""
        layer, names = op.layer, [plan.resolve(o.name) for o in op.inputs]
        if len(op.outputs) != 1 or value not in names or not is_kuipers(type(layer)) \
                or not plain_float(op.outputs[0].name, specs[value].shape):
            return None
        if not all(n == value or (specs[n].known and specs[n].value is not None)
                   for n in names):
            return None  # another tensor: not elementwise in the value alone
        constants = tuple(None if n == value else specs[n].value for n in names)
        if getattr(layer, "fusable_activation", False):
            # not a host fallback (it has its kernel); the value is its input 0
            ok = layer.backend == graph.backend and names[0] == value
            return Step(op, constants) if ok else None
        if op.type == "pnnx.Expression":
            try:
                expression_c(layer.tree, constants)  # only arithmetic an epilogue takes
            except ValueError:
                return None
            return Step(op, constants)
        return None

    for producer in map(plan.step, plan.order):
        # (a plugin's subclass may override forward without the epilogue: Kuiper's own only)
        if not plan.runs(producer) or len(producer.outputs) != 1 or not is_kuipers(
                type(producer.layer)) or not getattr(producer.layer, "accepts_epilogue", False):
            continue
        value = producer.outputs[0].name
        if not plain_float(value):
            continue
        before, residual, after, chain = [], None, [], []
        while (op := sole_reader(value)) is not None:
            if residual is None and (other := residual_of(op, value, producer)) is not None:
                residual = other
            elif (step := step_of(op, value)) is not None:
                (before if residual is None else after).append(step)
            else:
                break
            chain.append(op)
            value = op.outputs[0].name
        if not chain:
            continue
        epilogue = Epilogue(tuple(before), residual, tuple(after), tuple(o.name for o in chain))
        plan.epilogues[producer.name] = epilogue
        out = producer.outputs[0].name
        for op in chain:
            plan.absorbed[op.name] = producer.name
            plan.aliases[op.outputs[0].name] = out
        # the raw output and the values between: no array holds them any more
        plan.unavailable.update([out] + [op.outputs[0].name for op in chain[:-1]])
        # the readers of the chain's end now read the producer's output
        readers[out] = readers.pop(value, [])
        fused.append(f"{producer.name} ({producer.type}) writes {epilogue.describe()}, "
                     f"absorbing {', '.join(f'{o.name} ({o.type})' for o in chain)}")
    count, producers = sum(len(e.absorbed) for e in plan.epilogues.values()), len(fused)
    return PassReport("fuse_epilogues", f"{count} operator{'' if count == 1 else 's'} fused "
                      f"into {producers} producer{'' if producers == 1 else 's'} "
                      "(y: a producer's own result)", fused, count)
