"""Reductions (sum, mean, prod, amax/amin, max/min, argmax/argmin, logsumexp, var/std, norm)
against torch on both backends."""

import numpy as np
import pytest
import torch

import kuiper
from kuiper import OperatorError
from kuiper.testing import assert_close, run_operator

T = torch.from_numpy
SHAPE = (2, 13, 3, 5)   # odd sizes; reducing dim 1 with 13 elements leaves a ragged last pass


def check(actual, expected):
    expected = expected.numpy() if isinstance(expected, torch.Tensor) else np.asarray(expected)
    assert actual.dtype == expected.dtype, f"dtype {actual.dtype} != {expected.dtype}"
    assert_close(actual, expected)


DIMS = [[1], [-1], [0, 2], [1, 3], [0, 1, 2, 3], None]


# torch.logsumexp needs dims (a missing dim is tested as an error below).
@pytest.mark.parametrize("op, dims", [(op, dims) for op in ["sum", "mean", "amax", "amin",
                                                            "logsumexp"]
                                      for dims in DIMS if op != "logsumexp" or dims is not None])
@pytest.mark.parametrize("keepdim", [False, True])
def test_multi_dim_reductions(backend, rng, op, dims, keepdim):
    x = rng.standard_normal(SHAPE).astype(np.float32)
    (y,) = run_operator(f"torch.{op}", [x], params={"dim": dims, "keepdim": keepdim},
                        backend=backend)
    fn = getattr(torch, op)
    expected = fn(T(x), dim=tuple(dims), keepdim=keepdim) if dims is not None else (
        fn(T(x), dim=tuple(range(x.ndim)), keepdim=keepdim) if keepdim else fn(T(x)))
    check(y, expected)


@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("keepdim", [False, True])
def test_prod(backend, rng, dim, keepdim):
    x = (rng.uniform(0.5, 1.5, SHAPE)).astype(np.float32)
    (y,) = run_operator("torch.prod", [x], params={"dim": dim, "keepdim": keepdim},
                        backend=backend)
    check(y, torch.prod(T(x), dim=dim, keepdim=keepdim))


# pnnx's ONNX route writes ReduceProd over several dims as torch.prod with a list
# (onnx/test_onnx_reduce_ops: `torch.prod dim=(0,1,2) keepdim=True`).
@pytest.mark.parametrize("dim", [[0, 1, 2], [1, 3], [-1, 0], [0, 1, 2, 3], None])
@pytest.mark.parametrize("keepdim", [False, True])
def test_prod_over_several_dims(backend, rng, dim, keepdim):
    x = (rng.uniform(0.8, 1.2, SHAPE)).astype(np.float32)
    (y,) = run_operator("torch.prod", [x], params={"dim": dim, "keepdim": keepdim},
                        backend=backend)
    expected = T(x.astype(np.float64))
    for d in sorted((d % x.ndim for d in (dim if dim is not None else range(x.ndim))),
                    reverse=True):
        expected = torch.prod(expected, dim=d, keepdim=keepdim)
    check(y, expected.float())


@pytest.mark.parametrize("op", ["var", "std"])
@pytest.mark.parametrize("dims", [[1], [1, 2], None])
@pytest.mark.parametrize("spelling, correction", [
    ({"unbiased": True}, 1), ({"unbiased": False}, 0), ({"unbiased": 0}, 0),
    ({"unbiased": 2}, 2), ({"correction": 0}, 0), ({}, 1)])
def test_var_std(backend, rng, op, dims, spelling, correction):
    # pnnx writes torch.var(correction=k) as `unbiased=k`, and std's as `correction=k`.
    x = rng.standard_normal(SHAPE).astype(np.float32) + 3.0
    (y,) = run_operator(f"torch.{op}", [x], params={"dim": dims, "keepdim": True, **spelling},
                        backend=backend)
    dim = tuple(dims) if dims is not None else None
    check(y, getattr(torch, op)(T(x), dim=dim, correction=correction, keepdim=True))


