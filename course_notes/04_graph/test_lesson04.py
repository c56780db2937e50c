"""Lesson 4: topological orders on small graphs written in the PNNX text format."""

import pytest

from kuiper import GraphError
from kuiper.course.lessons import implementation
from kuiper.graph.runtime_graph import RuntimeGraph
from kuiper.graph.topo import predecessors

REFERENCE = {
    "dfs_iterative": "kuiper.graph.topo:dfs_iterative",
    "level_schedule": "kuiper.graph.topo:level_schedule",
}
ex = implementation(__file__, REFERENCE)


def graph(tmp_path, *lines):
    """init() a model made of these operator lines (no weights, no layers needed)."""
    path = tmp_path / "g.pnnx.param"
    path.write_text(f"7767517\n{len(lines)} 0\n" + "\n".join(lines) + "\n")
    return RuntimeGraph(path).init().operators


DIAMOND = ("pnnx.Input in 0 1 0", "nn.ReLU a 1 1 0 1", "nn.ReLU b 1 1 1 2",
           "nn.Sigmoid c 1 1 1 3", "torch.cat d 2 1 2 3 4 dim=1", "pnnx.Output out 1 0 4")
# A residual block: the input goes through two ops AND skips them; the add reads both.
RESIDUAL = ("pnnx.Input in 0 1 0", "nn.Conv2d conv1 1 1 0 1", "nn.ReLU relu 1 1 1 2",
            "nn.Conv2d conv2 1 1 2 3", "pnnx.Expression add 2 1 3 0 4 expr=add(@0,@1)",
            "pnnx.Output out 1 0 4")
# Written out of order, with an operand read twice and two inputs.
SHUFFLED = ("pnnx.Output out 1 0 5", "torch.cat cat 3 1 3 3 4 5 dim=1",
            "nn.ReLU r2 1 1 2 4", "nn.ReLU r1 1 1 0 3", "pnnx.Input in1 0 1 2",
            "pnnx.Input in0 0 1 0")


def check_order(order, ops):
    names = [op.name for op in order]
    assert sorted(names) == sorted(op.name for op in ops), f"not a permutation: {names}"
    position = {op.name: i for i, op in enumerate(order)}
    for op in ops:
        for p in predecessors(op):
            assert position[p.name] < position[op.name], (
                f"{op.name} comes before its producer {p.name} in {names}")


@pytest.mark.parametrize("lines", [DIAMOND, RESIDUAL, SHUFFLED], ids=["diamond", "residual",
                                                                     "shuffled"])
def test_dfs_order_puts_producers_first(tmp_path, lines):
    ops = graph(tmp_path, *lines)
    check_order(ex.dfs_iterative(ops), ops)


def test_dfs_order_of_a_real_model():
    from kuiper.demo import DIGITS_PARAM

    ops = RuntimeGraph(DIGITS_PARAM).init().operators
    order = ex.dfs_iterative(list(reversed(ops)))  # the file order must not matter
    check_order(order, ops)
    assert [op.name for op in order] == [op.name for op in ops]  # a chain has one order


# Far deeper than Python's recursion limit (1000): the docstring and the notes state this number.
CHAIN_LENGTH = 20_000


def test_dfs_survives_a_long_chain(tmp_path):
    n = CHAIN_LENGTH
    lines = ["pnnx.Input in 0 1 0"] + [f"nn.ReLU r{i} 1 1 {i} {i + 1}" for i in range(n)]
    ops = graph(tmp_path, *lines, f"pnnx.Output out 1 0 {n}")
    order = ex.dfs_iterative(ops)
    assert [op.name for op in order] == [op.name for op in ops]


# loop_a reads loop_c's output, which needs loop_b's, which needs loop_a's: a cycle.
CYCLE = ("pnnx.Input in 0 1 0", "torch.cat loop_a 2 1 0 3 1 dim=0", "nn.ReLU loop_b 1 1 1 2",
         "nn.ReLU loop_c 1 1 2 3", "pnnx.Output out 1 0 2")


def test_dfs_names_the_operators_of_a_cycle(tmp_path):
    with pytest.raises(GraphError, match="cycle") as info:
        ex.dfs_iterative(graph(tmp_path, *CYCLE))
    for name in ("loop_a", "loop_b", "loop_c"):
        assert name in str(info.value), f"the error should name {name}: {info.value}"


def names(levels):
    return [sorted(op.name for op in level) for level in levels]


@pytest.mark.parametrize("lines, expected", [
    (DIAMOND, [["in"], ["a"], ["b", "c"], ["d"], ["out"]]),
    (RESIDUAL, [["in"], ["conv1"], ["relu"], ["conv2"], ["add"], ["out"]]),
    (SHUFFLED, [["in0", "in1"], ["r1", "r2"], ["cat"], ["out"]]),
], ids=["diamond", "residual", "shuffled"])
def test_level_schedule(tmp_path, lines, expected):
    assert names(ex.level_schedule(graph(tmp_path, *lines))) == expected


def test_level_schedule_names_the_stuck_operators(tmp_path):
    with pytest.raises(GraphError, match="cycle") as info:
        ex.level_schedule(graph(tmp_path, *CYCLE))
    for name in ("loop_a", "loop_b", "loop_c", "out"):
        assert name in str(info.value), f"the error should name {name}: {info.value}"
