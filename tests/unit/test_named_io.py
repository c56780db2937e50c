"""Inputs and outputs by name (kuiper/graph/named_io.py), as onnxruntime and ncnn users expect.

Feeds as a dict keyed by pnnx operand number or alias (`in0`), outputs by name or alias
(`out0`) or any operand inside the graph (ncnn's extract), a dict result, aliases in the ports
and in `kuiper info`, and the CPU executor's `threads=`. Every test runs on both backends where
the backend matters. The model is the digits demo: conv -> relu -> conv -> relu -> maxpool ->
flatten (a view on OpenCL) -> linear -> relu -> linear.
"""

from __future__ import annotations

import re
import threading
from pathlib import Path

import numpy as np
import pytest
from threadpoolctl import threadpool_info

import kuiper
from kuiper import InputError, KuiperError
from kuiper.testing import assert_close

DIGITS = Path(kuiper.__file__).parent / "demo" / "digits.pnnx.param"
ALL_OPERANDS = [str(i) for i in range(10)]  # "0" (the input) to "9" (the output)


@pytest.fixture
def x(rng) -> np.ndarray:
    return rng.standard_normal((1, 1, 8, 8)).astype(np.float32)


@pytest.fixture
def graph(backend):
    with kuiper.load(DIGITS, backend=backend) as g:
        yield g


def reference(x: np.ndarray) -> dict[str, np.ndarray]:
    """Every operand's value, each operator run on its own on the CPU (an observer turns
    fusion off): what an asked-for intermediate must equal."""
    values = {"0": x}

    def keep(op, outputs, seconds):
        values.update({o.name: y for o, y in zip(op.outputs, outputs)})

    with kuiper.load(DIGITS) as g:
        g.forward(x, observer=keep)
    return values


# --- feeds ------------------------------------------------------------------------------------
@pytest.mark.parametrize("key", ["0", "in0"])
def test_a_dict_feeds_by_operand_number_or_alias(graph, x, key):
    expected = graph(x)
    assert_close(graph({key: x}), expected)
    assert_close(graph.forward({key: x})[0], expected)


@pytest.mark.parametrize("feeds, message", [
    ({"in1": None}, r"no input named 'in1' \(did you mean in0\?\).*0 \(in0\)"),
    ({}, r"missing input\(s\) 0 \(in0\).*0 \(in0\)"),
    ({0: None}, r"no input named 0.*name or alias.*0 \(in0\)"),
])
def test_a_wrong_feed_name_lists_the_inputs(graph, feeds, message, x):
    feeds = {k: x for k in feeds}
    with pytest.raises(InputError, match=message):
        graph(feeds)


def test_an_input_given_twice_or_a_dict_beside_arrays_is_refused(graph, x):
    with pytest.raises(InputError, match="input '0' is given twice"):
        graph({"0": x, "in0": x})
    with pytest.raises(InputError, match="either as arrays in order, or as one dict"):
        graph({"0": x}, x)


def test_a_dict_feed_is_checked_like_a_positional_one(graph):
    with pytest.raises(InputError, match="should be 4-D"):
        graph({"in0": np.zeros((8, 8), np.float32)})


# --- outputs ----------------------------------------------------------------------------------
def test_every_operand_can_be_asked_for_and_equals_the_unfused_value(graph, x):
    """Intermediates too: "1" is the convolution output before its ReLU (fused on the CPU),
    "6" the flatten output (a view of "5" on OpenCL), "0" the input itself."""
    expected = reference(x)
    values = graph.forward(x, outputs=ALL_OPERANDS)
    for name, value in zip(ALL_OPERANDS, values):
        assert_close(value, expected[name], what=f"operand {name}")
    assert (values[1] < 0).any(), "operand 1 must be the raw convolution, not its ReLU"


@pytest.mark.parametrize("name", ["2", "8"])
def test_a_fused_relus_output_alone_is_the_activated_value(graph, x, name):
    """Asking for a ReLU's output (not its producer's) leaves the pair fused on the CPU."""
    assert_close(graph(x, outputs=name), reference(x)[name])


def test_asking_for_an_intermediate_leaves_the_graph_output_as_it_was(graph, x):
    before = graph(x)
    raw, out = graph(x, outputs=["1", "out0"])
    np.testing.assert_array_equal(out, before)
    np.testing.assert_array_equal(graph(x), before)  # the next plain run fuses again
    if graph.backend == "cpu":
        assert graph.executor.plan.epilogues, "the CPU plan keeps its fusions for plain runs"


def test_outputs_by_alias_name_or_one_string(graph, x):
    y = graph(x)
    assert_close(graph(x, outputs="out0"), y)
    assert_close(graph(x, outputs=["9"]), y)
    a, b = graph(x, outputs=["out0", "9"])
    np.testing.assert_array_equal(a, b)
    a, b = graph(x, outputs=(name for name in ["out0", "3"]), return_dict=True)  # any iterable
    assert (a, b) == ("out0", "3")


