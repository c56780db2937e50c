"""RuntimeGraph: states, errors a user can trigger, inputs/outputs, summary, tuple outputs.

Only layers the core ships with (nn.ReLU, pnnx.Attribute) are used, so these tests do not depend
on the operator families other people are writing.
"""

from __future__ import annotations

import numpy as np
import pytest

import kuiper
from kuiper import GraphError, GraphState, InputError, UnsupportedOperatorError
from kuiper.graph.runtime_graph import RuntimeGraph
from kuiper.testing import write_param


def write_model(tmp_path, lines: list[str], weights: dict[str, np.ndarray] | None = None,
                name: str = "g") -> str:
    return write_param(tmp_path, lines, weights, name=name)


RELU2 = [
    "pnnx.Input pnnx_input_0 0 1 0 #0=(1,3,8,8)f32",
    "nn.ReLU relu_a 1 1 0 1 #0=(1,3,8,8)f32 #1=(1,3,8,8)f32",
    "F.relu relu_b 1 1 1 2 #1=(1,3,8,8)f32 #2=(1,3,8,8)f32",
    "pnnx.Output pnnx_output_0 1 0 2"]


@pytest.fixture
def relu_model(tmp_path):
    return write_model(tmp_path, RELU2)


def test_states(relu_model):
    graph = RuntimeGraph(relu_model)
    assert graph.state is GraphState.NEED_INIT
    assert graph.init() is graph
    assert graph.state is GraphState.NEED_BUILD
    assert graph.build() is graph
    assert graph.state is GraphState.COMPLETE
    x = np.random.default_rng(0).standard_normal((1, 3, 8, 8)).astype(np.float32)
    np.testing.assert_array_equal(graph(x), np.maximum(x, 0))
    assert "COMPLETE" in repr(graph)


def test_build_before_init(relu_model):
    with pytest.raises(GraphError, match=r"init\(\)"):
        RuntimeGraph(relu_model).build()


@pytest.mark.parametrize("steps", [0, 1])
def test_forward_before_build(relu_model, steps):
    graph = RuntimeGraph(relu_model)
    if steps:
        graph.init()
    state = graph.state.name
    with pytest.raises(GraphError) as info:
        graph.forward(np.zeros((1, 3, 8, 8), np.float32))
    message = str(info.value)
    assert state in message and "build()" in message


def test_unknown_backend(relu_model):
    with pytest.raises(kuiper.KuiperError, match=r"unknown backend 'cuda'.*cpu.*opencl"):
        kuiper.load(relu_model, backend="cuda")


def test_dangling_operand_is_reported_by_name(tmp_path):
    path = write_model(tmp_path, [
        "pnnx.Input pnnx_input_0 0 1 0",
        "nn.ReLU relu_a 1 1 0 1",
        "torch.add add_0 2 1 1 ghost 2",
        "pnnx.Output pnnx_output_0 1 0 2"])
    with pytest.raises(GraphError) as info:
        kuiper.load(path)
    message = str(info.value)
    for part in ("'ghost'", "'add_0'", "dangling", "line 5", "g.pnnx.param"):
        assert part in message, message


def test_operand_produced_twice(tmp_path):
    path = write_model(tmp_path, [
        "pnnx.Input pnnx_input_0 0 1 0",
        "nn.ReLU relu_a 1 1 0 1",
        "nn.ReLU relu_b 1 1 0 1",
        "pnnx.Output pnnx_output_0 1 0 1"])
    with pytest.raises(GraphError, match=r"line 5.*'1'.*'relu_a'.*'relu_b'"):
        kuiper.load(path)


@pytest.mark.parametrize("drop", ["pnnx.Input", "pnnx.Output"])
def test_a_model_needs_inputs_and_outputs(tmp_path, drop):
    lines = [line for line in RELU2 if not line.startswith(drop)]
    if drop == "pnnx.Input":  # keep the graph linked: the first ReLU now reads a constant
        lines.insert(0, "pnnx.Attribute c 0 1 0 @data=(1,3,8,8)f32")
    path = write_model(tmp_path, lines, weights={"c.data": np.zeros((1, 3, 8, 8), np.float32)})
    with pytest.raises(GraphError, match=r"pnnx\.Input.*pnnx\.Output"):
        kuiper.load(path)


# --- inputs -----------------------------------------------------------------------------------

def test_wrong_input_count(relu_model):
    graph = kuiper.load(relu_model)
    x = np.zeros((1, 3, 8, 8), np.float32)
    with pytest.raises(InputError) as info:
        graph(x, x)
    message = str(info.value)
    assert "takes 1 input" in message and "got 2" in message and "0: 1x3x8x8" in message
    with pytest.raises(InputError, match="got 0"):
        graph()


