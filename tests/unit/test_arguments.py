"""The public API checks its arguments (kuiper/graph/arguments.py, issue 31).

Each case below once ended in a bare TypeError, ValueError, OverflowError, MemoryError or
NotADirectoryError far from the call. Now every wrong type or value is a KuiperError that
names the argument and what was expected (an ArgumentError; an InputError for the inputs, a
ResourceError for a size past the limits), on both backends.
"""

from __future__ import annotations

import resource
from pathlib import Path

import numpy as np
import pytest

import kuiper
from kuiper import ArgumentError, InputError, Limits, ResourceError

DIGITS = Path(kuiper.__file__).parent / "demo" / "digits.pnnx.param"
X = np.zeros((1, 1, 8, 8), np.float32)


@pytest.fixture(scope="module")
def graphs():
    return {}


def graph_of(graphs, backend):
    if backend not in graphs:
        graphs[backend] = kuiper.load(DIGITS, backend=backend)
    return graphs[backend]


# --- kuiper.load ------------------------------------------------------------------------------
@pytest.mark.parametrize("kwargs, argument, expected", [
    ({"plugins": 123}, "plugins", "expected a module name or a path, or a list of them"),
    ({"plugins": [None]}, r"plugins\[0\]", r"got None \(NoneType\), expected a path"),
    ({"plugins": [b"layers.py"]}, r"plugins\[0\]", "expected a path"),
    ({"plugins": ["my\0layers.py"]}, r"plugins\[0\]", "contains a NUL byte"),
    ({"plugins": ["x" * 5000]}, r"plugins\[0\]", "a path of 5000 characters, longer than the "
                                                 "4096"),
    ({"plugins": ["d/" + "x" * 300 + ".py"]}, r"plugins\[0\]", "a file or folder name of 303"),
    ({"input_shapes": [["a", 1, 8, 8]]}, r"input_shapes\[0\]\[0\]", r"got 'a' \(str\), "
                                                                    "expected a whole number"),
    ({"input_shapes": 5}, "input_shapes", "expected one shape per input"),
    ({"input_shapes": [None]}, r"input_shapes\[0\]", "expected a shape such as"),
    ({"input_shapes": [[1, 1, -8, 8]]}, r"input_shapes\[0\]\[2\]", "a size of 0 or more"),
    ({"limits": 5}, "limits", r"expected kuiper.Limits\("),
    ({"passes": 5}, "passes", "expected a list of pass names"),
    ({"params": 5}, "params", "expected a PNNX type mapped to its parameters"),
    ({"backend": 5}, "backend", "unknown backend 5, expected one of cpu, opencl"),
    ({"fuse": "no"}, "fuse", r"got 'no' \(str\), expected bool"),
    ({"runtime": 5, "backend": "opencl"}, "runtime", r"got 5 \(int\), expected OpenCLRuntime "
                                                     "or None"),
    ({"device": 0, "backend": "opencl"}, "device", "expected str or None"),
    ({"out_of_order": "yes", "backend": "opencl"}, "out_of_order", "expected bool"),
])
def test_load_names_the_wrong_argument(kwargs, argument, expected):
    # (checked before anything is built: an OpenCL option too, on a machine without OpenCL)
    with pytest.raises(ArgumentError, match=rf"^{argument}: .*{expected}"):
        kuiper.load(DIGITS, **kwargs)


@pytest.mark.parametrize("path", [None, 5, b"digits.pnnx.param", "dig\0its.pnnx.param"])
def test_load_names_a_wrong_path(path):
    with pytest.raises(ArgumentError, match="^param_path: "):
        kuiper.load(path)


def test_plugins_none_means_no_plugins(backend):
    assert kuiper.load(DIGITS, backend=backend, plugins=None)(X).shape == (1, 10)


@pytest.mark.parametrize("field", ["max_tensor_bytes", "max_total_bytes"])
@pytest.mark.parametrize("value", [None, 1.5, "4GB", True, 0, -1])
def test_limits_check_their_fields(field, value):
    values = {"max_tensor_bytes": 1 << 30, "max_total_bytes": 1 << 30, field: value}
    with pytest.raises(ArgumentError, match=rf"^Limits.{field}: got {value!r}, expected a "
                                            "positive whole number of bytes"):
        Limits(**values)


@pytest.mark.parametrize("variable", ["KUIPER_MAX_TENSOR_BYTES", "KUIPER_MAX_TOTAL_BYTES"])
@pytest.mark.parametrize("text", ["inf", "1e999", "-inf"])
def test_limits_from_the_environment_must_be_finite(monkeypatch, variable, text):
    monkeypatch.setenv(variable, text)
    with pytest.raises(ResourceError, match=rf"{variable}='{text}' is not a finite number"):
        kuiper.load(DIGITS)


# --- a graph's call and forward ----------------------------------------------------------------
@pytest.mark.parametrize("call, argument, expected", [
    (lambda g: g(X, outputs=5), "outputs", r"got 5 \(int\), expected an output or operand"),
    (lambda g: g.forward(X, outputs=[b"out0"]), r"outputs\[0\]", "expected an output"),
    (lambda g: g.forward(X, observer=5), "observer", "expected a function observer"),
    (lambda g: g.forward(X, observer=lambda: 0), "observer", "cannot take three arguments"),
    (lambda g: g(X, return_dict="yes"), "return_dict", "expected True or False"),
])
def test_a_call_names_the_wrong_argument(graphs, backend, call, argument, expected):
    with pytest.raises(ArgumentError, match=rf"^{argument}: .*{expected}"):
        call(graph_of(graphs, backend))


@pytest.mark.parametrize("value, expected", [
    ([[[[0.0] * 8] * 8], [[[0.0] * 7] * 8]], "cannot be read as a tensor .*must be rectangular"),
    ([[["a"] * 8] * 8], "should be float32, got an array of <U1"),
    (np.zeros((1, 1, 8, 8), object), "should be float32, got an array of object"),
    (np.zeros((1, 1, 8, 8), np.complex64), "should be float32, got complex64"),
    (np.zeros((8, 8), np.float32), "should be 4-D"),
])
def test_an_input_that_is_not_a_tensor_of_the_port(graphs, backend, value, expected):
    with pytest.raises(InputError, match=rf"^input '0'.*{expected}"):
        graph_of(graphs, backend)(value)


def peak_rss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KiB


@pytest.mark.parametrize("shape", [(1, 1, 100_000, 100_000), (1, 1, 34_000, 36_000)])
def test_a_broadcast_view_is_checked_before_it_is_copied(graphs, backend, shape):
    """A zero-stride view from np.broadcast_to costs nothing until made contiguous: 40 GB
    gave a bare MemoryError, a 4.6 GB one (just above the 4 GiB limit) was really allocated
    before the ResourceError. The logical size is checked first."""
    view = np.broadcast_to(np.float32(1), shape)
    before = peak_rss_bytes()
    with pytest.raises(ResourceError, match=r"input '0': a tensor of shape .* above the limit"):
        graph_of(graphs, backend)(view)
    assert peak_rss_bytes() - before < (1 << 30), "the view was copied before the check"
