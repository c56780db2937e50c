"""Where each tensor lives: three strategies, named as in TFLite's GPU delegate.

A plan places every tensor (a `Lifetime`) in a *block* at an *offset*. Two tensors whose
lifetimes overlap never share a byte; two that are never alive together may. The strategies:

- `naive`: every tensor its own block, as if nothing were ever reused (what the OpenCL backend
  did before the planner). The total is the sum of all tensor sizes.
- `greedy_in_order`: walk the tensors in order of birth; a tensor takes the free block that fits
  it best (the smallest one large enough, else the largest one, grown), or a new block. Blocks
  are pooled buffers: each is as large as the largest tensor it ever holds.
- `greedy_by_size`: one arena. Largest tensors first, each at the lowest-waste offset that
  overlaps no tensor already placed whose lifetime overlaps its own (the best-fitting gap, else
  above them all). Big tensors placed first leave small gaps that small tensors fill.

`lower_bound` (kuiper/memory/lifetimes.py), the most bytes alive at once, is what no strategy
can beat; `kuiper info --memory` prints every plan beside it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from kuiper.core.errors import KuiperError
from kuiper.memory.lifetimes import Lifetime, align_up, lower_bound

STRATEGIES = ("naive", "greedy_in_order", "greedy_by_size")
DEFAULT_STRATEGY = "greedy_by_size"


class MemoryPlanError(KuiperError):
    """An unknown strategy name, or a plan that breaks its own promise."""


@dataclass
class Plan:
    """`offsets[name]`: where a tensor starts, in one address space where block k occupies
    `[block_starts[k], block_starts[k] + block_sizes[k])`; `blocks[name]`: its block. An arena
    plan has one block; a pooled plan several (one buffer each). `total`: the bytes of all
    blocks. `lower_bound`: the most bytes alive at once, for comparison."""

    strategy: str
    alignment: int
    offsets: dict[str, int] = field(default_factory=dict)
    blocks: dict[str, int] = field(default_factory=dict)
    block_sizes: list[int] = field(default_factory=list)
    lower_bound: int = 0

    @property
    def total(self) -> int:
        return sum(self.block_sizes)

    @property
    def block_starts(self) -> list[int]:
        starts, at = [], 0
        for size in self.block_sizes:
            starts.append(at)
            at += size
        return starts

    def offset_in_block(self, name: str) -> int:
        return self.offsets[name] - self.block_starts[self.blocks[name]]

    @property
    def ratio(self) -> float:
        """total / lower bound: 1.0 is a perfect plan."""
        return self.total / self.lower_bound if self.lower_bound else 1.0


def check_strategy(name: str) -> str:
    if name not in STRATEGIES:
        raise MemoryPlanError(f"memory={name!r}: unknown memory plan strategy; expected one of "
                              f"{', '.join(STRATEGIES)}")
    return name


def plan(tensors: Sequence[Lifetime], strategy: str = DEFAULT_STRATEGY,
         alignment: int = 1) -> Plan:
    """Place `tensors` with `strategy`. Every offset is a multiple of `alignment` (bytes; on
    OpenCL the device's CL_DEVICE_MEM_BASE_ADDR_ALIGN, which sub-buffers need), sizes are
    rounded up to it."""
    check_strategy(strategy)
    if alignment < 1:
        raise MemoryPlanError(f"alignment={alignment}: expected a positive number of bytes")
    placer = {"naive": _naive, "greedy_in_order": _greedy_in_order,
              "greedy_by_size": _greedy_by_size}[strategy]
    result = Plan(strategy, alignment, lower_bound=lower_bound(tensors, alignment))
    placer(list(tensors), alignment, result)
    starts = result.block_starts
    for name, block in result.blocks.items():  # offsets were relative to their block
        result.offsets[name] += starts[block]
    return result


def _naive(tensors: list[Lifetime], alignment: int, result: Plan) -> None:
    for t in tensors:
        result.blocks[t.name] = len(result.block_sizes)
        result.offsets[t.name] = 0
        result.block_sizes.append(align_up(t.size, alignment))


def _greedy_in_order(tensors: list[Lifetime], alignment: int, result: Plan) -> None:
    free: list[int] = []           # blocks nobody holds now
    held: list[tuple[int, int]] = []  # (last step, block) of the blocks in use
    sizes = result.block_sizes
    for t in sorted(tensors, key=lambda t: (t.first, t.last)):
        for entry in [e for e in held if e[0] < t.first]:  # their tensors died: free again
            held.remove(entry)
            free.append(entry[1])
        size = align_up(t.size, alignment)
        fitting = [b for b in free if sizes[b] >= size]
        if fitting:
            block = min(fitting, key=lambda b: sizes[b])  # best fit: least waste
        elif free:
            block = max(free, key=lambda b: sizes[b])  # grow the largest: the least to add
            sizes[block] = size
        else:
            block = len(sizes)
            sizes.append(size)
        if block in free:
            free.remove(block)
        held.append((t.last, block))
        result.blocks[t.name] = block
        result.offsets[t.name] = 0


def _greedy_by_size(tensors: list[Lifetime], alignment: int, result: Plan) -> None:
    placed: list[tuple[int, int, Lifetime]] = []  # (offset, size, tensor)
    top = 0
    for t in sorted(tensors, key=lambda t: (-t.size, t.first, t.name)):
        size = align_up(t.size, alignment)
        busy = sorted((o, s) for o, s, other in placed if other.overlaps(t))
        best, best_gap, at = None, None, 0
        for offset, length in busy:  # gaps between the neighbours in time, lowest first
            gap = offset - at
            if gap >= size and (best_gap is None or gap < best_gap):
                best, best_gap = at, gap
            at = max(at, offset + length)
        offset = best if best is not None else at
        placed.append((offset, size, t))
        result.offsets[t.name] = offset
        result.blocks[t.name] = 0
        top = max(top, offset + size)
    result.block_sizes.append(top)


def conflicts(result: Plan, tensors: Sequence[Lifetime]) -> list[tuple[str, str]]:
    """Pairs of tensors alive together whose bytes overlap: a correct plan has none."""
    spans = {t.name: (result.offsets[t.name], result.offsets[t.name] + t.size) for t in tensors}
    found = []
    ordered = sorted(tensors, key=lambda t: t.first)
    for i, a in enumerate(ordered):
        for b in ordered[i + 1:]:
            if b.first > a.last:
                break
            (a0, a1), (b0, b1) = spans[a.name], spans[b.name]
            if a0 < b1 and b0 < a1:
                found.append((a.name, b.name))
    return found
