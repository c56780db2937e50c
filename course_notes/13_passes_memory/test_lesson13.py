"""Lesson 13: the lower bound of a memory plan, and greedy-by-size planning.

Every plan is checked for what a plan must promise, with the checks written out here (never
the framework's own `conflicts`): every tensor placed, in one arena, at aligned offsets, no two
tensors that are alive at the same step sharing a byte, and an arena no smaller than the lower
bound and at most a stated factor above it. On hand-made lifetimes first (a chain, a residual
block, the case where placing small tensors first wastes memory, seeded random ones), then on
the lifetimes of real models: the demo model, and a small MobileNet exported with pnnx, on the
CPU and, with the device's alignment, on OpenCL.
"""

from __future__ import annotations

import numpy as np
import pytest

from kuiper.course.lessons import implementation, require_opencl
from kuiper.memory.lifetimes import Lifetime, align_up
from kuiper.memory.strategies import Plan

REFERENCE = {
    "lower_bound": "kuiper.memory.lifetimes:lower_bound",
    "greedy_by_size": "kuiper.memory.strategies:_greedy_by_size",
}
ex = implementation(__file__, REFERENCE)
# What `kuiper course check` says before it starts (2-core laptop CPU, PoCL): most of it
# exports a small MobileNet with pnnx.
CHECK_TIME = "about half a minute"

# How far above the lower bound a greedy-by-size arena may be. Measured on the seeded
# `random_cases()` below, with the reference (kuiper/memory/strategies.py): 1.31x at worst,
# 1.026x over all cases together (the first gap that fits instead of the best one: 1.025x);
# placing the tensors in order of birth instead: 1.074x, smallest first: 1.100x. On real
# models the reference reaches the bound (1.00x); 1.10x is the target the memory planner is
# held to (tests/unit/test_memory_plan.py).
WORST_CASE_FACTOR = 2.0
RANDOM_CASES_FACTOR = 1.05
MODEL_FACTOR = 1.10


# --- the checks -------------------------------------------------------------------------------

def alive_at_each_step(tensors, alignment=1) -> dict[int, int]:
    """{step: bytes alive at that step}, step by step: slow and obviously right."""
    alive: dict[int, int] = {}
    for t in tensors:
        for step in range(t.first, t.last + 1):
            alive[step] = alive.get(step, 0) + align_up(t.size, alignment)
    return alive


def true_bound(tensors, alignment=1) -> int:
    return max(alive_at_each_step(tensors, alignment).values(), default=0)


def check_bound(got, tensors, alignment, what) -> None:
    """`got` is the most bytes alive at one step; else say at which step that is."""
    __tracebackhide__ = True
    alive = alive_at_each_step(tensors, alignment)
    want = max(alive.values(), default=0)
    if got != want:
        step = max(alive, key=lambda s: (alive[s], -s)) if alive else None
        there = [t.name for t in tensors if step is not None and t.first <= step <= t.last]
        raise AssertionError(f"{what}: lower_bound is {got}, expected {want}: the bytes alive "
                             f"at step {step}, where {len(there)} tensors are alive "
                             f"({', '.join(there[:8])}{', ...' if len(there) > 8 else ''})")


def planned(tensors, alignment=1) -> Plan:
    """Your greedy_by_size on `tensors`, called as kuiper.memory.strategies.plan calls it."""
    result = Plan("greedy_by_size", alignment, lower_bound=true_bound(tensors, alignment))
    returned = ex.greedy_by_size(list(tensors), alignment, result)
    assert returned is None, "greedy_by_size fills in `result` and returns nothing"
    return result


def step_range(first: int, last: int) -> str:
    return f"step {first}" if first == last else f"steps {first}..{last}"


def overlap_message(a, b, offsets, alignment) -> str | None:
    """Why a and b may not be where they are, or None when they may."""
    if not (a.first <= b.last and b.first <= a.last):
        return None  # never alive together: they may share bytes
    a0, b0 = offsets[a.name], offsets[b.name]
    a1, b1 = a0 + align_up(a.size, alignment), b0 + align_up(b.size, alignment)
    if a0 < b1 and b0 < a1:
        return (f"'{a.name}' ({step_range(a.first, a.last)}, bytes {a0}..{a1}) and '{b.name}' "
                f"({step_range(b.first, b.last)}, bytes {b0}..{b1}) are both alive at "
                f"{step_range(max(a.first, b.first), min(a.last, b.last))} but share bytes "
                f"{max(a0, b0)}..{min(a1, b1)}")
    return None


