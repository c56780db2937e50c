"""Resizing (nn.Upsample*, F.upsample*, F.interpolate) against torch, on both backends.

Every mode x {scale_factor, size} x align_corners x recompute_scale_factor, with non-integer
and shrinking scales (1.7, 0.6, (0.5, 0.3)): nearest-neighbour indices must match exactly.
"""

import contextlib
import io
import os

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import kuiper
from kuiper import OperatorError, ShapeError
from kuiper.testing import assert_close, run_operator

SCALES_2D = [2.0, 1.7, (1.5, 2.5), 0.6, (0.5, 0.3), (1.05, 2.05)]
SIZES_2D = [(9, 11), (3, 5), (5, 13), (1, 1), (10, 14)]
MODES_2D = [("nearest", None), ("nearest-exact", None), ("bilinear", False), ("bilinear", True),
            ("bicubic", False), ("bicubic", True)]


def _pair(v):
    return list(v) if isinstance(v, tuple) else [v, v]


def _reference(x, mode, align_corners, size=None, scale=None, recompute=None):
    kwargs = {} if align_corners is None else {"align_corners": align_corners}
    return F.interpolate(torch.from_numpy(x), size=size, scale_factor=scale, mode=mode,
                         recompute_scale_factor=recompute, **kwargs).numpy()


def _tol(mode):
    return 0 if mode.startswith("nearest") else 1e-4  # copies are exact


def _params(mode, align_corners, **extra):
    params = {"mode": mode, **extra}
    if align_corners is not None:
        params["align_corners"] = align_corners
    return params


@pytest.mark.parametrize("mode, align_corners", MODES_2D, ids=str)
@pytest.mark.parametrize("scale", SCALES_2D, ids=str)
@pytest.mark.parametrize("recompute", [None, True])
def test_upsample_scale_factor(backend, rng, recompute, mode, align_corners, scale):
    x = rng.standard_normal((2, 13, 5, 7)).astype(np.float32)
    extra = {"scale_factor": _pair(scale)}
    if recompute is not None:
        extra["recompute_scale_factor"] = recompute
    (y,) = run_operator("F.interpolate", [x], params=_params(mode, align_corners, **extra),
                        backend=backend)
    expected = _reference(x, mode, align_corners, scale=scale, recompute=recompute)
    assert_close(y, expected, rtol=_tol(mode))


@pytest.mark.parametrize("mode, align_corners", MODES_2D, ids=str)
@pytest.mark.parametrize("size", SIZES_2D, ids=str)
def test_upsample_size(backend, rng, mode, align_corners, size):
    x = rng.standard_normal((2, 3, 5, 7)).astype(np.float32)
    (y,) = run_operator("nn.Upsample", [x], params=_params(mode, align_corners, size=size),
                        backend=backend)
    assert_close(y, _reference(x, mode, align_corners, size=size), rtol=_tol(mode))


# The same parameters under each general type name pnnx writes (as the exports spell them).
@pytest.mark.parametrize("op_type", ["nn.Upsample", "F.upsample", "F.interpolate"])
@pytest.mark.parametrize("params", [
    {"mode": "nearest", "scale_factor": (1.7, 1.7), "size": None},
    {"mode": "bilinear", "align_corners": False, "size": (5, 13)},
    {"mode": "bilinear", "align_corners": True, "scale_factor": (2.0, 2.0)},
    {"mode": "nearest-exact", "recompute_scale_factor": False, "scale_factor": (1.7, 1.7)},
    {"scale_factor": 2.0}], ids=str)
def test_upsample_op_types(backend, rng, op_type, params):
    x = rng.standard_normal((2, 3, 6, 8)).astype(np.float32)
    (y,) = run_operator(op_type, [x], params=params, backend=backend)
    mode = params.get("mode", "nearest")
    scale = params.get("scale_factor")
    expected = _reference(x, mode, params.get("align_corners"), size=params.get("size"),
                          scale=tuple(scale) if isinstance(scale, tuple) else scale)
    assert_close(y, expected, rtol=_tol(mode))


@pytest.mark.parametrize("resize", [{"scale_factor": (2.0, 2.0)}, {"scale_factor": (1.7, 1.7)},
                                    {"size": (7, 9)}, {"size": (1, 4)}], ids=str)
@pytest.mark.parametrize("op_type, mode, align_corners", [
    ("nn.UpsamplingNearest2d", "nearest", None), ("F.upsample_nearest", "nearest", None),
    ("nn.UpsamplingBilinear2d", "bilinear", True), ("F.upsample_bilinear", "bilinear", True)])
