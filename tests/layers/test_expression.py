"""pnnx.Expression against PyTorch on both backends: every function, broadcasting, PyTorch's dtype
promotion (Python scalars, 0-dim tensors, ints, bools), size() arithmetic, lists, and errors."""

import numpy as np
import pytest
import torch

import kuiper
from kuiper.core.errors import ExpressionError, OperatorError, ShapeError
from kuiper.core.ir import RuntimeOperand, RuntimeOperator
from kuiper.core.tensor_spec import TensorSpec
from kuiper.layers.cpu.expression import Expression
from kuiper.layers.opencl_helpers.expression_codegen import BOOL_C, FLOAT_C, INT_C, generate
from kuiper.parser.expression import FUNCTIONS
from kuiper.parser.expression.evaluate import NUMPY
from kuiper.testing import assert_close, run_operator, write_operator_model

UNARY = [n for n, f in FUNCTIONS.items() if f.kind in ("float_unary", "keep_unary")]
BINARY = [n for n, f in FUNCTIONS.items() if f.kind in ("arith", "float_binary")]
TORCH_NAME = {"and": "bitwise_and", "or": "bitwise_or", "xor": "bitwise_xor",
              "lshift": "bitwise_left_shift", "rshift": "bitwise_right_shift"}
# Inputs inside each function's domain (log of a negative is nan on both sides, but tells
# nothing); keep_unary functions get halves so that round() meets its ties.
FLOAT_DOMAIN = {"acos": (-0.9, 0.9), "asin": (-0.9, 0.9), "atanh": (-0.9, 0.9),
                "acosh": (1.1, 3), "log": (0.1, 3), "log10": (0.1, 3), "log1p": (-0.5, 3),
                "sqrt": (0.1, 3), "rsqrt": (0.1, 3), "reciprocal": (0.5, 3)}
INT_DOMAIN = {"acos": (-1, 1), "asin": (-1, 1), "atanh": (0, 0), "acosh": (1, 4),
              "log": (1, 9), "log10": (1, 9), "log1p": (0, 9), "sqrt": (0, 9), "rsqrt": (1, 9),
              "reciprocal": (1, 9)}


def run(expr, inputs, backend):
    (out,) = run_operator("pnnx.Expression", inputs, params={"expr": expr}, backend=backend)
    return out


def check(out, expected: torch.Tensor):
    """Same dtype as PyTorch, then values: exactly for ints, bools, infs and nans."""
    expected = expected.numpy()
    assert out.dtype == expected.dtype, f"dtype {out.dtype}, PyTorch gives {expected.dtype}"
    if expected.dtype.kind in "biu":
        np.testing.assert_array_equal(out, expected)
        return
    finite = np.isfinite(expected)
    np.testing.assert_array_equal(out[~finite], expected[~finite])  # nan == nan here
    assert_close(out[finite], expected[finite])


def t(x):
    return torch.from_numpy(np.asarray(x))


# --- every function -------------------------------------------------------------------------------
@pytest.mark.parametrize("fn", UNARY)
def test_unary_float(backend, rng, fn):
    lo, hi = FLOAT_DOMAIN.get(fn, (-3, 3))
    x = rng.uniform(lo, hi, (2, 13, 5)).astype(np.float32)
    if FUNCTIONS[fn].kind == "keep_unary":
        x = (rng.integers(-9, 9, (2, 13, 5)) / 2).astype(np.float32)
    check(run(f"{fn}(@0)", [x], backend), getattr(torch, fn)(t(x)))


@pytest.mark.parametrize("fn", UNARY)
def test_unary_int(backend, rng, fn):
    """Float functions of an int tensor give float32; the others keep int64."""
    lo, hi = INT_DOMAIN.get(fn, (-5, 5))
    x = rng.integers(lo, hi + 1, (3, 7)).astype(np.int64)
    check(run(f"{fn}(@0)", [x], backend), getattr(torch, fn)(t(x)))


