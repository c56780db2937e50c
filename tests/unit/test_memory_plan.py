"""The memory planner (kuiper/memory/): lifetimes, the three strategies, the CPU workspace,
`kuiper info --memory` and the lifetime chart.

Hand-made lifetimes check each strategy's promises (no two tensors alive together share a
byte, no plan beats the lower bound, offsets aligned); the zoo models check the issue's target
(planned <= 1.10x the lower bound) on the graphs Kuiper really runs.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import numpy as np
import pytest
import torch
from torch import nn

import kuiper
from kuiper.memory import (
    STRATEGIES,
    Lifetime,
    MemoryPlanError,
    conflicts,
    lower_bound,
    operand_lifetimes,
    plan,
)
from tests.unit.test_cli import kuiper_cli

# --- strategies on hand-made lifetimes ------------------------------------------------------


def random_lifetimes(rng, count: int, steps: int) -> list[Lifetime]:
    """Tensors of awkward sizes (not multiples of anything) alive over random intervals."""
    out = []
    for i in range(count):
        first = int(rng.integers(0, steps))
        last = int(rng.integers(first, min(steps, first + 6)))
        out.append(Lifetime(f"t{i}", int(rng.integers(1, 5000)), first, last))
    return out


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("alignment", [1, 128])
def test_no_two_live_tensors_overlap_and_no_plan_beats_the_lower_bound(strategy, alignment,
                                                                        rng):
    for trial in range(30):
        tensors = random_lifetimes(rng, int(rng.integers(1, 60)), int(rng.integers(1, 40)))
        result = plan(tensors, strategy, alignment)
        assert conflicts(result, tensors) == [], (trial, strategy)
        assert result.total >= result.lower_bound == lower_bound(tensors, alignment)
        assert all(offset % alignment == 0 for offset in result.offsets.values())
        assert set(result.offsets) == {t.name for t in tensors}
        for t in tensors:  # inside its block
            start = result.block_starts[result.blocks[t.name]]
            assert start <= result.offsets[t.name]
            assert result.offsets[t.name] + t.size <= start + result.block_sizes[
                result.blocks[t.name]]


def test_naive_is_the_sum_and_a_chain_needs_two_tensors():
    # a -> b -> c -> d, each read only by the next step: two are alive at any step
    chain = [Lifetime(n, 1000, i, i + 1) for i, n in enumerate("abcd")]
    assert plan(chain, "naive").total == 4000
    assert lower_bound(chain) == 2000
    assert plan(chain, "greedy_by_size").total == 2000
    assert plan(chain, "greedy_in_order").total == 2000
    assert len(plan(chain, "greedy_in_order").block_sizes) == 2  # two pooled buffers


def test_greedy_by_size_reaches_the_bound_on_a_residual_block():
    # x (kept for the skip) -> conv1 -> conv2 -> add(x): the skip stays alive throughout
    block = [Lifetime("x", 4096, 0, 3), Lifetime("c1", 4096, 1, 2), Lifetime("c2", 4096, 2, 3),
             Lifetime("sum", 4096, 3, 4), Lifetime("head", 100, 4, 4)]
    result = plan(block, "greedy_by_size")
    assert result.total == result.lower_bound == 3 * 4096


def test_greedy_by_size_fills_gaps_with_small_tensors():
    # one big tensor early, one late; small ones between fit beside them, not above
    tensors = [Lifetime("big0", 10_000, 0, 1), Lifetime("big1", 10_000, 3, 4),
               Lifetime("s0", 300, 1, 2), Lifetime("s1", 300, 2, 3), Lifetime("s2", 200, 2, 2)]
    result = plan(tensors, "greedy_by_size")
    assert result.total <= 1.10 * result.lower_bound


def test_greedy_in_order_grows_the_largest_free_block():
    tensors = [Lifetime("a", 100, 0, 0), Lifetime("b", 300, 1, 1)]
    result = plan(tensors, "greedy_in_order")
    assert result.block_sizes == [300] and result.blocks == {"a": 0, "b": 0}


def test_an_unknown_strategy_is_refused_by_name():
    with pytest.raises(MemoryPlanError, match="greedy_by_size") as info:
        plan([], "tetris")
    assert isinstance(info.value, kuiper.KuiperError) and "'tetris'" in str(info.value)
    with pytest.raises(MemoryPlanError, match="alignment"):
        plan([], "naive", alignment=0)


def test_an_empty_graph_plans_nothing():
    for strategy in STRATEGIES:
        result = plan([], strategy)
        assert result.total == 0 and result.ratio == 1.0


# --- lifetimes --------------------------------------------------------------------------------


class Operand:
    def __init__(self, name):
        self.name = name


class Op:
    def __init__(self, ins, outs):
        self.inputs, self.outputs = [Operand(n) for n in ins], [Operand(n) for n in outs]


class Spec:
    def __init__(self, nbytes):
        self.shape, self.dtype, self.known = (nbytes // 4,), np.dtype(np.float32), False


def test_lifetimes_follow_the_order_views_and_ports():
    steps = [Op(["x"], ["a"]), Op(["a"], ["v"]), Op(["x"], ["dead"]), Op(["v"], ["y"])]
    specs = {n: Spec(400) for n in ("x", "a", "v", "dead", "y")}
    lives = {t.name: (t.first, t.last) for t in operand_lifetimes(
        steps, specs, ["x"], ["y"], views={"v": "a"})}
    assert lives["x"] == (0, 2)         # an input: from the start to its last reader
    assert lives["a"] == (0, 3)         # its view v is read at step 3: a lives until then
    assert "v" not in lives             # a view owns no bytes
    assert lives["dead"] == (2, 2)      # never read, still written
    assert lives["y"] == (3, 3)         # an output: to the last step


def test_a_view_of_several_bases_keeps_them_all():
    steps = [Op(["x"], ["a"]), Op(["x"], ["b"]), Op(["a", "b"], ["m"]), Op(["m"], ["y"])]
    specs = {n: Spec(40) for n in ("x", "a", "b", "m", "y")}
    lives = {t.name: t.last for t in operand_lifetimes(steps, specs, ["x"], ["y"],
                                                       views={"m": ["a", "b"]})}
    assert lives["a"] == lives["b"] == 3


# --- the zoo: the target ----------------------------------------------------------------

ZOO = {  # name: (module, export shape, planned shape)
    "resnet18": ("ResNet18", (1, 3, 64, 64), (1, 3, 224, 224)),
    "mobilenet_v2": ("MobileNetV2", (1, 3, 64, 64), (1, 3, 224, 224)),
    "yolo_640": ("YoloV5Small", (1, 3, 640, 640), (1, 3, 640, 640)),
    "unet": ("UNet", (1, 3, 64, 48), (1, 3, 256, 256)),
}


@pytest.fixture(scope="module")
def zoo_model(export_model):
    from tests.models import zoo

    def export(name):
        cls, shape, planned = ZOO[name]
        example = torch.rand(*shape, generator=torch.Generator().manual_seed(0))
        path = export_model(f"memory_{name}", zoo.make(getattr(zoo, cls), example), example)
        return path, planned

    return export


@pytest.mark.slow
@pytest.mark.parametrize("name", list(ZOO))
def test_zoo_plans_are_within_ten_percent_of_the_lower_bound(name, zoo_model, backend):
    path, shape = zoo_model(name)
    with kuiper.load(path, backend=backend, input_shapes=[shape]) as graph:
        tensors = graph.executor.lifetimes
        assert len(tensors) > 10
        alignment = getattr(getattr(graph.executor, "runtime", None), "base_alignment", 1)
        for strategy in STRATEGIES:
            result = plan(tensors, strategy, alignment)
            assert conflicts(result, tensors) == []
            assert result.total >= result.lower_bound
        best = plan(tensors, "greedy_by_size", alignment)
        assert best.total <= 1.10 * best.lower_bound, (name, best.ratio)
        assert plan(tensors, "naive", alignment).total > 2 * best.total


# --- the CPU workspace ----------------------------------------------------------------------------


class SmallNet(nn.Module):
    """Convolutions (writes_into) around a skip, a flatten (a view), a linear output and an
    output that is a reshape of an inner convolution's result."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, padding=1)
        self.body = nn.Sequential(nn.Conv2d(8, 8, 3, padding=1), nn.ReLU(),
                                  nn.Conv2d(8, 8, 3, padding=1))
        self.head = nn.Conv2d(8, 5, 1)
        self.fc = nn.Linear(5 * 7 * 5, 3)

    def forward(self, x):
        y = torch.relu(self.stem(x))
        y = torch.relu(self.body(y) + y)
        z = self.head(y)
        # the last output is a view of a convolution's result, which lives in the arena
        return self.fc(torch.flatten(z, 1)), z, y.reshape(y.shape[0], -1)