@pytest.mark.parametrize("shape", [(3, 8, 8), (1, 1, 3, 8, 8), ()])
def test_wrong_input_rank(relu_model, shape):
    graph = kuiper.load(relu_model)
    with pytest.raises(InputError) as info:
        graph(np.zeros(shape, np.float32))
    message = str(info.value)
    assert "input '0'" in message and "4-D" in message and str(shape) in message


@pytest.mark.parametrize("value", [np.zeros((1, 3, 8, 8), np.complex64),
                                   np.full((1, 3, 8, 8), "a")])
def test_wrong_input_dtype(relu_model, value):
    graph = kuiper.load(relu_model)
    with pytest.raises(InputError, match=r"input '0' should be float32, got"):
        graph(value)


def test_compatible_inputs_are_converted(relu_model):
    graph = kuiper.load(relu_model)
    x = np.random.default_rng(1).standard_normal((1, 3, 8, 8))  # float64, from a list too
    y = graph(x)
    assert y.dtype == np.float32
    np.testing.assert_allclose(y, np.maximum(x, 0).astype(np.float32))
    np.testing.assert_array_equal(graph(x.tolist()), y)
    fortran = np.asfortranarray(x.astype(np.float32))
    np.testing.assert_array_equal(graph(fortran), y)


def test_dynamic_dims_need_input_shapes(tmp_path):
    path = write_model(tmp_path, [
        "pnnx.Input pnnx_input_0 0 1 0 #0=(1,3,?,?)f32",
        "nn.ReLU relu 1 1 0 1 #0=(1,3,?,?)f32 #1=(1,3,?,?)f32",
        "pnnx.Output pnnx_output_0 1 0 1"])
    with pytest.raises(InputError, match=r"input '0' has no static shape.*input_shapes"):
        kuiper.load(path)
    graph = kuiper.load(path, input_shapes=[(2, 3, 5, 7)])
    assert graph.inputs[0].shape == (2, 3, 5, 7)
    with pytest.raises(InputError, match=r"1 input\(s\), got 2 shape"):
        kuiper.load(path, input_shapes=[(1, 3, 4, 4), (1, 3, 4, 4)])


# --- unknown operators --------------------------------------------------------------------------

@pytest.mark.parametrize("backend_name", ["cpu", "opencl"])
def test_unknown_operator_names_itself_and_the_closest_types(tmp_path, backend_name):
    if backend_name == "opencl":
        from tests.conftest import opencl_available
        if not opencl_available():
            pytest.skip("no OpenCL device")
    path = write_model(tmp_path, [
        "pnnx.Input pnnx_input_0 0 1 0 #0=(1,4)f32",
        "nn.ReLu relu 1 1 0 1",
        "pnnx.Output pnnx_output_0 1 0 1"])
    with pytest.raises(UnsupportedOperatorError) as info:
        kuiper.load(path, backend=backend_name)
    message = str(info.value)
    assert message.startswith(f"{path}, line 4: operator 'relu': ")
    assert "'nn.ReLu'" in message
    assert "Did you mean" in message and "nn.ReLU" in message
    assert "`kuiper ops` lists the" in message
    assert len(message) < 400, message  # the closest types, not all 200+ of them
    assert "moduleop" not in message  # a typo of a PyTorch type is no user module


def test_an_unknown_user_module_type_says_a_plugin_is_needed(tmp_path):
    path = write_model(tmp_path, [
        "pnnx.Input pnnx_input_0 0 1 0 #0=(1,4)f32",
        "mymods.Swish2 act 1 1 0 1",
        "pnnx.Output pnnx_output_0 1 0 1"])
    with pytest.raises(UnsupportedOperatorError) as info:
        kuiper.load(path)
    message = str(info.value)
    assert message.startswith(f"{path}, line 4: operator 'act': no cpu layer for operator type "
                              "'mymods.Swish2'")
    for part in ("moduleop", "plugins=", "--plugin", "kuiper.layers", "kuiper/PLUGINS.md"):
        assert part in message, message


# --- introspection -------------------------------------------------------------------------------

