"""The three topological orders of kuiper/graph/topo.py on the same graphs.

Every order must be a valid topological order (each operator after the producers of all its
inputs), contain every operator exactly once, and the level schedule must never put an
operator in the same level as one it depends on. Graphs are linked by the real loader
(`RuntimeGraph.init`) from hand-written .param text, and shuffled, because file order is not to be
relied on.
"""

from __future__ import annotations

import random

import pytest
import torch
from torch import nn

from kuiper.core.errors import GraphError
from kuiper.core.ir import RuntimeOperand, RuntimeOperator
from kuiper.graph import topo
from kuiper.graph.runtime_graph import RuntimeGraph

ORDERS = {"dfs_recursive": topo.dfs_recursive, "dfs_iterative": topo.dfs_iterative,
          "levels": lambda ops: topo.flatten_levels(topo.level_schedule(ops))}


def link(spec: list[tuple[str, list[str], list[str]]]) -> list[RuntimeOperator]:
    """Build operators straight from (name, inputs, outputs), linked by operand like init()."""
    operands: dict[str, RuntimeOperand] = {}
    ops = []
    for name, ins, outs in spec:
        op = RuntimeOperator(name, "test.Op")
        for i in ins:
            operand = operands.setdefault(i, RuntimeOperand(i))
            op.inputs.append(operand)
            if op not in operand.consumers:
                operand.consumers.append(op)
        for o in outs:
            operand = operands.setdefault(o, RuntimeOperand(o))
            operand.producer = op
            op.outputs.append(operand)
        ops.append(op)
    return ops


def load_ops(tmp_path, lines: list[str]) -> list[RuntimeOperator]:
    """Link a graph through the real loader (no layers are created: init() only)."""
    path = tmp_path / "g.pnnx.param"
    path.write_text("\n".join(["7767517", f"{len(lines)} 0", *lines]) + "\n")
    return RuntimeGraph(path).init().operators


def check_order(ops: list[RuntimeOperator], order: list[RuntimeOperator]) -> None:
    assert sorted(op.name for op in order) == sorted(op.name for op in ops), "not a permutation"
    position = {id(op): k for k, op in enumerate(order)}
    for op in order:
        for operand in op.inputs:
            producer = operand.producer
            assert position[id(producer)] < position[id(op)], (
                f"{op.name} runs before {producer.name}, which produces its input {operand.name}")


def check_levels(ops: list[RuntimeOperator], levels: list[list[RuntimeOperator]]) -> None:
    check_order(ops, topo.flatten_levels(levels))
    level_of = {id(op): k for k, level in enumerate(levels) for op in level}
    for k, level in enumerate(levels):
        assert level, f"level {k} is empty"
        for op in level:
            for producer in topo.predecessors(op):
                assert level_of[id(producer)] < k, (
                    f"{op.name} (level {k}) depends on {producer.name} "
                    f"(level {level_of[id(producer)]})")
            # Each operator sits in the earliest level its inputs allow (the peel is greedy).
            preds = topo.predecessors(op)
            assert k == (1 + max(level_of[id(p)] for p in preds) if preds else 0)


GRAPHS = {
    "diamond": [
        "pnnx.Input in 0 1 0",
        "nn.ReLU left 1 1 0 1",
        "nn.ReLU right 1 1 0 2",
        "torch.add join 2 1 1 2 3",
        "pnnx.Output out 1 0 3"],
    "multi_input": [
        "pnnx.Input in_a 0 1 a",
        "pnnx.Input in_b 0 1 b",
        "pnnx.Input in_c 0 1 c",
        "nn.ReLU ra 1 1 a a1",
        "torch.cat cat 3 1 a1 b c y",
        "torch.mul mul 2 1 y c z",
        "pnnx.Output out 1 0 z"],
    "multi_output": [
        "pnnx.Input in 0 1 0",
        "torch.chunk chunk 1 3 0 1 2 3",
        "nn.ReLU r1 1 1 1 4",
        "nn.ReLU r3 1 1 3 5",
        "torch.cat cat 3 1 5 2 4 6",
        "pnnx.Output out 2 0 6 2"],
    "same_operand_twice": [
        "pnnx.Input in 0 1 0",
        "nn.ReLU r 1 1 0 1",
        "torch.cat cat4 4 1 1 1 1 1 2",
        "torch.bmm bmm 2 1 2 2 3",
        "pnnx.Output out 1 0 3"],
    "constant_branches": [
        "pnnx.Input in 0 1 0",
        "pnnx.Attribute w 0 1 1",
        "pnnx.Attribute dead 0 1 9",
        "pnnx.Attribute c1 0 1 7",
        "pnnx.Attribute c2 0 1 8",
        "torch.add cc 2 1 7 8 10",
        "torch.mul scale 2 1 0 1 2",
        "torch.add shift 2 1 2 10 3",
        "pnnx.Output out 1 0 3"],
    "tuple_outputs": [
        "pnnx.Input in 0 1 0",
        "nn.LSTM lstm 1 3 0 1 2 3",
        "prim::TupleConstruct tup 2 1 2 3 4",
        "pnnx.Output out0 1 0 1",
        "pnnx.Output out1 1 0 4"],
}