@pytest.fixture(scope="module")
def small_net(export_model):
    torch.manual_seed(0)
    net = SmallNet().eval()
    x = torch.randn(2, 3, 7, 5)
    with torch.no_grad():
        expected = [t.numpy() for t in net(x)]
    return export_model("memory_small_net", net, x), x.numpy(), expected


def test_cpu_workspace_gives_identical_results_and_is_reused(small_net):
    path, x, expected = small_net
    naive = kuiper.load(path, memory="naive")
    planned = kuiper.load(path)  # greedy_by_size: the default
    arena = planned.executor.arena
    assert arena.nbytes > 0 and arena.outs, "no layer computed into the workspace"
    first = planned.forward(x)
    for a, b, want in zip(first, naive.forward(x), expected):
        np.testing.assert_array_equal(a, b)  # the same arithmetic, into other memory
        np.testing.assert_allclose(a, want, rtol=1e-4, atol=1e-4)
    kept = [a.copy() for a in first]
    second = planned.forward(x * 2)
    assert planned.executor.arena is arena  # no reallocation per forward
    for a, k in zip(first, kept):  # the user's arrays of the first forward are untouched
        np.testing.assert_array_equal(a, k)
        assert not np.may_share_memory(a, arena.arena)
    assert not any(np.may_share_memory(a, arena.arena) for a in second)