def test_inputs_and_outputs(backend, tmp_path):
    path = write_model(tmp_path, [
        "pnnx.Input pnnx_input_0 0 1 x #x=(2,3,4,5)f32",
        "pnnx.Input pnnx_input_1 0 1 y #y=(6,7)f32",
        "nn.ReLU relu_x 1 1 x rx #x=(2,3,4,5)f32 #rx=(2,3,4,5)f32",
        "nn.ReLU relu_y 1 1 y ry #y=(6,7)f32 #ry=(6,7)f32",
        "pnnx.Output pnnx_output_0 1 0 ry",
        "pnnx.Output pnnx_output_1 1 0 rx"])
    graph = kuiper.load(path, backend=backend)
    assert [(p.name, p.shape, p.dtype) for p in graph.inputs] == [
        ("x", (2, 3, 4, 5), np.dtype(np.float32)), ("y", (6, 7), np.dtype(np.float32))]
    # several pnnx.Output operators: outputs in file order
    assert [(p.name, p.shape) for p in graph.outputs] == [("ry", (6, 7)), ("rx", (2, 3, 4, 5))]
    assert str(graph.inputs[0]) == "x: 2x3x4x5 float32"
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 3, 4, 5)).astype(np.float32)
    y = rng.standard_normal((6, 7)).astype(np.float32)
    ry, rx = graph(x, y)
    np.testing.assert_array_equal(rx, np.maximum(x, 0))
    np.testing.assert_array_equal(ry, np.maximum(y, 0))
    # a new input size rebuilds: ports follow
    graph(rng.standard_normal((1, 3, 9, 2)).astype(np.float32), y)
    assert graph.inputs[0].shape == (1, 3, 9, 2) and graph.outputs[1].shape == (1, 3, 9, 2)
    assert graph.state is GraphState.COMPLETE


def test_tuple_outputs_are_flattened(backend, tmp_path):
    path = write_model(tmp_path, [
        "pnnx.Input pnnx_input_0 0 1 0 #0=(2,5)f32",
        "pnnx.Attribute const 0 1 1 @data=(3)f32 #1=(3)f32",
        "nn.ReLU relu_a 1 1 0 2 #0=(2,5)f32 #2=(2,5)f32",
        "F.relu relu_b 1 1 2 3 #2=(2,5)f32 #3=(2,5)f32",
        "prim::TupleConstruct pnnx_10 3 1 3 1 2 4",
        "pnnx.Output pnnx_output_0 1 0 4"],
        weights={"const.data": np.array([1, -2, 3], np.float32)})
    graph = kuiper.load(path, backend=backend)
    assert [p.name for p in graph.outputs] == ["3", "1", "2"]
    assert [p.shape for p in graph.outputs] == [(2, 5), (3,), (2, 5)]
    x = np.random.default_rng(3).standard_normal((2, 5)).astype(np.float32)
    out = graph(x)
    assert isinstance(out, tuple) and len(out) == 3
    np.testing.assert_array_equal(out[0], np.maximum(x, 0))
    np.testing.assert_array_equal(out[1], [1, -2, 3])
    np.testing.assert_array_equal(out[2], np.maximum(x, 0))
    assert len(graph.forward(x)) == 3


def test_tuple_inside_the_graph_is_rejected(tmp_path):
    path = write_model(tmp_path, [
        "pnnx.Input pnnx_input_0 0 1 0 #0=(2,5)f32",
        "prim::TupleConstruct tup 1 1 0 1",
        "nn.ReLU relu 1 1 1 2",
        "pnnx.Output pnnx_output_0 1 0 2"])
    with pytest.raises(GraphError, match=r"'tup'.*prim::TupleConstruct.*output"):
        kuiper.load(path)


def test_summary(backend, tmp_path):
    path = write_model(tmp_path, [
        "pnnx.Input pnnx_input_0 0 1 0 #0=(1,3,8,8)f32",
        "pnnx.Attribute weights.table 0 1 5 @data=(4,6)f32 #5=(4,6)f32",
        "nn.ReLU features.relu_a 1 1 0 1 #0=(1,3,8,8)f32 #1=(1,3,8,8)f32",
        "F.relu relu_b 1 1 1 2 #1=(1,3,8,8)f32 #2=(1,3,8,8)f32",
        "pnnx.Output pnnx_output_0 2 0 2 5"],
        weights={"weights.table.data": np.zeros((4, 6), np.float32)})
    graph = kuiper.load(path, backend=backend)
    text = graph.summary()
    for part in ("features.relu_a", "nn.ReLU", "relu_b", "F.relu", "weights.table",
                 "pnnx.Attribute", "1x3x8x8 float32", "4x6 float32", "24",
                 "inputs:  0 (in0): 1x3x8x8 float32",
                 "outputs: 2 (out0): 1x3x8x8 float32, 5 (out1): 4x6 float32",
                 "3 operators", f"backend: {backend}"):
        assert part in text, f"{part!r} not in\n{text}"
    # graph operators (Input/Output) are not rows
    assert "pnnx_input_0" not in text and "pnnx_output_0" not in text
    # the summary follows a rebuild at another size
    graph(np.zeros((2, 3, 5, 5), np.float32))
    assert "2x3x5x5 float32" in graph.summary()