@pytest.mark.parametrize("fn", BINARY)
def test_binary_float_broadcast(backend, rng, fn):
    x = rng.uniform(-3, 3, (2, 1, 5)).astype(np.float32)
    y = rng.uniform(-3, 3, (3, 1)).astype(np.float32)
    if fn == "pow":
        x = np.abs(x)
    check(run(f"{fn}(@0,@1)", [x, y], backend), getattr(torch, fn)(t(x), t(y)))


@pytest.mark.parametrize("fn", [f for f in BINARY if f != "logaddexp"]
                         + ["and", "or", "xor", "lshift", "rshift"])
def test_binary_int_broadcast(backend, rng, fn):
    """Python-style signs for floor_divide/remainder, C-style for fmod, exact int pow."""
    x = rng.integers(-20, 20, (2, 1, 5)).astype(np.int64)
    y = rng.integers(1, 6, (3, 1)) * rng.choice([-1, 1], (3, 1))
    if fn in ("pow", "lshift", "rshift"):
        y = np.abs(y)
    y = y.astype(np.int64)
    check(run(f"{fn}(@0,@1)", [x, y], backend), getattr(torch, TORCH_NAME.get(fn, fn))(t(x),
                                                                                      t(y)))


def test_max_min_propagate_nan(backend):
    x = np.array([np.nan, 1, 2, -np.inf], np.float32)
    y = np.array([0, np.nan, 1, -np.inf], np.float32)
    for fn in ("max", "min", "maximum", "minimum", "logaddexp"):
        check(run(f"{fn}(@0,@1)", [x, y], backend), getattr(torch, fn)(t(x), t(y)))


def test_shift_past_the_width_and_negative_powers(backend):
    x = np.array([1, -8, 3, -1, 2], np.int64)
    y = np.array([70, 70, 2, -3, -1], np.int64)
    check(run("lshift(@0,@1)", [x, y], backend), t(x) << t(y))
    check(run("rshift(@0,@1)", [x, y], backend), t(x) >> t(y))
    check(run("pow(@0,@1)", [x, y], backend), torch.pow(t(x), t(y)))