@pytest.mark.parametrize("order", list(ORDERS))
@pytest.mark.parametrize("graph", list(GRAPHS))
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_orders_are_topological(tmp_path, graph, order, seed):
    ops = load_ops(tmp_path, GRAPHS[graph])
    random.Random(seed).shuffle(ops)
    check_order(ops, ORDERS[order](ops))


@pytest.mark.parametrize("graph", list(GRAPHS))
def test_levels_have_no_intra_level_dependency(tmp_path, graph):
    ops = load_ops(tmp_path, GRAPHS[graph])
    random.Random(7).shuffle(ops)
    check_levels(ops, topo.level_schedule(ops))


def test_diamond_levels_show_the_concurrent_branches(tmp_path):
    levels = topo.level_schedule(load_ops(tmp_path, GRAPHS["diamond"]))
    assert [sorted(op.name for op in level) for level in levels] == [
        ["in"], ["left", "right"], ["join"], ["out"]]


def test_constants_start_in_level_zero(tmp_path):
    levels = topo.level_schedule(load_ops(tmp_path, GRAPHS["constant_branches"]))
    assert sorted(op.name for op in levels[0]) == ["c1", "c2", "dead", "in", "w"]


def test_an_operand_consumed_twice_counts_once(tmp_path):
    ops = {op.name: op for op in load_ops(tmp_path, GRAPHS["same_operand_twice"])}
    assert len(ops["cat4"].inputs) == 4 and len(ops["bmm"].inputs) == 2
    assert [p.name for p in topo.predecessors(ops["cat4"])] == ["r"]
    assert [s.name for s in topo.successors(ops["r"])] == ["cat4"]
    assert ops["r"].outputs[0].consumers == [ops["cat4"]]


def test_orders_agree_with_each_other_on_a_chain(tmp_path):
    names = [f"relu_{k}" for k in range(20)]
    lines = ["pnnx.Input in 0 1 0"] + [f"nn.ReLU {n} 1 1 {k} {k + 1}" for k, n in
                                       enumerate(names)] + ["pnnx.Output out 1 0 20"]
    ops = load_ops(tmp_path, lines)
    random.Random(3).shuffle(ops)
    expected = ["in"] + names + ["out"]
    for fn in ORDERS.values():
        assert [op.name for op in fn(ops)] == expected


def test_ten_thousand_operator_chain():
    n = 10_000
    ops = link([("op_0", [], ["t0"])] + [(f"op_{k}", [f"t{k - 1}"], [f"t{k}"])
                                         for k in range(1, n)])
    ops.reverse()  # the worst case for a naive sort: consumers listed before producers
    order = topo.dfs_iterative(ops)
    assert [op.name for op in order] == [f"op_{k}" for k in range(n)]
    levels = topo.level_schedule(ops)
    assert len(levels) == n and all(len(level) == 1 for level in levels)
    check_order(ops, order)


def test_recursive_dfs_goes_past_the_default_recursion_limit():
    n = 3_000  # deeper than Python's default limit of 1000 frames
    ops = link([("op_0", [], ["t0"])] + [(f"op_{k}", [f"t{k - 1}"], [f"t{k}"])
                                         for k in range(1, n)])
    order = topo.dfs_recursive(ops)
    assert [op.name for op in order] == [f"op_{k}" for k in range(n)]


def test_wide_graph_levels():
    # One producer, 500 independent consumers, one join: three levels.
    spec = [("src", [], ["x"])] + [(f"b{k}", ["x"], [f"y{k}"]) for k in range(500)]
    spec.append(("join", [f"y{k}" for k in range(500)], ["z"]))
    ops = link(spec)
    levels = topo.level_schedule(ops)
    assert [len(level) for level in levels] == [1, 500, 1]
    for fn in ORDERS.values():
        check_order(ops, fn(ops))