def test_a_cpu_extract_of_an_inner_value_is_right(small_net):
    path, x, _ = small_net
    graph = kuiper.load(path)
    inner = [name for name in graph.executor.arena.plan.offsets][0]
    asked = graph.forward(x, outputs=[inner])[0]
    reference = kuiper.load(path, memory="naive").forward(x, outputs=[inner])[0]
    np.testing.assert_array_equal(asked, reference)


def test_memory_option_is_checked(small_net):
    with pytest.raises(kuiper.KuiperError, match="greedy_in_order"):
        kuiper.load(small_net[0], memory="smallest")


# --- kuiper info --memory, and the figure ---------------------------------------------------------


def test_info_memory_prints_every_strategy_beside_the_lower_bound(small_net):
    result = kuiper_cli("info", str(small_net[0]), "--memory")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    for name in STRATEGIES + ("lower bound",):
        assert re.search(rf"^{name}\s", out, re.M), out
    assert "<- in use" in re.search(r"^greedy_by_size .*$", out, re.M).group(0)
    ratio = float(re.search(r"^naive .* ([\d.]+)x", out, re.M).group(1))
    assert ratio > 1.0
    chosen = kuiper_cli("info", str(small_net[0]), "--memory", "--memory-plan", "naive")
    assert re.search(r"^naive .*<- in use", chosen.stdout, re.M), chosen.stdout
    bad = kuiper_cli("info", str(small_net[0]), "--memory-plan", "best")
    assert bad.returncode == 2 and "invalid choice" in bad.stderr


def test_info_memory_json(small_net):
    import json

    result = kuiper_cli("info", str(small_net[0]), "--memory", "--json")
    doc = json.loads(result.stdout)["memory"]
    by_name = {p["strategy"]: p for p in doc["strategies"]}
    assert by_name["greedy_by_size"]["bytes"] >= doc["lower_bound"] > 0
    assert by_name["naive"]["bytes"] >= by_name["greedy_by_size"]["bytes"]


def test_bench_reports_the_peak_memory(small_net):
    from tests.conftest import opencl_available

    backends = "cpu,opencl" if opencl_available() else "cpu"
    result = kuiper_cli("bench", str(small_net[0]), "--backends", backends, "--repeat", "1",
                        "--warmup", "0", "--rounds", "1", "--top", "0")
    assert result.returncode == 0, result.stderr
    assert re.search(r"memory of kuiper cpu: activation arena [\d.]+ \w+ \(planned, greedy_by_size",
                     result.stdout), result.stdout
    if opencl_available():
        assert re.search(r"memory of kuiper opencl: peak device memory [\d.]+ \w+ "
                         r"\(runtime counter; memory plan: greedy_by_size\)",
                         result.stdout), result.stdout


def test_the_memory_plan_figure_draws_one_rectangle_per_tensor(small_net):
    from kuiper.course import figures

    svg = figures.memory_plan_figure(str(small_net[0]))
    root = ET.fromstring(svg)
    rects = root.findall("{http://www.w3.org/2000/svg}rect")
    tensors = kuiper.load(small_net[0]).executor.lifetimes
    assert len(rects) == 2 + len(tensors)  # the background, the chart, one per tensor
    assert "lower bound" in svg
    assert figures.memory_plan_figure(str(small_net[0])) == svg  # deterministic
    assert "memory_plan.svg" in figures.FIGURES
