"""Inputs and outputs that stay on the device: pyopencl arrays in, pyopencl arrays out, and a
pipeline of two models with no host copy between them (kuiper/opencl/execution/executor.py)."""

from __future__ import annotations

import numpy as np
import pytest

import kuiper
from kuiper.demo import DIGITS_PARAM
from kuiper.testing import write_operator_model
from tests.conftest import opencl_available

pytestmark = pytest.mark.skipif(not opencl_available(), reason="no OpenCL device")


@pytest.fixture(scope="module")
def digits():
    graph = kuiper.load(DIGITS_PARAM, backend="opencl", input_shapes=[(5, 1, 8, 8)])
    x = np.random.default_rng(3).random((5, 1, 8, 8), dtype=np.float32)
    return graph, x, graph(x)


@pytest.fixture(scope="module")
def softmax(tmp_path_factory):
    """A second model that reads what the first one writes: softmax over the ten logits."""
    folder = tmp_path_factory.mktemp("softmax")
    path = write_operator_model(folder, "F.softmax", [np.zeros((5, 10), np.float32)],
                                {"dim": 1})
    return kuiper.load(path, backend="opencl")


def to_device(graph, x):
    import pyopencl.array as cla

    return cla.to_device(graph.executor.runtime.queue, x)


def test_a_device_input_gives_the_host_input_answer(digits):
    graph, x, expected = digits
    np.testing.assert_array_equal(graph(to_device(graph, x)), expected)


def test_device_outputs_are_pyopencl_arrays_of_their_own(digits):
    import pyopencl.array as cla

    graph, x, expected = digits
    first = graph(x, device_outputs=True)
    assert isinstance(first, cla.Array) and first.shape == expected.shape
    second = graph(np.zeros_like(x), device_outputs=True)   # reuses the graph's buffers...
    np.testing.assert_array_equal(first.get(), expected)   # ... not the returned array's
    assert not np.array_equal(second.get(), expected)


def test_two_models_pass_device_arrays_with_no_host_copy(digits, softmax, monkeypatch):
    import pyopencl.array as cla

    graph, x, expected = digits
    host_result = softmax(expected)
    downloads = []
    original = cla.Array.get

    def counting_get(self, *args, **kwargs):
        downloads.append(self.shape)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(cla.Array, "get", counting_get)
    logits = graph(to_device(graph, x), device_outputs=True)
    probabilities = softmax(logits, device_outputs=True)
    assert downloads == []            # nothing went through the host on the way
    monkeypatch.undo()
    np.testing.assert_allclose(probabilities.get(), host_result, rtol=1e-6, atol=1e-7)


def test_run_on_device_chains_graphs_like_the_host_and_refuses_none(digits, softmax):
    from kuiper.batch.pipeline import run_on_device
    from kuiper.core.errors import KuiperError

    graph, x, expected = digits
    np.testing.assert_array_equal(run_on_device([graph, softmax], x), softmax(graph(x)))
    with pytest.raises(KuiperError, match="`graphs` is empty"):
        run_on_device([], x)


def test_load_can_make_device_outputs_the_default(digits):
    import pyopencl.array as cla

    _, x, expected = digits
    graph = kuiper.load(DIGITS_PARAM, backend="opencl", input_shapes=[x.shape],
                        device_outputs=True)
    y = graph(x)
    assert isinstance(y, cla.Array)
    np.testing.assert_array_equal(y.get(), expected)
    assert isinstance(graph(x, device_outputs=False), np.ndarray)


def test_the_cpu_backend_takes_a_device_array_and_refuses_device_outputs(digits):
    graph, x, _ = digits
    cpu = kuiper.load(DIGITS_PARAM, input_shapes=[x.shape])
    np.testing.assert_allclose(cpu(to_device(graph, x)), cpu(x))
    with pytest.raises(kuiper.InputError, match="backend='opencl'"):
        cpu(x, device_outputs=True)


def test_device_inputs_are_checked(digits):
    import pyopencl as cl
    import pyopencl.array as cla

    graph, x, _ = digits
    with pytest.raises(kuiper.InputError, match="float32, got a device array of float64"):
        graph(to_device(graph, x.astype(np.float64)))
    with pytest.raises(kuiper.InputError, match="4-D"):
        graph(to_device(graph, x[0]))
    wide = to_device(graph, np.concatenate([x, x], axis=3))
    with pytest.raises(kuiper.InputError, match="non-contiguous"):
        graph(wide[:, :, :, :8])
    other = cl.CommandQueue(cl.Context([graph.executor.runtime.device]))
    with pytest.raises(kuiper.InputError, match="another OpenCL context"):
        graph(cla.to_device(other, x))
    with pytest.raises(kuiper.KuiperError, match="device_outputs"):
        kuiper.load(DIGITS_PARAM, backend="opencl", device_outputs="yes")