def test_summary_shows_which_operators_may_run_concurrently(tmp_path):
    # Two ReLUs read the input and a third one reads relu_b: relu_a and relu_b share level 0.
    path = write_model(tmp_path, [
        "pnnx.Input pnnx_input_0 0 1 0 #0=(1,3,8,8)f32",
        "nn.ReLU relu_a 1 1 0 1",
        "nn.ReLU relu_b 1 1 0 2",
        "nn.ReLU relu_c 1 1 2 3",
        "pnnx.Output pnnx_output_0 2 0 1 3"])
    text = kuiper.load(path).summary()
    assert "concurrency: 2 levels; up to 2 operators may run at once" in text, text
    assert "level 0: relu_a, relu_b" in text, text
    chain = kuiper.load(write_model(tmp_path, RELU2, name="chain")).summary()
    assert "concurrency: none: the 2 operators form a chain" in chain, chain


@pytest.mark.parametrize("backend_name, option", [("cpu", "fsue"), ("opencl", "devcie")])
def test_unknown_backend_options_are_refused_by_name(relu_model, backend_name, option):
    # The options are the executor's keyword arguments: checked before anything is built,
    # so even an OpenCL typo is reported on a machine without OpenCL.
    with pytest.raises(kuiper.ArgumentError, match=rf"{option}: unknown option\(s\) for the "
                       rf"{backend_name} backend \(it takes: "):
        kuiper.load(relu_model, backend=backend_name, **{option: 1})


def test_deep_graph_runs_end_to_end(backend, tmp_path):
    # 2,000 chained operators: ordering, shape inference and execution must not recurse.
    n = 2_000
    lines = ["pnnx.Input pnnx_input_0 0 1 0 #0=(2,3)f32"]
    lines += [f"nn.ReLU relu_{k} 1 1 {k} {k + 1}" for k in range(n)]
    lines.append(f"pnnx.Output pnnx_output_0 1 0 {n}")
    graph = kuiper.load(write_model(tmp_path, lines), backend=backend)
    x = np.array([[-1, 2, -3], [4, -5, 6]], np.float32)
    np.testing.assert_array_equal(graph(x), np.maximum(x, 0))
    assert len(graph.order) == n + 2


# MobileViTv2's patch folding as pnnx writes it: an nn.PixelShuffle whose annotated output,
# (1,64,32,32), is not what a pixel shuffle of (1,64,4,256) gives (1,16,8,512). The error comes
# at the next operator, rightly; it must also say that the file contradicts itself upstream.
CONTRADICTING = [
    "pnnx.Input pnnx_input_0 0 1 0 #0=(1,64,4,256)f32",
    "pnnx.Input pnnx_input_1 0 1 1 #1=(1,64,32,32)f32",
    "nn.PixelShuffle fold 1 1 0 2 upscale_factor=2 #0=(1,64,4,256)f32 #2=(1,64,32,32)f32",
    "torch.cat cat 2 1 2 1 3 dim=1 #2=(1,64,32,32)f32 #1=(1,64,32,32)f32 #3=(1,128,32,32)f32",
    "pnnx.Output pnnx_output_0 1 0 3"]


def test_a_shape_the_file_contradicts_is_named_in_the_error(tmp_path):
    with pytest.raises(kuiper.ShapeError) as info:
        kuiper.load(write_model(tmp_path, CONTRADICTING))
    message = str(info.value)
    assert message.startswith("operator 'cat' (torch.cat)")  # where it fails ...
    # ... and where the file's annotation and the operator part, first
    assert ("operator 'fold' (nn.PixelShuffle, line 5) gives 1x16x8x512 for '2' where the file "
            "annotates 1x64x32x32") in message
    assert "converter (pnnx)" in message


def test_agreeing_annotations_add_nothing_to_an_error(tmp_path):
    lines = [line.replace("#2=(1,64,32,32)f32", "#2=(1,16,8,512)f32") for line in CONTRADICTING]
    with pytest.raises(kuiper.ShapeError) as info:
        kuiper.load(write_model(tmp_path, lines))
    assert "annotates" not in str(info.value) and "converter" not in str(info.value)


def test_integer_inputs_cast_to_float_warn_once(relu_model):
    """A raw 0..255 uint8 image fed to a float model gives a confident answer to the wrong
    question: the Python API says so (once per input of a graph, at the caller's line), as the
    command line does; float inputs, and a second call, say nothing."""
    import warnings

    graph = kuiper.load(relu_model)
    pixels = np.arange(192, dtype=np.uint8).reshape(1, 3, 8, 8)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")  # the once is Kuiper's own, not Python's registry
        np.testing.assert_array_equal(graph(pixels), pixels.astype(np.float32))
        graph(pixels)
        graph(pixels.astype(np.float32))
    (warning,) = caught
    assert warning.category is kuiper.KuiperWarning and warning.filename == __file__
    message = str(warning.message)
    assert "got uint8 (values 0..191), cast to float32 unscaled" in message
    assert "x / 255" in message
    with pytest.warns(kuiper.KuiperWarning, match="got int64"):  # another graph warns again
        kuiper.load(relu_model)(pixels.astype(np.int64))