@pytest.mark.parametrize("p", [2, 2.0, "fro", 1, 3, 0.5, "inf", "-inf", 0])
@pytest.mark.parametrize("dims", [[1], [1, 2], None])
def test_norm(backend, rng, p, dims):
    x = rng.standard_normal(SHAPE).astype(np.float32)
    x[0, 0, 0, :2] = 0.0  # zeros matter for p = 0
    (y,) = run_operator("torch.norm", [x], params={"dim": dims, "keepdim": False, "p": p},
                        backend=backend)
    tp = p if p == "fro" else float(p)
    if p == "fro" and dims is not None and len(dims) == 1:
        tp = 2.0  # torch.norm only accepts 'fro' over two dims; pnnx writes it as p=2 anyway
    expected = torch.norm(T(x), p=tp, dim=tuple(dims) if dims else None)
    check(y, expected)


@pytest.mark.parametrize("op", ["max", "min"])
@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("keepdim", [False, True])
def test_max_min_with_dim_values_and_indices(backend, rng, op, dim, keepdim):
    x = rng.standard_normal(SHAPE).astype(np.float32)
    values, indices = run_operator(f"torch.{op}", [x], params={"dim": dim, "keepdim": keepdim},
                                   n_outputs=2, backend=backend)
    expected = getattr(torch, op)(T(x), dim=dim, keepdim=keepdim)
    check(values, expected.values)
    check(indices, expected.indices)


def test_max_with_dim_single_output(backend, rng):
    # pnnx keeps one output when only the values are used; its declared dtype says which.
    x = rng.standard_normal(SHAPE).astype(np.float32)
    expected = torch.max(T(x), dim=2)
    (values,) = run_operator("torch.max", [x], params={"dim": 2}, backend=backend,
                             output_specs=[((2, 13, 5), np.float32)])
    check(values, expected.values)
    (indices,) = run_operator("torch.max", [x], params={"dim": 2}, backend=backend,
                              output_specs=[((2, 13, 5), np.int64)])
    check(indices, expected.indices)


@pytest.mark.parametrize("op", ["max", "min"])
def test_max_min_of_everything(backend, rng, op):
    x = rng.standard_normal(SHAPE).astype(np.float32)
    (y,) = run_operator(f"torch.{op}", [x], backend=backend)
    check(y, getattr(torch, op)(T(x)))


# ONNX ReduceMax(x) / ReduceMin(x) (no axes, keepdims=1) come out of pnnx's ONNX route as
# `torch.max` / `torch.min` with no parameters but a declared (1,1,1) output
# (onnx/test_onnx_reduce_ops): the declaration decides; a declared 0-D output stays 0-D.
@pytest.mark.parametrize("op", ["max", "min"])
@pytest.mark.parametrize("declared", [(1, 1, 1, 1), ()])
def test_max_min_of_everything_follows_the_declared_shape(backend, rng, op, declared):
    x = rng.standard_normal(SHAPE).astype(np.float32)
    (y,) = run_operator(f"torch.{op}", [x], output_specs=[(declared, np.float32)],
                        backend=backend)
    want = getattr(torch, f"a{op}")(T(x), dim=(0, 1, 2, 3), keepdim=bool(declared))
    assert y.shape == declared
    check(y, want)


@pytest.mark.parametrize("op", ["argmax", "argmin"])
@pytest.mark.parametrize("dim, keepdim", [(1, False), (-1, True), (None, False), (None, True)])
def test_argmax_argmin(backend, rng, op, dim, keepdim):
    x = rng.standard_normal(SHAPE).astype(np.float32)
    (y,) = run_operator(f"torch.{op}", [x], params={"dim": dim, "keepdim": keepdim},
                        backend=backend)
    check(y, getattr(torch, op)(T(x), dim=dim, keepdim=keepdim))


def test_argmax_ties_and_nan_follow_torch(backend):
    x = np.array([[1.0, 3.0, 3.0, 0.0], [2.0, np.nan, 5.0, np.nan], [4.0, 4.0, 4.0, 4.0]],
                 dtype=np.float32)
    (y,) = run_operator("torch.argmax", [x], params={"dim": 1}, backend=backend)
    check(y, torch.argmax(T(x), dim=1))   # first maximum; NaN is the maximum
    (y,) = run_operator("torch.amax", [x], params={"dim": [1]}, backend=backend)
    check(y, torch.amax(T(x), dim=1))     # NaN propagates


def test_long_reduction_uses_many_passes(backend, rng):
    x = rng.standard_normal((3, 1031)).astype(np.float32)
    (y,) = run_operator("torch.sum", [x], params={"dim": [-1]}, backend=backend)
    check(y, torch.sum(T(x), dim=-1))
    (y,) = run_operator("torch.var", [x], params={"dim": [1]}, backend=backend)
    check(y, torch.var(T(x), dim=1))