CYCLE = [
    "pnnx.Input in 0 1 0",
    "torch.add first 2 1 0 3 1",
    "nn.ReLU second 1 1 1 2",
    "nn.ReLU third 1 1 2 3",
    "pnnx.Output out 1 0 2"]


@pytest.mark.parametrize("order", ["dfs_recursive", "dfs_iterative"])
def test_dfs_reports_the_cycle_by_name(tmp_path, order):
    ops = load_ops(tmp_path, CYCLE)
    with pytest.raises(GraphError) as info:
        ORDERS[order](ops)
    message = str(info.value)
    assert "cycle" in message
    # the path is printed, e.g. "first -> second -> third -> first"
    for name in ("first", "second", "third"):
        assert name in message
    assert "in" not in message.split(":")[-1].replace("->", " ").split()


def test_level_schedule_reports_the_cycle_by_name(tmp_path):
    ops = load_ops(tmp_path, CYCLE)
    with pytest.raises(GraphError) as info:
        topo.level_schedule(ops)
    message = str(info.value)
    assert "cycle" in message
    for name in ("first", "second", "third"):
        assert name in message


def test_a_cycle_with_no_root_is_found():
    # Every operator has a producer: no root for the DFS to start from.
    ops = link([("a", ["z"], ["x"]), ("b", ["x"], ["y"]), ("c", ["y"], ["z"])])
    for fn in (topo.dfs_recursive, topo.dfs_iterative, topo.level_schedule):
        with pytest.raises(GraphError, match=r"cycle.*\b[abc]\b"):
            fn(ops)


def test_self_loop():
    ops = link([("in", [], ["x"]), ("loop", ["x", "y"], ["y"])])
    for fn in (topo.dfs_recursive, topo.dfs_iterative, topo.level_schedule):
        with pytest.raises(GraphError, match="loop"):
            fn(ops)


def test_build_reports_a_cycle(tmp_path):
    path = tmp_path / "g.pnnx.param"
    path.write_text("\n".join(["7767517", f"{len(CYCLE)} 0", *CYCLE]) + "\n")
    graph = RuntimeGraph(path).init()
    with pytest.raises(GraphError, match=r"cycle.*(first|second|third)"):
        graph.build()


# --- a real export ------------------------------------------------------------------------------

class TinyResNet(nn.Module):
    """Stem, two residual blocks (one with a projection shortcut), pool, classifier."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, 1, 1), nn.BatchNorm2d(8), nn.ReLU())
        self.a1, self.a2 = nn.Conv2d(8, 8, 3, 1, 1), nn.Conv2d(8, 8, 3, 1, 1)
        self.b1, self.b2 = nn.Conv2d(8, 16, 3, 2, 1), nn.Conv2d(16, 16, 3, 1, 1)
        self.proj = nn.Conv2d(8, 16, 1, 2)
        self.fc = nn.Linear(16, 5)

    def forward(self, x):
        x = self.stem(x)
        x = torch.relu(x + self.a2(torch.relu(self.a1(x))))
        x = torch.relu(self.proj(x) + self.b2(torch.relu(self.b1(x))))
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))


@pytest.fixture(scope="module")
def resnet_ops(export_model):
    torch.manual_seed(0)
    path = export_model("topo_tiny_resnet", TinyResNet(), torch.randn(1, 3, 16, 16))
    return RuntimeGraph(path).init().operators


@pytest.mark.slow
@pytest.mark.parametrize("order", list(ORDERS))
def test_orders_on_an_exported_resnet(resnet_ops, order):
    ops = list(resnet_ops)
    assert len(ops) > 10
    for seed in range(3):
        random.Random(seed).shuffle(ops)
        check_order(ops, ORDERS[order](ops))


@pytest.mark.slow
def test_levels_on_an_exported_resnet(resnet_ops):
    levels = topo.level_schedule(resnet_ops)
    check_levels(resnet_ops, levels)
    # The projection shortcut and the first conv of its block read the same value: one level.
    level_of = {op.name: k for k, level in enumerate(levels) for op in level}
    convs = [op for op in resnet_ops if op.type == "nn.Conv2d"
             and tuple(op.params.get("kernel_size", ())) == (1, 1)]
    assert convs, "expected the 1x1 projection conv in the export"
    proj = convs[0]
    siblings = [c for c in proj.inputs[0].consumers if c is not proj]
    assert siblings and all(level_of[s.name] == level_of[proj.name] for s in siblings)