def check_plan(result: Plan, tensors, alignment=1, factor=WORST_CASE_FACTOR,
               what="plan") -> None:
    """Every promise of an arena plan, with a message that says which one is broken."""
    __tracebackhide__ = True
    names = {t.name for t in tensors}
    missing = sorted(names - set(result.offsets))
    assert not missing, f"{what}: no offset for {missing[:5]} ({len(missing)} not placed)"
    extra = sorted(set(result.offsets) - names)
    assert not extra, f"{what}: offsets for tensors that do not exist: {extra[:5]}"
    not_arena = sorted(n for n in names if result.blocks.get(n) != 0)
    assert not not_arena, f"{what}: result.blocks[name] should be 0 (the arena) for " \
        f"every tensor; not for {not_arena[:5]}"
    assert len(result.block_sizes) == 1, f"{what}: result.block_sizes should hold one " \
        f"size, the arena's; it is {result.block_sizes[:5]}"
    arena = result.block_sizes[0]
    for t in tensors:
        offset = result.offsets[t.name]
        assert offset >= 0 and offset % alignment == 0, \
            f"{what}: '{t.name}' at offset {offset}, not a multiple of {alignment} >= 0"
        end = offset + align_up(t.size, alignment)
        assert end <= arena, f"{what}: '{t.name}' ends at byte {end}, past the arena's " \
            f"{arena} bytes"
    ordered = sorted(tensors, key=lambda t: (t.first, t.name))
    for i, a in enumerate(ordered):
        for b in ordered[i + 1:]:
            if b.first > a.last:
                break
            problem = overlap_message(a, b, result.offsets, alignment)
            if problem is not None:
                raise AssertionError(f"{what}: {problem}")
    bound = true_bound(tensors, alignment)
    assert arena >= bound, f"{what}: an arena of {arena} bytes holds fewer than the " \
        f"{bound} bytes alive at once: impossible, check the checks"
    if tensors:
        assert arena <= factor * bound, \
            f"{what}: an arena of {arena:,} bytes is {arena / bound:.2f}x the lower bound " \
            f"of {bound:,}; at most {factor}x expected"
    else:
        assert arena == 0, f"{what}: no tensors, yet an arena of {arena} bytes"


def random_lifetimes(rng, count: int, steps: int) -> list[Lifetime]:
    """Awkward sizes (multiples of nothing) alive for up to six steps."""
    tensors = []
    for i in range(count):
        first = int(rng.integers(0, steps))
        last = int(rng.integers(first, min(steps, first + 6)))
        tensors.append(Lifetime(f"t{i}", int(rng.integers(1, 5000)), first, last))
    return tensors


def random_cases() -> list[list[Lifetime]]:
    rng = np.random.default_rng(13)
    return [random_lifetimes(rng, int(rng.integers(1, 40)), int(rng.integers(1, 30)))
            for _ in range(300)]


# Hand-made lifetimes, with their lower bound and the arena greedy-by-size gives them.
CHAIN = [Lifetime(name, 1000, i, i + 1) for i, name in enumerate("abcd")]  # 2 alive at once
# x is kept for the skip: conv1 -> conv2 -> add(x) -> head
RESIDUAL = [Lifetime("x", 4096, 0, 3), Lifetime("c1", 4096, 1, 2), Lifetime("c2", 4096, 2, 3),
            Lifetime("sum", 4096, 3, 4), Lifetime("head", 100, 4, 4)]
# Placed in order of birth (or smallest first), 'c' takes bytes 0..100 and pushes 'a' and 'b'
# up to 900 bytes; largest first, 'c' fits beside 'b' and the arena is the bound, 800.
SMALL_FIRST_WASTES = [Lifetime("a", 400, 1, 2), Lifetime("b", 400, 2, 3),
                      Lifetime("c", 100, 0, 1)]
# Big tensors early and late, small ones between: a heuristic's limit. Largest first puts
# big0 and big1 both at byte 0, then s0 and s1 (alive together at step 2) above them, apart:
# 10,600 bytes. A plan of 10,300 (the bound) exists: big1 at byte 300, s1 below it. Any arena
# within 1.10x of the bound is accepted here, at most 10,600.
GAP = [Lifetime("big0", 10_000, 0, 1), Lifetime("big1", 10_000, 3, 4),
       Lifetime("s0", 300, 1, 2), Lifetime("s1", 300, 2, 3), Lifetime("s2", 200, 2, 2)]
HAND_MADE = {"chain": (CHAIN, 2000, 2000), "residual block": (RESIDUAL, 3 * 4096, 3 * 4096),
             "small first wastes": (SMALL_FIRST_WASTES, 800, 800),
             "gap": (GAP, 10_300, None)}