def test_return_dict_keys_by_the_names_asked_for(graph, x):
    plain = graph.forward(x, return_dict=True)
    assert list(plain) == ["9"]
    named = graph(x, outputs=["out0", "3"], return_dict=True)
    assert list(named) == ["out0", "3"]
    assert named["3"].shape == (1, 16, 8, 8)
    assert_close(named["out0"], plain["9"])


def test_intermediates_follow_a_new_input_size(graph, rng):
    x3 = rng.standard_normal((3, 1, 8, 8)).astype(np.float32)
    flat, pooled = graph(x3, outputs=["6", "5"])
    assert flat.shape == (3, 256) and pooled.shape == (3, 16, 4, 4)
    assert_close(flat, pooled.reshape(3, 256))


@pytest.mark.parametrize("name, message", [
    ("foo", r"no output or operand named 'foo': ask for a graph output \(9 \(out0\)\)"),
    ("out1", r"no output or operand named 'out1' \(did you mean out0\?\)"),
    ("99", r"'99' \(did you mean 9\?\).*any operand name shown by `kuiper info`"),
])
def test_an_unknown_output_lists_the_valid_names(graph, x, name, message):
    with pytest.raises(InputError, match=message):
        graph(x, outputs=[name])


def test_output_names_must_be_strings(graph, x):
    with pytest.raises(kuiper.ArgumentError, match=r"outputs\[0\]: got 9 \(int\), expected an "
                                                   r"output or operand name"):
        graph(x, outputs=[9])


def test_asked_for_outputs_from_several_threads(graph, rng):
    """The graph's lock covers named runs: each thread gets its own intermediates."""
    xs = [rng.standard_normal((1, 1, 8, 8)).astype(np.float32) for _ in range(4)]
    expected = [reference(x)["3"] for x in xs]
    got: dict[int, np.ndarray] = {}

    def work(i: int) -> None:
        for _ in range(5):
            got[i] = graph(xs[i], outputs="3")

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i in range(4):
        assert_close(got[i], expected[i], what=f"thread {i}")


# --- aliases ----------------------------------------------------------------------------------
def test_ports_and_kuiper_info_show_the_aliases(graph):
    assert [(p.name, p.alias) for p in graph.inputs] == [("0", "in0")]
    assert [(p.name, p.alias) for p in graph.outputs] == [("9", "out0")]
    text = graph.summary()
    assert "inputs:  0 (in0): 1x1x8x8 float32" in text
    assert "outputs: 9 (out0): 1x10 float32" in text
    assert "3: 1x16x8x8 float32" in text  # operand names: what outputs=[...] takes


def test_an_alias_that_names_another_operand_is_not_given(tmp_path, backend):
    """A file's own names win: here an intermediate is called 'out0', so the graph output
    has no alias, and 'out0' means the intermediate."""
    path = tmp_path / "m.pnnx.param"
    path.write_text("7767517\n4 3\n"
                    "pnnx.Input in 0 1 x #x=(2,3)f32\n"
                    "nn.ReLU r1 1 1 x out0 #x=(2,3)f32 #out0=(2,3)f32\n"
                    "nn.Hardtanh r2 1 1 out0 y max_val=0.5 min_val=-0.5 #y=(2,3)f32\n"
                    "pnnx.Output out 1 0 y\n")
    x = np.array([[-1, 0.25, 2], [3, -4, 0.75]], np.float32)
    with kuiper.load(path, backend=backend) as g:
        assert [(p.name, p.alias) for p in g.outputs] == [("y", None)]
        assert [p.alias for p in g.inputs] == ["in0"]
        assert_close(g({"x": x}, outputs="out0"), np.maximum(x, 0))
        assert_close(g({"in0": x}), np.clip(np.maximum(x, 0), -0.5, 0.5))


# --- threads= (CPU) ---------------------------------------------------------------------------
def blas_thread_counts() -> list[int]:
    return [info["num_threads"] for info in threadpool_info() if info["user_api"] == "blas"]


def test_threads_limits_blas_during_the_run_only(x):
    before = blas_thread_counts()
    if not before:
        pytest.skip("threadpoolctl finds no BLAS library in this NumPy: nothing to limit")
    seen: list[list[int]] = []
    with kuiper.load(DIGITS, threads=1) as g:
        g.forward(x, observer=lambda op, outs, s: seen.append(blas_thread_counts()))
        assert_close(g(x), reference(x)["9"])
    assert seen and all(counts == [1] * len(before) for counts in seen)
    assert blas_thread_counts() == before


@pytest.mark.parametrize("threads", [0, -2, 1.5, "2", True, 10**40])
def test_threads_must_be_a_positive_whole_number(threads):
    with pytest.raises(kuiper.ArgumentError, match=rf"threads: got {re.escape(repr(threads))}"
                                                   ".*expected (int or None|a whole number)"):
        kuiper.load(DIGITS, threads=threads)


def test_threads_is_a_cpu_option():
    pytest.importorskip("pyopencl")
    with pytest.raises(KuiperError, match=r"threads: unknown option\(s\) for the opencl backend"):
        kuiper.load(DIGITS, backend="opencl", threads=2)