def test_upsample_fixed_mode_modules(backend, rng, op_type, mode, align_corners, resize):
    x = rng.standard_normal((2, 5, 4, 6)).astype(np.float32)
    (y,) = run_operator(op_type, [x], params=dict(resize), backend=backend)
    expected = _reference(x, mode, align_corners, size=resize.get("size"),
                          scale=resize.get("scale_factor"))
    assert_close(y, expected, rtol=_tol(mode))


@pytest.mark.parametrize("mode, align_corners", [("nearest", None), ("nearest-exact", None),
                                                 ("linear", False), ("linear", True)], ids=str)
@pytest.mark.parametrize("resize", [{"scale_factor": (2.0,)}, {"scale_factor": 1.7},
                                    {"scale_factor": (0.45,)}, {"size": (11,)}, {"size": 13}],
                         ids=str)
def test_upsample_1d(backend, rng, mode, align_corners, resize):
    x = rng.standard_normal((3, 13, 8)).astype(np.float32)
    (y,) = run_operator("F.interpolate", [x], params=_params(mode, align_corners, **resize),
                        backend=backend)
    scale = resize.get("scale_factor")
    expected = _reference(x, mode, align_corners, size=resize.get("size"),
                          scale=scale[0] if isinstance(scale, tuple) else scale)
    assert_close(y, expected, rtol=_tol(mode))


@pytest.mark.parametrize("mode, align_corners", [("nearest", None), ("nearest-exact", None),
                                                 ("trilinear", False), ("trilinear", True)],
                         ids=str)
@pytest.mark.parametrize("resize", [{"scale_factor": (2.0, 1.5, 0.7)}, {"size": (3, 7, 5)}],
                         ids=str)
def test_upsample_3d(backend, rng, mode, align_corners, resize):
    x = rng.standard_normal((2, 3, 4, 5, 6)).astype(np.float32)
    (y,) = run_operator("nn.Upsample", [x], params=_params(mode, align_corners, **resize),
                        backend=backend)
    expected = _reference(x, mode, align_corners, size=resize.get("size"),
                          scale=resize.get("scale_factor"))
    assert_close(y, expected, rtol=_tol(mode))


def test_upsample_same_size_and_int_tensor(backend, rng):
    x = rng.standard_normal((2, 3, 4, 5)).astype(np.float32)
    (y,) = run_operator("F.interpolate", [x], params={"mode": "bilinear", "size": (4, 5)},
                        backend=backend)
    assert_close(y, x, rtol=0)
    labels = rng.integers(0, 20, (1, 2, 3, 5)).astype(np.int64)  # e.g. a segmentation map
    (y,) = run_operator("nn.Upsample", [labels], params={"scale_factor": (1.5, 1.5)},
                        backend=backend)
    # torch has no integer nearest resize on the CPU: resize the labels as floats (exact).
    expected = F.interpolate(torch.from_numpy(labels).float(), scale_factor=1.5).long()
    assert y.dtype == np.int64
    assert_close(y, expected.numpy(), rtol=0)


@pytest.mark.parametrize("op_type, params, shape, error, message", [
    ("nn.Upsample", {"mode": "area", "size": (4, 4)}, (1, 2, 3, 3), OperatorError,
     "expected one of nearest"),
    ("nn.Upsample", {"mode": "nearest"}, (1, 2, 3, 3), OperatorError,
     "exactly one of 'size' and 'scale_factor'"),
    ("nn.Upsample", {"size": (4, 4), "scale_factor": (2.0, 2.0)}, (1, 2, 3, 3), OperatorError,
     "exactly one of"),
    ("F.interpolate", {"mode": "nearest", "align_corners": True, "scale_factor": 2.0},
     (1, 2, 3, 3), OperatorError, "align_corners=True only applies"),
    ("nn.Upsample", {"mode": "bilinear", "scale_factor": (2.0, 2.0)}, (1, 2, 3), ShapeError,
     "mode=bilinear resizes a 4-D input"),
    ("nn.Upsample", {"scale_factor": (2.0, 2.0, 2.0)}, (1, 2, 3, 3), ShapeError,
     "has 3 values for the 2 spatial dim"),
    ("nn.Upsample", {"scale_factor": (0.1, 0.1)}, (1, 2, 3, 3), ShapeError, "it is empty"),
    ("nn.Upsample", {"scale_factor": (-2.0, 2.0)}, (1, 2, 3, 3), OperatorError,
     "should be positive finite numbers"),
    ("nn.UpsamplingNearest2d", {"mode": "bilinear", "size": (4, 4)}, (1, 2, 3, 3),
     OperatorError, "nearest-neighbour only"),
])
def test_upsample_bad_params(backend, op_type, params, shape, error, message):
    with pytest.raises(error, match=message):
        run_operator(op_type, [np.ones(shape, np.float32)], params=params, backend=backend)