# --- lower_bound ------------------------------------------------------------------------------

@pytest.mark.parametrize("case", list(HAND_MADE))
def test_lower_bound_of_hand_made_lifetimes(case):
    tensors, bound, _ = HAND_MADE[case]
    got = ex.lower_bound(tensors)
    assert got == bound, f"{case}: lower_bound is {got}, expected {bound} (bytes alive per " \
        f"step: {alive_at_each_step(tensors)})"


def test_lower_bound_counts_both_ends_of_a_lifetime():
    # b is written at the step that reads a last: both are alive at step 1
    touching = [Lifetime("a", 100, 0, 1), Lifetime("b", 300, 1, 2)]
    assert ex.lower_bound(touching) == 400, "a (steps 0..1) and b (steps 1..2) are both " \
        "alive at step 1: 400 bytes"
    apart = [Lifetime("a", 100, 0, 0), Lifetime("b", 300, 1, 1)]
    assert ex.lower_bound(apart) == 300, "a (step 0) and b (step 1) are never alive together"


def test_lower_bound_rounds_sizes_up_to_the_alignment():
    tensors = [Lifetime("a", 100, 0, 1), Lifetime("b", 129, 1, 1)]
    got = ex.lower_bound(tensors, 128)
    assert got == 128 + 256, f"with alignment 128: 100 -> 128 and 129 -> 256 bytes, " \
        f"384 in all; got {got}"
    assert ex.lower_bound(tensors) == 229, "alignment defaults to 1 byte"


def test_lower_bound_of_nothing_is_zero():
    assert ex.lower_bound([]) == 0
    assert ex.lower_bound(iter([Lifetime("a", 7, 3, 5)])) == 7, "tensors may be any iterable"


def test_lower_bound_of_random_lifetimes():
    for i, tensors in enumerate(random_cases()[:100]):
        for alignment in (1, 64):
            check_bound(ex.lower_bound(tensors, alignment), tensors, alignment,
                        f"random case {i} (alignment {alignment})")


# --- greedy_by_size on hand-made lifetimes ------------------------------------------------------

@pytest.mark.parametrize("case", list(HAND_MADE))
def test_greedy_by_size_on_hand_made_lifetimes(case):
    tensors, bound, arena = HAND_MADE[case]
    result = planned(tensors)
    # the exact arena, where there is one, says more than a factor would
    check_plan(result, tensors, factor=MODEL_FACTOR if arena is None else WORST_CASE_FACTOR,
               what=case)
    if arena is not None:
        assert result.block_sizes[0] == arena, f"{case}: an arena of " \
            f"{result.block_sizes[0]} bytes; largest first, in the best-fitting gap, needs " \
            f"{arena} here (the lower bound is {bound}); your offsets: {result.offsets}"


def test_greedy_by_size_aligns_awkward_sizes():
    tensors = [Lifetime("x", 1000, 0, 2), Lifetime("y", 77, 1, 1), Lifetime("z", 1, 2, 3),
               Lifetime("w", 513, 3, 3)]
    result = planned(tensors, 128)
    check_plan(result, tensors, alignment=128, what="alignment 128")


def test_greedy_by_size_of_nothing_is_an_empty_arena():
    result = planned([])
    assert result.offsets == {} and result.block_sizes == [0], \
        f"no tensors: offsets {{}} and block_sizes [0], got {result.offsets} and " \
        f"{result.block_sizes}"


def test_greedy_by_size_on_random_lifetimes():
    total = bound = 0
    for i, tensors in enumerate(random_cases()):
        alignment = 64 if i % 2 else 1
        result = planned(tensors, alignment)
        check_plan(result, tensors, alignment, WORST_CASE_FACTOR, what=f"random case {i}")
        total += result.block_sizes[0]
        bound += true_bound(tensors, alignment)
    assert total <= RANDOM_CASES_FACTOR * bound, \
        f"over all random cases, arenas of {total:,} bytes for lower bounds of {bound:,}: " \
        f"{total / bound:.3f}x, at most {RANDOM_CASES_FACTOR}x expected (largest first?)"


# --- real models ------------------------------------------------------------------------------

REAL_MODELS = [
    pytest.param("the demo model", id="demo"),
    pytest.param("the demo model without graph passes", id="demo-no-passes"),
    pytest.param("a small MobileNet on cpu", id="mobilenet-cpu", marks=pytest.mark.slow),
    pytest.param("a small MobileNet on opencl", id="mobilenet-opencl", marks=pytest.mark.slow),
]


