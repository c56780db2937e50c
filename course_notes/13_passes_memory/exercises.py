"""Lesson 13 exercises: the memory planner's lower bound, and its greedy-by-size strategy.

Both work on `Lifetime`s (kuiper/memory/lifetimes.py): a tensor's `name`, its `size` in
bytes, and the steps `first` (the step that writes it) and `last` (the last step that reads
it), both INCLUSIVE. `a.overlaps(b)` says whether two tensors are ever alive at the same step.

Fill in the functions, then run `kuiper course check 13`. The answers are the engine's own:
`lower_bound` at the end of kuiper/memory/lifetimes.py (which defines `Lifetime`: its
docstring is all you need of that file), `_greedy_by_size` in kuiper/memory/strategies.py. Try
first, read them after.
"""

from __future__ import annotations

from collections.abc import Iterable

from kuiper.memory.lifetimes import Lifetime, align_up  # noqa: F401 - align_up(n, alignment)
from kuiper.memory.strategies import Plan  # noqa: F401 - what greedy_by_size fills in


def lower_bound(tensors: Iterable[Lifetime], alignment: int = 1) -> int:
    """The most bytes alive at one step: no memory plan can use fewer.

    A tensor is alive at every step from `first` to `last`, both included. Round each size up
    to `alignment` first (`align_up(t.size, alignment)`), as the planner does. No tensors: 0.

    Hint: walking every step works; a sweep is faster on long graphs: +size at step `first`,
    -size at step `last + 1`, then a running sum over the sorted steps. Keep its maximum.
    """
    raise NotImplementedError("lesson 13: write lower_bound")


def greedy_by_size(tensors: list[Lifetime], alignment: int, result: Plan) -> None:
    """Place every tensor in ONE arena, largest first; write the placement into `result`.

    For each tensor, from the largest to the smallest (ties: the earlier `first`, then the
    name), with its size rounded up to `alignment`:

    1. collect the tensors already placed whose lifetimes overlap this one (`t.overlaps`):
       their byte ranges [offset, offset + rounded size) are taken;
    2. walk those ranges by offset, lowest first, and look at the free gaps between them
       (from byte 0 up): choose the smallest gap the tensor fits in (the least waste). The
       ranges may overlap one another (tensors never alive together share bytes): a gap
       starts at the highest end seen so far, not at the previous range's end;
    3. if none fits, put it above all of them (the end of the highest one).

    Then set `result.offsets[t.name]` to its offset and `result.blocks[t.name] = 0` (one
    block: the arena) for every tensor, and finally append the arena's size (the highest
    offset + rounded size, 0 for no tensors) to `result.block_sizes`, once.
    Every offset stays a multiple of `alignment` as long as every rounded size is.

    In the framework, `plan(tensors, "greedy_by_size", alignment)` (kuiper/memory/
    strategies.py) makes the empty Plan, calls this function, and returns the Plan. The tests
    check what a plan promises and how large its arena is, not your exact offsets.
    """
    raise NotImplementedError("lesson 13: write greedy_by_size")
