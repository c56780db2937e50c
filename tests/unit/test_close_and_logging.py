"""close() and `with kuiper.load(...)`, the "kuiper" logger, and KuiperWarning on fallbacks.

close() must release what a graph holds: its weights (the .pnnx.bin itself is closed once they
are read) and the executor's buffers (device memory on OpenCL); a closed graph refuses to run
with a GraphError.
The logger stays silent unless configured; the first OpenCL build says so at INFO; operators
that fall back to the host on OpenCL are named in one KuiperWarning per build, pointing at the
caller's line.
"""

from __future__ import annotations

import logging
import warnings
from pathlib import Path

import numpy as np
import pytest

import kuiper
from kuiper import GraphError, GraphState, KuiperWarning
from kuiper.core import registry
from kuiper.layers.cpu.relu import ReLU as CpuReLU
from kuiper.testing import assert_close
from tests.conftest import opencl_available

DIGITS = Path(kuiper.__file__).parent / "demo" / "digits.pnnx.param"
RELUS = ["features.1 (nn.ReLU)", "features.3 (nn.ReLU)", "classifier.2 (nn.ReLU)"]


@pytest.fixture
def x(rng) -> np.ndarray:
    return rng.standard_normal((1, 1, 8, 8)).astype(np.float32)


needs_opencl = pytest.mark.skipif(not opencl_available(), reason="no OpenCL device")


# --- close ------------------------------------------------------------------------------------
def open_files() -> set[str]:
    """The files this process holds open (Linux: /proc/self/fd)."""
    folder = Path("/proc/self/fd")
    found = set()
    for fd in folder.iterdir():
        try:
            found.add(str(fd.readlink()))
        except OSError:  # closed while we listed them
            pass
    return found


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs Linux's /proc/self/fd")
def test_the_bin_is_closed_once_its_weights_are_read(backend):
    # the weights own their memory (parser/binfile.py): a graph holds no file a re-export
    # could truncate under it
    with kuiper.load(DIGITS, backend=backend):
        assert str(DIGITS.with_suffix(".bin").resolve()) not in open_files()


def test_close_releases_the_weights_and_refuses_to_run(backend, x):
    graph = kuiper.load(DIGITS, backend=backend)
    expected = graph(x)
    graph.close()
    assert all(op.layer is None and not op.attributes for op in graph.operators)
    assert graph.state == GraphState.CLOSED
    with pytest.raises(GraphError, match=r"forward\(\) called on a closed graph "
                                         r"\(digits.pnnx.param\).*load the model again"):
        graph(x)
    with pytest.raises(GraphError, match="closed graph"):
        graph.build([(2, 1, 8, 8)])
    with pytest.raises(GraphError, match=r"summary\(\) called on a closed graph"):
        graph.summary()
    graph.close()  # twice: nothing more to do
    assert [p.shape for p in graph.outputs] == [(1, 10)]  # the ports stay readable
    with kuiper.load(DIGITS, backend=backend) as again:  # and a new load runs as before
        assert_close(again(x), expected)


def test_with_closes_the_graph_even_after_an_error(backend, x):
    with pytest.raises(kuiper.InputError):
        with kuiper.load(DIGITS, backend=backend) as graph:
            assert graph(x).shape == (1, 10)
            graph(np.zeros(3, np.float32))
    assert graph.state == GraphState.CLOSED


@needs_opencl
def test_close_releases_the_device_buffers():
    graph = kuiper.load(DIGITS, backend="opencl")
    executor = graph.executor
    assert executor.arrays and executor.steps
    graph.close()
    assert executor.arrays == {} and executor.steps == []
    assert all(op.layer is None and not op.attributes for op in graph.operators)


def test_a_weight_kept_by_the_caller_stays_valid_after_close(backend, x):
    """close() drops the graph's references; an array someone still holds stays readable."""
    graph = kuiper.load(DIGITS, backend=backend)
    weight = graph.operators[1].attributes["weight"]
    before = weight.copy()
    graph.close()
    np.testing.assert_array_equal(weight, before)  # still readable, not a crash


# --- logging ----------------------------------------------------------------------------------
def test_the_kuiper_logger_is_silent_unless_configured():
    logger = logging.getLogger("kuiper")
    assert any(isinstance(h, logging.NullHandler) for h in logger.handlers)
    assert logging.getLogger("kuiper.opencl.execution.executor").parent is logger


@needs_opencl
def test_the_first_opencl_build_says_so_once(caplog, rng):
    with caplog.at_level(logging.INFO, logger="kuiper"):
        with kuiper.load(DIGITS, backend="opencl") as graph:
            graph(rng.standard_normal((3, 1, 8, 8)).astype(np.float32))  # a rebuild: no line
    lines = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    assert len(lines) == 1, lines
    assert lines[0].startswith("building OpenCL kernels for 9 operators on ")
    assert caplog.records[0].name == "kuiper.opencl.execution.executor"


# --- fallback warnings ------------------------------------------------------------------------
@needs_opencl
def test_opencl_fallbacks_are_warned_once_per_build_at_the_callers_line(x, rng):
    with registry.override(CpuReLU, "nn.ReLU", backend="opencl"):  # no OpenCL ReLU: fallbacks
        with pytest.warns(KuiperWarning) as caught:
            graph = kuiper.load(DIGITS, backend="opencl")
    # only Kuiper's own: a GPU driver's compiler notes come as pyopencl CompilerWarnings
    caught = [w for w in caught if issubclass(w.category, KuiperWarning)]
    assert len(caught) == 1
    message = str(caught[0].message)
    assert message.startswith("3 operator(s) of ") and all(name in message for name in RELUS)
    assert "`kuiper info --backend opencl`" in message
    assert caught[0].filename == __file__  # the user's kuiper.load line, not Kuiper's
    with warnings.catch_warnings():
        warnings.simplefilter("error", KuiperWarning)
        graph(rng.standard_normal((2, 1, 8, 8)).astype(np.float32))  # same fallbacks: quiet
        with kuiper.load(DIGITS) as reference:
            assert_close(graph(x), reference(x))
    graph.close()


def test_no_warning_without_fallbacks(backend, x):
    with warnings.catch_warnings():
        warnings.simplefilter("error", KuiperWarning)
        with kuiper.load(DIGITS, backend=backend) as graph:
            assert graph(x).shape == (1, 10)


def test_kuiper_warning_is_a_user_warning():
    assert issubclass(KuiperWarning, UserWarning)
    assert "KuiperWarning" in kuiper.__all__
