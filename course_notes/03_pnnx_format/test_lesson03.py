"""Lesson 3: pnnx's value rules (parser/values.py), on values from real exports."""

import pytest

from kuiper.course.lessons import implementation

REFERENCE = {
    "parse_value": "kuiper.parser.values:parse_value",
    "parse_dtype_suffix": "kuiper.parser.values:parse_dtype_suffix",
}
ex = implementation(__file__, REFERENCE)

VALUES = [
    ("None", None), ("()", None), ("[]", None),
    ("True", True), ("False", False),
    ("3", 3), ("-1", -1), ("0", 0), ("2147483647", 2147483647),
    ("1.0", 1.0), ("0.353553385", 0.353553385), ("1e-5", 1e-5), ("1.000000e-05", 1e-5),
    ("-2.5", -2.5),
    ("(1,2)", [1, 2]), ("(3,3)", [3, 3]), ("(-1)", [-1]), ("[3]", [3]), ("(1,-2,3)", [1, -2, 3]),
    ("(1.5,2.5)", [1.5, 2.5]), ("(0.5,2)", [0.5, 2]),
    ("torch.float", "torch.float"), ("reflect", "reflect"), ("nearest-exact", "nearest-exact"),
    ("inf", "inf"), ("-inf", "-inf"), ("nan", "nan"), ("1x2", "1x2"),
    ("(a,b)", ["a", "b"]), ("ijkl,ijkl->ij", "ijkl,ijkl->ij"),
]


@pytest.mark.parametrize("text, expected", VALUES)
def test_parse_value(text, expected):
    got = ex.parse_value(text)
    assert got == expected and type(got) is type(expected), (
        f"parse_value({text!r}) = {got!r} ({type(got).__name__}), expected {expected!r} "
        f"({type(expected).__name__})")
    if isinstance(expected, list):
        kinds = [type(v).__name__ for v in got]
        assert kinds == [type(v).__name__ for v in expected], (
            f"parse_value({text!r}) element types are {kinds}")


SHAPES = [
    ("(1,3,224,224)f32", ([1, 3, 224, 224], "f32")),
    ("(1,3,?,?)f32", ([1, 3, None, None], "f32")),
    ("(8)f32", ([8], "f32")),
    ("(2,5)i64", ([2, 5], "i64")),
    ("(1,1,8,8)bool", ([1, 1, 8, 8], "bool")),
    ("(16,8,3,3)f16", ([16, 8, 3, 3], "f16")),
]


@pytest.mark.parametrize("text, expected", SHAPES)
def test_parse_dtype_suffix(text, expected):
    dims, dtype = ex.parse_dtype_suffix(text)
    assert (list(dims), dtype) == expected, f"parse_dtype_suffix({text!r}) = {(dims, dtype)}"


@pytest.mark.parametrize("text", ["1,3)f32", "(1,3f32", "(1,3)f99", "(1,x)f32", "(1,3)"])
def test_parse_dtype_suffix_refuses_malformed_tokens(text):
    with pytest.raises(ValueError):
        ex.parse_dtype_suffix(text)


def test_every_value_of_the_demo_model_decodes():
    """Each `key=value` of a real export decodes to what the framework's reader made of it."""
    from kuiper.demo import DIGITS_PARAM
    from kuiper.parser.param import read_param

    model = read_param(DIGITS_PARAM)
    lines = DIGITS_PARAM.read_text().splitlines()
    conv = next(op for op in model.operators if op.type == "nn.Conv2d")
    tokens = dict(t.split("=", 1) for t in lines[conv.line - 1].split()
                  if "=" in t and t[0] not in "@#$")
    assert tokens, "expected parameters on the first convolution's line"
    for key, text in tokens.items():
        assert ex.parse_value(text) == conv.params[key], f"{key}={text}"
    assert ex.parse_value(tokens["kernel_size"]) == [3, 3]
    assert ex.parse_value(tokens["bias"]) is True