def small_mobilenet():
    """MobileNetV2's first stages (its paper's table 2): inverted residual blocks (1x1 expand,
    3x3 depthwise, 1x1 project, and a skip when the shape allows), channels growing as the
    strides shrink the image: tensors of many sizes, some kept alive across a block."""
    import torch
    from torch import nn

    class Block(nn.Module):
        def __init__(self, cin, cout, stride, expand):
            super().__init__()
            wide = cin * expand
            expansion = [nn.Conv2d(cin, wide, 1), nn.ReLU6()] if expand != 1 else []
            self.skip = stride == 1 and cin == cout
            self.body = nn.Sequential(*expansion,
                                      nn.Conv2d(wide, wide, 3, stride, 1, groups=wide),
                                      nn.ReLU6(), nn.Conv2d(wide, cout, 1))

        def forward(self, x):
            return x + self.body(x) if self.skip else self.body(x)

    class SmallMobileNet(nn.Module):  # named parts: pnnx names its Python after them
        # (expansion, channels, repeats, stride of the first repeat)
        SETTINGS = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 2, 2))

        def __init__(self):
            super().__init__()
            self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, 2, 1), nn.ReLU6())
            blocks, cin = [], 16
            for expand, cout, repeats, stride in self.SETTINGS:
                for i in range(repeats):
                    blocks.append(Block(cin, cout, stride if i == 0 else 1, expand))
                    cin = cout
            self.blocks = nn.Sequential(*blocks)
            self.head = nn.Sequential(nn.Conv2d(cin, 64, 1), nn.ReLU6(),
                                      nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10))

        def forward(self, x):
            return self.head(self.blocks(self.stem(x)))

    torch.manual_seed(13)
    return SmallMobileNet().eval()


def export(module, example, folder):
    """pnnx.export into `folder` (pnnx writes several files into the working directory)."""
    import os

    import pnnx
    import torch

    from kuiper.course.lessons import quiet_output

    folder.mkdir(parents=True, exist_ok=True)
    cwd = os.getcwd()
    try:
        os.chdir(folder)
        with torch.no_grad(), quiet_output():
            pnnx.export(module, str(folder / "model.pt"), (example,))
    finally:
        os.chdir(cwd)
    return folder / "model.pnnx.param"


@pytest.fixture(scope="module")
def real_model(tmp_path_factory):
    """real_model(name) -> (the tensors its executor planned, the alignment it plans with).

    The demo model runs a batch of 64; the small MobileNet is exported once with pnnx at
    64x64 and planned at 224x224: about 29 tensors, from 40 bytes to 4.6 MiB. On it, the
    reference reaches the bound (1.00x); one arena filled in order of birth, or smallest
    first, needs 1.30x; pooled buffers (greedy_in_order) 1.23x; a buffer each 3.3x.
    """
    import kuiper
    from kuiper.demo import DIGITS_PARAM

    exported = []

    def mobilenet():
        if not exported:
            import torch

            example = torch.rand(1, 3, 64, 64, generator=torch.Generator().manual_seed(13))
            exported.append(export(small_mobilenet(), example,
                                   tmp_path_factory.mktemp("lesson13") / "mobilenet"))
        return exported[0]

    def lifetimes(name: str):
        backend = "opencl" if name.endswith("opencl") else "cpu"
        if backend == "opencl":
            require_opencl()
        if "MobileNet" in name:
            args = dict(param_path=mobilenet(), input_shapes=[(1, 3, 224, 224)])
        else:
            args = dict(param_path=DIGITS_PARAM, input_shapes=[(64, 1, 8, 8)],
                        passes=[] if "without" in name else None)
        with kuiper.load(backend=backend, **args) as graph:
            runtime = getattr(graph.executor, "runtime", None)
            tensors = list(graph.executor.lifetimes)
            return tensors, runtime.base_alignment if runtime is not None else 1

    return lifetimes


@pytest.mark.parametrize("name", REAL_MODELS)
def test_lower_bound_of_real_models(real_model, name):
    tensors, alignment = real_model(name)
    assert len(tensors) >= 7, f"{name}: only {len(tensors)} tensors planned"
    check_bound(ex.lower_bound(tensors, alignment), tensors, alignment,
                f"{name} (alignment {alignment})")


@pytest.mark.parametrize("name", REAL_MODELS)
def test_greedy_by_size_on_real_models(real_model, name):
    tensors, alignment = real_model(name)
    check_plan(planned(tensors, alignment), tensors, alignment, MODEL_FACTOR,
               what=f"{name} (alignment {alignment})")