# --- dtype promotion ------------------------------------------------------------------------------
PROMOTION = [  # expr, input dtype, low, high, PyTorch
    ("mul(@0,0.5)", np.int64, -9, 9, lambda x: x * 0.5),            # int * float -> float32
    ("mul(@0,2)", np.float32, -3, 3, lambda x: x * 2),               # float * int -> float32
    ("floor_divide(@0,3)", np.int64, -9, 9, lambda x: x // 3),       # stays int64
    ("floor_divide(@0,-2.5)", np.int64, -9, 9, lambda x: x // -2.5),
    ("div(@0,2)", np.int64, -9, 9, lambda x: x / 2),                 # true division: float32
    ("div(@0,@0)", np.int32, 1, 9, lambda x: x / x),
    ("sub(1,@0)", np.int32, -9, 9, lambda x: 1 - x),                 # stays int32
    ("pow(2,@0)", np.int64, 0, 9, lambda x: 2 ** x),
    ("pow(@0,2.5)", np.float32, 0, 3, lambda x: x ** 2.5),
    ("pow(@0,0.5)", np.int64, 0, 9, lambda x: x ** 0.5),
    ("add(@0,1000)", np.int8, -9, 9, lambda x: x + 1000),            # wraps in int8
    ("mul(@0,2)", np.bool_, 0, 1, lambda x: x * 2),                  # bool * int -> int64
    ("add(@0,True)", np.bool_, 0, 1, lambda x: x + True),            # bool + bool: or
    ("remainder(@0,-3)", np.int64, -9, 9, lambda x: torch.remainder(x, -3)),
    ("fmod(@0,-3)", np.int64, -9, 9, lambda x: torch.fmod(x, -3)),
    ("remainder(@0,2.5)", np.float32, -9, 9, lambda x: torch.remainder(x, 2.5)),
    ("atan2(@0,1)", np.int64, -9, 9, lambda x: torch.atan2(x, torch.tensor(1))),
    ("maximum(@0,0.5)", np.int64, -3, 3, lambda x: torch.maximum(x, torch.tensor(0.5))),
    ("add(@0,1.000000e-30)", np.float32, -3, 3, lambda x: x + 1e-30),
    ("mul(@0,1.23456792e8)", np.float32, -3, 3, lambda x: x * 1.23456792e8),
    ("mul(@0,-inf)", np.float32, 0.5, 3, lambda x: x * float("-inf")),
    ("add(@0,nan.0)", np.float32, -3, 3, lambda x: x + float("nan")),
    ("xor(@0,5)", np.int16, -9, 9, lambda x: x ^ 5),
    ("mul(add(@0,1),sub(@0,0.25))", np.uint8, 0, 9, lambda x: (x + 1) * (x - 0.25)),
    ("square(@0)", np.bool_, 0, 1, torch.square),                    # bool -> int64
    ("sign(@0)", np.bool_, 0, 1, torch.sign),
]


@pytest.mark.parametrize("expr, dtype, low, high, reference", PROMOTION)
def test_python_scalar_promotion(backend, rng, expr, dtype, low, high, reference):
    if np.dtype(dtype).kind == "f":
        x = rng.uniform(low, high, (4, 3)).astype(dtype)
    else:
        x = rng.integers(low, high + 1, (4, 3)).astype(dtype)
    check(run(expr, [x], backend), reference(t(x)))


@pytest.mark.parametrize("dtypes", [(np.int32, np.float64), (np.float32, np.float64),
                                    (np.int32, np.int64), (np.bool_, np.int64),
                                    (np.int64, np.float32)])
def test_zero_dim_tensors_rank_below_dimensioned(backend, rng, dtypes):
    """A 0-dim tensor only promotes a tensor with dims when it is of a higher kind."""
    x = rng.integers(0, 5, (2, 3)).astype(dtypes[0])
    y = np.array(3, dtypes[1])
    check(run("add(mul(@0,@1),@1)", [x, y], backend), t(x) * t(y) + t(y))


def test_zero_dim_result(backend):
    x, y = np.array(2.5, np.float32), np.array(4, np.int64)
    out = run("mul(@0,@1)", [x, y], backend)
    assert out.shape == ()
    check(out, t(x) * t(y))


def test_bool_tensors(backend, rng):
    a = rng.integers(0, 2, (3, 1, 4)).astype(np.bool_)
    b = rng.integers(0, 2, (5, 1)).astype(np.bool_)
    for expr, ref in [("and(@0,@1)", t(a) & t(b)), ("or(@0,@1)", t(a) | t(b)),
                      ("xor(@0,@1)", t(a) ^ t(b)), ("add(@0,@1)", t(a) + t(b)),
                      ("mul(@0,@1)", t(a) * t(b)), ("maximum(@0,@1)", torch.maximum(t(a), t(b))),
                      ("add(@0,mul(@1,3))", t(a) + t(b) * 3), ("sqrt(@0)", torch.sqrt(t(a)))]:
        check(run(expr, [a, b], backend), ref)


def test_casts(backend, rng):
    x = (rng.integers(-9, 9, (3, 5)) / 4).astype(np.float32)
    x[0, :2] = 0
    check(run("torch.long(@0)", [x], backend), t(x).long())
    check(run("int(@0)", [x], backend), t(x).long())
    check(run("torch.bool(@0)", [x], backend), t(x).bool())
    check(run("torch.float(torch.bool(@0))", [x], backend), t(x).bool().float())
    i = rng.integers(-9, 9, (3, 5)).astype(np.int64)
    check(run("div(torch.float(@0),2)", [i], backend), t(i).float() / 2)
    check(run("floor_divide(torch.long(mul(@0,1.5)),2)", [i], backend),
          (t(i) * 1.5).long() // 2)


# --- pnnx's malformed parentheses ---------------------------------------------------------------
@pytest.mark.parametrize("expr, reference", [
    ("add(log1p,add(expm1,add(log10(add(@0,1)),@0))),@0,@0",
     lambda x: torch.log1p(torch.expm1(torch.log10(x + 1) + x) + x) + x),
    ("add(add(add(@0,log10(add(@0,1))),expm1),@0),log1p,@0",
     lambda x: x + torch.log10(x + 1) + torch.expm1(x) + torch.log1p(x)),
])
def test_malformed_pnnx_expressions(backend, rng, expr, reference):
    x = rng.uniform(0.1, 1, (2, 3, 7)).astype(np.float32)
    check(run(expr, [x], backend), reference(t(x)))


class Mix(torch.nn.Module):
    """Elementwise arithmetic that pnnx gathers into pnnx.Expression operators."""

    def forward(self, x, y):
        a = torch.log1p(torch.expm1(torch.log10(x + 1) + x) + x) + x
        b = torch.remainder(x, 2.5) + torch.fmod(y, 1.5) + torch.maximum(x, y) + torch.round(x * 3)
        return a * torch.rsqrt(torch.abs(y) + 1) - (x * 2 + y) // 3 + b


def test_pnnx_export_end_to_end(backend, rng, export_model):
    x = rng.uniform(0.1, 2, (2, 1, 5)).astype(np.float32)
    y = rng.uniform(-2, 2, (3, 1)).astype(np.float32)
    path = export_model("expression_mix", Mix(), (t(x), t(y)))
    graph = kuiper.load(path, backend=backend)
    assert {op.type for op in graph.operators} == {"pnnx.Input", "pnnx.Output",
                                                   "pnnx.Expression"}
    check(graph(x, y), Mix()(t(x), t(y)))


# --- size(), scalars and lists --------------------------------------------------------------------
@pytest.mark.parametrize("expr, expected", [
    ("size(@0,1)", 13), ("size(@0,-1)", 5),
    ("mul(size(@0,0),size(@0,-1))", 10), ("div(size(@0,2),2)", 2.5),
    ("floor_divide(size(@0,2),2)", 2), ("remainder(neg(size(@0,2)),3)", 1),
    ("int(mul(size(@0,2),0.5))", 2), ("sqrt(size(@0,3))", 5 ** 0.5),
    ("pow(size(@0,0),3)", 8), ("torch.float(size(@0,0))", 2.0),
])
def test_size_arithmetic_gives_python_scalars(backend, expr, expected):
    x = np.zeros((2, 13, 5, 5), np.float32)
    out = run(expr, [x], backend)
    # A Python number inside the graph, as PyTorch's size arithmetic was; as a graph output,
    # an array of the port's dtype on both backends (issue 31: the CPU returned the number)
    assert isinstance(out, np.ndarray) and out.shape == ()
    assert out.dtype == (np.int64 if isinstance(expected, int) else np.float32)
    assert out.item() == pytest.approx(expected, rel=1e-6)


@pytest.mark.parametrize("expr, expected", [
    ("[size(@0,0),-1,3]", [2, -1, 3]),
    ("size(@0)", [2, 6, 4]),
    ("[size(@0,1),mul(size(@0,0),size(@0,2))]", [6, 8]),
    ("[floor_divide(size(@0,1),2),2,size(@0,2)]", [3, 2, 4]),
])
def test_list_outputs(backend, expr, expected):
    out = run(expr, [np.zeros((2, 6, 4), np.float32)], backend)
    assert isinstance(out, np.ndarray) and out.dtype == np.int64  # the port's, as declared
    assert out.tolist() == expected


def test_a_list_expression_as_a_graph_output_is_an_array_of_its_port(backend, tmp_path):
    """`expr=[2.0,@0]` as a graph output came back on the CPU as a Python list while the port
    declared float32 of shape (2,) (issue 31); with a tensor item that is not a number it is
    no tensor at all: an error on both backends."""
    model = tmp_path / "m.pnnx.param"
    for shape, x in (("()", np.float32(3)), ("(1)", np.ones(1, np.float32))):
        model.write_text(f"7767517\n3 2\npnnx.Input in 0 1 0 #0={shape}f32\npnnx.Expression e 1 "
                         f"1 0 1 expr=[2.0,@0] #0={shape}f32 #1=(2)f32\npnnx.Output out 1 0 1\n")
        if shape == "()":
            graph = kuiper.load(model, backend=backend)
            y = graph(x)
            assert isinstance(y, np.ndarray) and y.dtype == graph.outputs[0].dtype == np.float32
            assert y.tolist() == [2.0, 3.0]
            continue
        with pytest.raises(kuiper.OperatorError, match="operator 'e'.*list"):
            kuiper.load(model, backend=backend)(x)


def test_list_with_run_time_items(backend):
    """`[size(@0,0),@1]` with @1 computed at run time: the list is only known then."""
    out = run("[size(@0,0),mul(@1,2)]", [np.zeros((3, 2), np.float32), np.array(5, np.int64)],
              backend)
    assert np.asarray(out, dtype=np.int64).tolist() == [3, 10]


def test_none_and_bare_string_results(backend):
    x = np.ones(3, np.float32)
    assert run("None", [x], backend) is None
    assert run("bilinear", [x], backend) == "bilinear"


def make_layer(expr, n_inputs):
    op = RuntimeOperator("e", "pnnx.Expression", {"expr": expr})
    op.inputs = [RuntimeOperand(str(i)) for i in range(n_inputs)]
    return Expression.from_operator(op)


def test_infer_folds_what_is_known_at_build_time():
    x = TensorSpec.of((2, 6, 4))
    (spec,) = make_layer("[size(@0,0),-1,3]", 1).infer([x])
    assert spec.value == [2, -1, 3] and spec.shape == (3,)
    (spec,) = make_layer("mul(@0,2)", 1).infer([TensorSpec.of((2, 6, 4), np.int64)])
    assert spec.value is None and spec.shape == (2, 6, 4) and spec.dtype == np.int64
    (spec,) = make_layer("add(@0,mul(@1,0.5))", 2).infer(
        [x, TensorSpec.of_value(np.arange(4, dtype=np.int64))])
    assert spec.value is None and spec.shape == (2, 6, 4) and spec.dtype == np.float32
    constant = TensorSpec.of_value(np.arange(4, dtype=np.int64))
    (spec,) = make_layer("mul(@0,size(@1,2))", 2).infer([constant, x])
    np.testing.assert_array_equal(spec.value, np.arange(4) * 4)


def test_opencl_folds_size_expressions_and_caches_kernels(tmp_path):
    from tests.conftest import opencl_available
    if not opencl_available():
        pytest.skip("no OpenCL device: this test checks the OpenCL layer's folding and cache")

    x = np.ones((2, 3), np.float32)
    path = write_operator_model(tmp_path, "pnnx.Expression", [x], {"expr": "[size(@0,0),-1]"})
    graph = kuiper.load(path, backend="opencl")
    assert graph.executor.folded == {"op0"}

    path = write_operator_model(tmp_path, "pnnx.Expression", [x], {"expr": "mul(@0,7)"})
    first = kuiper.load(path, backend="opencl")
    programs = first.executor.runtime._programs  # the runtime's cache, files and sources
    cached = len(programs)
    second = kuiper.load(path, backend="opencl", runtime=first.executor.runtime)
    assert len(programs) == cached, "the second graph reuses the built expression program"
    layer = second.operators[1].layer
    assert ("source", layer.source, ()) in programs
    assert '#include "expression.h"' in layer.source and "(x0 * 7.0f)" in layer.source
    np.testing.assert_array_equal(second(x), x * 7)


def test_generated_kernel_bakes_broadcast_strides():
    specs = [TensorSpec.of((2, 1, 5)), TensorSpec.of((3, 1))]
    layer = make_layer("add(@0,mul(@1,2))", 2)
    (out,) = layer.infer(specs)
    source = generate(layer.expr, layer.rpn, specs, out).source
    assert "const float x0 = in0[c0 * 5 + c2];" in source  # the size-1 dim has stride 0
    assert "const float x1 = in1[c1];" in source
    assert "if (i >= 30)" in source


def test_every_function_has_every_backend():
    assert set(FUNCTIONS) - {"size"} <= set(NUMPY)
    for name, f in FUNCTIONS.items():
        if f.kind in ("float_unary", "float_binary"):
            assert name in FLOAT_C, name
        elif f.kind in ("keep_unary", "arith"):
            assert name in FLOAT_C and name in INT_C, name
        elif f.kind in ("bitwise", "shift"):
            assert name in INT_C and (f.kind == "shift" or name in BOOL_C), name


# --- errors ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("expr, message", [
    ("add(@0,@2)", "@2 is beyond the operator's 2 input(s)"),
    ("add(@0)", "expected ',' after argument 1 of add"),
    ("sqr(@0)", "unknown function 'sqr'"),
    ("add(@0,@1),@1", "unexpected ','"),
    # fuzz seed 4417: a name as a list item (case 10531), an input number of 5,000 digits
    # (case 15189: int() refuses to read it)
    ("[inf,abc,@1]", "item 2 of the list is the name 'abc'"),
    ("add(@" + "1" * 5000 + ",@0)", "is too large"),
    ("add(@\u00b2,@0)", "'@\u00b2' is not an input"),   # a superscript digit: not a number
])
def test_bad_expression_fails_at_load(backend, expr, message):
    x = np.ones((2, 3), np.float32)
    with pytest.raises(ExpressionError) as info:
        run(expr, [x, x], backend)
    assert message in str(info.value) and "operator 'op0' (pnnx.Expression" in str(info.value)


def test_an_index_list_with_run_time_items_is_tensor_index_s_only(backend):
    # fuzz seed 90210, case 17396: `[None,mul(...)]` reached the dtype rules with None in it
    x = np.ones((2, 3), np.float32)
    with pytest.raises(kuiper.OperatorError, match="only Tensor.index reads such an index list"):
        run("[None,mul(size(@0,0),@0)]", [x], backend)


def test_type_errors_fail_at_build(backend):
    x = np.ones((2, 3), np.float32)
    with pytest.raises(ExpressionError, match="and needs integer or bool operands, got float32"):
        run("and(@0,@1)", [x, x], backend)
    with pytest.raises(ExpressionError, match="sub is not defined for bool tensors"):
        run("sub(@0,@1)", [x > 0, x > 0], backend)
    with pytest.raises(ExpressionError, match="dim 2 is out of range for a 2-D tensor"):
        run("size(@0,2)", [x], backend)


def test_shapes_that_do_not_broadcast(backend):
    with pytest.raises(ShapeError, match=r"add cannot broadcast shapes \(2, 3\) and \(4,\)"):
        run("add(@0,@1)", [np.ones((2, 3), np.float32), np.ones(4, np.float32)], backend)


def test_missing_expr_parameter(backend):
    with pytest.raises(OperatorError, match="parameter 'expr' is missing"):
        run_operator("pnnx.Expression", [np.ones(3, np.float32)], backend=backend)


@pytest.mark.parametrize("expr, reference", [
    ("pow(@0,2)", lambda x: torch.pow(x, 2)),
    ("pow(@0,2.0)", lambda x: torch.pow(x, 2.0)),
    ("mul(pow(mul(@0,2),2),@1)", lambda x: torch.pow(x * 2, 2) * 3.5),   # YOLO's anchor maths
    ("pow(@0,3)", lambda x: torch.pow(x, 3)),                            # still pow()
])
def test_square_powers(backend, rng, expr, reference):
    """x ** 2 is generated as a product (expression_codegen.py: PoCL's pow() is a library call
    per value) and agrees with PyTorch on both backends, inf and nan included."""
    x = rng.uniform(-1e19, 1e19, (3, 7)).astype(np.float32)
    x[0, :3] = [np.inf, -np.inf, np.nan]
    inputs = [x] + ([np.float32(3.5).reshape(1, 1)] if "@1" in expr else [])
    check(run(expr, inputs, backend), reference(t(x)))
    specs = [TensorSpec.of(a.shape) for a in inputs]
    layer = make_layer(expr, len(inputs))
    (out,) = layer.infer(specs)
    source = generate(layer.expr, layer.rpn, specs, out).source
    code = "\n".join(line for line in source.splitlines() if not line.startswith("//"))
    assert ("pow(" in code) == (expr == "pow(@0,3)"), source


def test_an_expression_of_an_empty_tensor_is_empty(backend):
    # no value to compute: on OpenCL the operator runs no step at all
    x = np.zeros((0, 3), np.float32)
    out = run("add(@0,1)", [x], backend)
    assert out.shape == (0, 3) and out.dtype == np.float32
