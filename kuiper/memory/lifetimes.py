"""Lifetimes: when each tensor of one inference is written first and read last.

The memory planner (kuiper/memory/strategies.py) may give two tensors the same bytes only when
their lifetimes do not overlap. A lifetime is a closed interval of *steps*, the positions in the
execution order (0 = the first operator that runs):

- a tensor is born at the step that writes it; a graph input is born at step 0 (it is uploaded
  before anything runs);
- it dies at the last step that reads it; a graph output lives to the last step (it is
  downloaded after the last operator), and so does anything the user asked for;
- a *view* (a reshape on the device, an operator removed as a no-op: an alias) owns no bytes:
  reading the view reads its base, so the view's readers extend the base's lifetime;
- a layer's *workspace* (im2col's column matrix) lives during its one step.

Both ends are inclusive: an operator's inputs and outputs are alive at its step at once, so a
kernel never writes into the bytes it is reading (in-place reuse is a separate, explicit
decision).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from kuiper.core.limits import tensor_bytes


@dataclass(frozen=True)
class Lifetime:
    """One tensor the planner places: `size` bytes, alive from step `first` to step `last`."""

    name: str
    size: int
    first: int
    last: int

    def overlaps(self, other: Lifetime) -> bool:
        return self.first <= other.last and other.first <= self.last


def spec_bytes(spec) -> int:
    """Bytes a tensor needs on the device, 0 for what owns no device memory: a value known at
    build time (folded), or an object (a Python list an expression returns)."""
    if spec is None or spec.known or spec.dtype.kind == "O":
        return 0
    return tensor_bytes(spec.shape, spec.dtype.itemsize)


def roots_of(name: str, views: Mapping[str, str | Sequence[str]]) -> set[str]:
    """The operands owning the bytes of `name`: follow view -> base links to the end. A view
    may name several bases when it is only known that it *may* share their bytes (a NumPy
    layer's result can be a view of any of its inputs)."""
    roots, stack, seen = set(), [name], set()
    while stack:
        current = stack.pop()
        if current in seen:
            continue
        seen.add(current)
        bases = views.get(current)
        if bases is None:
            roots.add(current)
        else:
            stack.extend([bases] if isinstance(bases, str) else bases)
    return roots


def operand_lifetimes(steps: Sequence, specs: Mapping, inputs: Iterable[str],
                      outputs: Iterable[str],
                      views: Mapping[str, str | Sequence[str]] | None = None,
                      reads: Callable[[object], Iterable[str]] | None = None
                      ) -> list[Lifetime]:
    """The lifetime of every operand that owns bytes, in order of birth.

    `steps`: the operators that run, in execution order (folded, dead and fused ones left
    out). `inputs` / `outputs`: the graph's ports (outputs live to the end). `views`: {view
    operand: its base, or the bases it may share bytes with}: a view owns no bytes. `reads(op)`:
    the operands a step reads (default: its inputs; with graph passes, `plan.step_inputs`,
    which resolves aliases and adds a fused epilogue's residual).
    """
    views = dict(views or {})
    first: dict[str, int] = {}
    last: dict[str, int] = {}

    def read(name: str, step: int) -> None:
        for base in roots_of(name, views):
            last[base] = max(last.get(base, step), step)

    for name in inputs:
        first.setdefault(name, 0)
        last.setdefault(name, 0)
    for step, op in enumerate(steps):
        names = [o.name for o in op.inputs] if reads is None else reads(op)
        for name in names:
            read(name, step)
        for operand in op.outputs:
            if operand.name in views:
                read(operand.name, step)  # a view is read as it is made: its base is alive
                continue
            first.setdefault(operand.name, step)
            last.setdefault(operand.name, step)  # never read: still written at this step
    end = max(len(steps) - 1, 0)
    for name in outputs:
        for base in roots_of(name, views):
            if base in first:
                last[base] = end
    result = []
    for name, born in first.items():
        size = spec_bytes(specs.get(name))
        if size:
            result.append(Lifetime(name, size, born, last[name]))
    return result


def lower_bound(tensors: Iterable[Lifetime], alignment: int = 1) -> int:
    """The most bytes alive at one step: no plan can use less (TFLite calls it the lower
    bound of the memory a strategy may reach). Sizes are rounded up to `alignment`, as the
    planner rounds them, so a plan and its bound compare like with like."""
    delta: dict[int, int] = {}
    for t in tensors:
        size = align_up(t.size, alignment)
        delta[t.first] = delta.get(t.first, 0) + size
        delta[t.last + 1] = delta.get(t.last + 1, 0) - size
    alive = peak = 0
    for step in sorted(delta):
        alive += delta[step]
        peak = max(peak, alive)
    return peak


def align_up(n: int, alignment: int) -> int:
    return (n + alignment - 1) // alignment * alignment