class Resizes(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.up = torch.nn.Upsample(scale_factor=2)
        self.bilinear = torch.nn.UpsamplingBilinear2d(scale_factor=2)

    def forward(self, x):
        return (self.up(x), self.bilinear(x),
                F.interpolate(x, scale_factor=1.7, mode="bilinear"),
                F.interpolate(x, size=(5, 13), mode="bicubic", align_corners=True),
                F.interpolate(x, scale_factor=1.7, mode="nearest-exact"),
                F.interpolate(x, scale_factor=0.6, mode="bilinear", recompute_scale_factor=True),
                F.upsample_nearest(x, scale_factor=3))


@pytest.mark.slow
def test_upsample_pnnx_export(backend, rng, export_model):
    """The parameter spellings of a real TorchScript export (F.upsample, F.interpolate, ...)."""
    x = torch.from_numpy(rng.standard_normal((2, 3, 6, 8)).astype(np.float32))
    module = Resizes().eval()
    graph = kuiper.load(export_model("resizes", module, (x,)), backend=backend)
    assert not graph.fallbacks
    for got, want in zip(graph.forward(x.numpy()), module(x)):
        assert_close(got, want.numpy(), rtol=1e-4)


class OnnxResizes(torch.nn.Module):
    def forward(self, x):
        return (F.interpolate(x, scale_factor=2), F.interpolate(x, size=(9, 11)),
                F.interpolate(x, scale_factor=1.7, mode="bilinear"),
                F.interpolate(x, size=(7, 9), mode="bilinear", align_corners=True))


@pytest.mark.slow
def test_upsample_onnx_route(backend, rng, tmp_path):
    """torch.onnx.export + pnnx: every resize arrives as F.interpolate."""
    pnnx = pytest.importorskip("pnnx")
    pytest.importorskip("onnx")
    x = torch.from_numpy(rng.standard_normal((1, 4, 6, 8)).astype(np.float32))
    module = OnnxResizes().eval()
    onnx_path = tmp_path / "resizes.onnx"
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        torch.onnx.export(module, (x,), str(onnx_path), dynamo=False, opset_version=17)
    cwd = os.getcwd()
    try:
        os.chdir(tmp_path)
        # pnnx then imports the Python file it wrote, which may fail; the .param is written
        # before that, and checked below.
        with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(Exception):
            pnnx.convert(str(onnx_path), [x])
    finally:
        os.chdir(cwd)
    param = tmp_path / "resizes.pnnx.param"
    assert param.exists(), "pnnx did not convert the ONNX model"
    assert "F.interpolate" in param.read_text()
    graph = kuiper.load(param, backend=backend)
    assert not graph.fallbacks
    for got, want in zip(graph.forward(x.numpy()), module(x)):
        assert_close(got, want.numpy(), rtol=1e-4)


@pytest.mark.parametrize("by_rows", [True, False], ids=["row_per_work_item", "value_per_work_item"])
@pytest.mark.parametrize("mode, scale", [("nearest", 2.0), ("nearest", (1.7, 0.6)),
                                         ("nearest-exact", (0.5, 3.0))])
def test_nearest2d_each_opencl_kernel(rng, monkeypatch, by_rows, mode, scale):
    """nearest2d and nearest2d_rows (layers/opencl/upsample.py) forced on whatever OpenCL device
    there is (CPU devices pick the row per work-item for many rows): YOLO's 2x upsample,
    growing and shrinking axes, int64 values (copied bit for bit)."""
    from tests.conftest import opencl_available

    if not opencl_available():
        pytest.skip("no OpenCL device: these are the OpenCL kernels (the CPU twin runs above)")
    monkeypatch.setattr("kuiper.layers.opencl_helpers.strided.ROWS_PER_WORK_ITEM", by_rows)
    x = rng.standard_normal((2, 37, 13, 19)).astype(np.float32)
    params = _params(mode, None, scale_factor=scale)
    (y,) = run_operator("nn.Upsample", [x], params=params, backend="opencl")
    np.testing.assert_array_equal(y, _reference(x, mode, None, scale=scale))
    labels = rng.integers(-2**40, 2**40, (1, 70, 9, 11))
    (y,) = run_operator("nn.Upsample", [labels], params=params, backend="opencl")
    want = _reference(labels.astype(np.float64), mode, None, scale=scale).astype(np.int64)
    np.testing.assert_array_equal(y, want)