@pytest.mark.parametrize("dtype", [np.bool_, np.int32, np.int64])
def test_integer_inputs(backend, rng, dtype):
    x = rng.integers(-5, 6, SHAPE).astype(dtype)
    cases = [("sum", {"dim": [1]}), ("prod", {"dim": 3}), ("amax", {"dim": [0, 2]}),
             ("sum", {})]
    if dtype != np.bool_:   # torch has no argmin of bool
        cases.append(("argmin", {"dim": 1}))
    for op, params in cases:
        (y,) = run_operator(f"torch.{op}", [x], params=params, backend=backend)
        fn = getattr(torch, op)
        dim = params.get("dim")
        expected = fn(T(x)) if dim is None else fn(T(x), dim=tuple(dim) if isinstance(
            dim, list) else dim)
        check(y, expected)


def test_reductions_from_a_pnnx_export(backend, rng, export_model):
    class Stats(torch.nn.Module):
        def forward(self, x):
            return (x.mean(1), x.sum(dim=(2, 3)), x.max(), x.std(1, keepdim=True),
                    x.var(2, correction=2), torch.var(x, dim=1, keepdim=True, correction=0),
                    torch.norm(x, dim=(1, 2)), torch.amin(x, dim=-1, keepdim=True),
                    torch.max(x, dim=1)[0], torch.argmax(x, keepdim=True))

    x = rng.standard_normal((2, 3, 4, 5)).astype(np.float32)
    module = Stats()
    path = export_model("reduce_stats", module, [T(x)])
    outputs = kuiper.load(path, backend=backend).forward(x)
    expected = module(T(x))
    assert len(outputs) == len(expected)
    for actual, ref in zip(outputs, expected):
        check(actual, ref)


# ONNX ReduceMax / ReduceMin as pnnx leaves them (onnx/test_F_adaptive_max_pool*d with the
# dynamo exporter writes `ReduceMax axes=(-2,-1) keepdims=1`), against torch.amax / amin.
ONNX_AXES = [("(-2,-1)", [-2, -1]), ("(-3,-2,-1)", [-3, -2, -1]), ("(1)", [1]), ("0", [0]),
             ("(0,2)", [0, 2]), ("(0,1,2,3)", [0, 1, 2, 3])]


@pytest.mark.parametrize("op_type, fn", [("ReduceMax", torch.amax), ("ReduceMin", torch.amin)])
@pytest.mark.parametrize("axes, dims", ONNX_AXES)
@pytest.mark.parametrize("keepdims", [None, 1, 0])
def test_onnx_reduce_max_min(backend, rng, op_type, fn, axes, dims, keepdims):
    x = rng.standard_normal(SHAPE).astype(np.float32)
    params = {"axes": axes} if keepdims is None else {"axes": axes, "keepdims": keepdims}
    (y,) = run_operator(op_type, [x], params=params, backend=backend)
    # keepdims defaults to 1 in ONNX
    check(y, fn(T(x), dim=tuple(dims), keepdim=keepdims in (None, 1)))


@pytest.mark.parametrize("op_type, fn", [("ReduceMax", torch.amax), ("ReduceMin", torch.amin)])
@pytest.mark.parametrize("params", [{}, {"axes": "()"}, {"noop_with_empty_axes": 0}])
@pytest.mark.parametrize("keepdims", [1, 0])
def test_onnx_reduce_without_axes_reduces_everything(backend, rng, op_type, fn, params,
                                                     keepdims):
    x = rng.standard_normal(SHAPE).astype(np.float32)
    (y,) = run_operator(op_type, [x], params={**params, "keepdims": keepdims}, backend=backend)
    check(y, fn(T(x), dim=(0, 1, 2, 3), keepdim=bool(keepdims)))


@pytest.mark.parametrize("params", [{"noop_with_empty_axes": 1},
                                    {"axes": "()", "noop_with_empty_axes": 1, "keepdims": 0}])
def test_onnx_reduce_noop_with_empty_axes(backend, rng, params):
    x = rng.standard_normal(SHAPE).astype(np.float32)
    (y,) = run_operator("ReduceMax", [x], params=params, backend=backend)
    check(y, x)


@pytest.mark.parametrize("op_type, fn", [("ReduceMax", torch.amax), ("ReduceMin", torch.amin)])
@pytest.mark.parametrize("dtype", [np.int64, np.int32])
def test_onnx_reduce_integers_keep_their_dtype(backend, rng, op_type, fn, dtype):
    x = rng.integers(-100, 100, SHAPE).astype(dtype)
    (y,) = run_operator(op_type, [x], params={"axes": "(1,3)", "keepdims": 0}, backend=backend)
    check(y, fn(T(x), dim=(1, 3)))


def test_onnx_reduce_axes_as_a_constant_input(backend, rng):
    # opset 18 moved the axes from an attribute to an input
    x = rng.standard_normal(SHAPE).astype(np.float32)
    axes = np.array([-1, 1], np.int64)
    (y,) = run_operator("ReduceMax", [x, axes], params={"keepdims": 1}, constants=(1,),
                        backend=backend)
    check(y, torch.amax(T(x), dim=(-1, 1), keepdim=True))


def test_onnx_reduce_bad_axes_raise(rng):
    x = rng.standard_normal(SHAPE).astype(np.float32)
    with pytest.raises(OperatorError, match="out of range"):
        run_operator("ReduceMax", [x], params={"axes": "(4)"})
    with pytest.raises(OperatorError, match="should be a constant"):
        run_operator("ReduceMax", [x, np.array([1], np.int64)])


@pytest.mark.parametrize("op_type, params, message", [
    ("torch.max", {"dim": [1, 2]}, "single dim"),
    ("torch.sum", {"dim": [7]}, "out of range"),
    ("torch.sum", {"dim": [1, -3]}, "same axis twice"),
    ("torch.norm", {"dim": [1], "p": "nuc"}, "nuclear"),
    ("torch.logsumexp", {}, "needs the dims"),
    ("torch.var", {"dim": [1], "unbiased": "maybe"}, "unbiased"),
    ("torch.sum", {"dim": [1], "dtype": "torch.long"}, "dtype"),
])
def test_bad_params_raise(rng, op_type, params, message):
    x = rng.standard_normal(SHAPE).astype(np.float32)
    with pytest.raises(OperatorError, match=message):
        run_operator(op_type, [x], params=params)


def test_mean_of_integers_raises():
    with pytest.raises(OperatorError, match="floating-point"):
        run_operator("torch.mean", [np.ones((2, 3), np.int64)], params={"dim": [1]})


def max_of_expression(tmp_path, expr: str, backend: str):
    """A model of torch.max over `pnnx.Expression expr=...` of a (2, 3) input, loaded."""
    path = tmp_path / "model.pnnx.param"
    path.write_text("7767517\n4 3\npnnx.Input in 0 1 0 #0=(2,3)f32\n"
                    f"pnnx.Expression e 1 1 0 1 expr={expr}\n"
                    "torch.max m 1 1 1 2 $input=1 #2=()f32\npnnx.Output out 1 0 2\n")
    return kuiper.load(path, backend=backend)


def test_reduction_of_an_expression_that_is_a_number(tmp_path, backend):
    """A pnnx.Expression without tensor operands evaluates to a plain Python number; torch.max
    over it (found by `kuiper fuzz`, seed 20261128) called float.max, an AttributeError."""
    graph = max_of_expression(tmp_path, "atan(asinh(1e308))", backend)
    (y,) = graph.forward(np.zeros((2, 3), np.float32))
    assert y.shape == () and np.isclose(y, np.arctan(np.arcsinh(1e308)), rtol=1e-6)


@pytest.mark.parametrize("expr, error", [
    # an expression's bare word, which it keeps as text (for a mode like "bilinear"); seed 424242
    ("abc", "torch.max needs a tensor of numbers"),
    # a list of whole tensors (pnnx writes those for index_put's indices); seed 777123
    ("[@0,1]", "list of tensors"),   # (on OpenCL the expression itself refuses it)
])
def test_reduction_of_what_is_not_a_tensor_is_refused(tmp_path, backend, expr, error):
    """Found by `kuiper fuzz`: both reached the reduction as a bare NumPy error."""
    with pytest.raises(OperatorError, match=error):
        max_of_expression(tmp_path, expr, backend).forward(np.zeros((2, 3), np.float32))
