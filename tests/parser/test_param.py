"""The `.pnnx.param` reader on hand-written files: the whole grammar of parser/PNNX_FORMAT.md,
then every way a file can be broken. A broken file must give a `ModelFormatError` whose message
names the file, the line and what was expected -- never a bare IndexError/KeyError from deep
inside.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import kuiper
from kuiper import testing
from kuiper.core.errors import ModelFormatError
from kuiper.parser.param import read_param
from kuiper.parser.values import DTYPES, as_float, parse_dtype_suffix, parse_value

MAGIC = "7767517"


def write_param(tmp_path, lines: list[str], counts: str | None = None) -> str:
    """Magic + counts + operator lines (kuiper.testing.write_param); counts default to
    '<len(lines)> 0', which the parser does not hold the file to."""
    return testing.write_param(tmp_path, lines,
                               counts=counts if counts is not None else f"{len(lines)} 0")


def parse_lines(tmp_path, lines: list[str], counts: str | None = None):
    return read_param(write_param(tmp_path, lines, counts))


# --- values ---------------------------------------------------------------------------------

@pytest.mark.parametrize("text, expected", [
    ("None", None), ("()", None), ("[]", None),
    ("True", True), ("False", False),
    ("1", 1), ("0", 0), ("-3", -3), ("2147483647", 2147483647),
    ("1.000000e-05", 1e-5), ("1e5", 1e5), ("0.353553385", 0.353553385),
    ("-1.500000e+00", -1.5), ("2.0", 2.0),
    ("(-1)", [-1]), ("(3)", [3]), ("(3,3)", [3, 3]), ("[1,2,3]", [1, 2, 3]),
    ("(1.5,2.500000e-01)", [1.5, 0.25]), ("(1,-2)", [1, -2]),
    ("(a,1,2.0)", ["a", 1, 2.0]),
    ("inf", "inf"), ("-inf", "-inf"), ("nan", "nan"),
    ("torch.float", "torch.float"), ("torch.long", "torch.long"),
    ("reflect", "reflect"), ("nearest-exact", "nearest-exact"), ("tanh", "tanh"),
])
def test_parse_value_follows_pnnx_rules(text, expected):
    value = parse_value(text)
    assert value == expected
    assert type(value) is type(expected)  # 1 must stay int, 1.0 float, True bool


def test_empty_value_is_an_empty_string_not_a_list():
    # pnnx reads `key=` as the string "" (value[0] is not '(' or '['), not as an empty list.
    assert parse_value("") == ""


@pytest.mark.parametrize("value, expected", [
    ("inf", math.inf), ("-inf", -math.inf), (3, 3.0), (-1, -1.0), (0.5, 0.5)])
def test_as_float_accepts_ints_and_infinity_strings(value, expected):
    assert as_float(value) == expected


def test_as_float_nan_and_rejections():
    assert math.isnan(as_float("nan"))
    for bad in (True, "reflect", None, [1.0]):
        with pytest.raises(ValueError):
            as_float(bad)


@pytest.mark.parametrize("text, dims, dtype", [
    ("(1,3,224,224)f32", [1, 3, 224, 224], "f32"),
    ("(1,3,?,?)f16", [1, 3, None, None], "f16"),
    ("(1)i64", [1], "i64"),
    ("()f32", [], "f32"),
])
def test_parse_dtype_suffix(text, dims, dtype):
    assert parse_dtype_suffix(text) == (dims, dtype)


# --- whole files --------------------------------------------------------------------------------

PARAMS_LINE = (
    "nn.Fake                  fake                     1 1 0 1 "
    "a=None b=() c=[] t=True f=False old=1 one=(-1) k=(3) pair=(3,3) e1=1.000000e-05 e2=1e5 "
    "f3=0.353553385 neg=-2 negf=-1.500000e+00 pinf=inf ninf=-inf nan=nan dtype=torch.float "
    "mode=nearest-exact flist=(1.5,2.500000e-01) big=2147483647 "
    "expr=add(mul(@0,2),1) equation=ij,jk->ik empty= "
    "#0=(1,3)f32 #1=(1,3)f32")


def test_every_value_type_in_one_line(tmp_path):
    model = parse_lines(tmp_path, [
        "pnnx.Input               pnnx_input_0             0 1 0 #0=(1,3)f32",
        PARAMS_LINE,
        "pnnx.Output              pnnx_output_0            1 0 1"])
    p = model.operators[1].params
    assert p["a"] is None and p["b"] is None and p["c"] is None
    assert p["t"] is True and p["f"] is False and p["old"] == 1
    assert p["one"] == [-1] and p["k"] == [3] and p["pair"] == [3, 3]
    assert p["e1"] == pytest.approx(1e-5) and isinstance(p["e1"], float)
    assert p["e2"] == 1e5 and isinstance(p["e2"], float)
    assert p["f3"] == pytest.approx(0.353553385)
    assert p["neg"] == -2 and p["negf"] == -1.5
    assert (p["pinf"], p["ninf"], p["nan"]) == ("inf", "-inf", "nan")
    assert p["dtype"] == "torch.float" and p["mode"] == "nearest-exact"
    assert p["flist"] == [1.5, 0.25] and p["big"] == 2147483647
    # expr and equation stay raw: the generic parser would split them on commas
    assert p["expr"] == "add(mul(@0,2),1)"
    assert p["equation"] == "ij,jk->ik"
    assert p["empty"] == ""


def test_raw_expressions_with_brackets_and_commas(tmp_path):
    model = parse_lines(tmp_path, [
        "pnnx.Input pnnx_input_0 0 1 0 #0=(2,3,4)f32",
        "pnnx.Expression pnnx_expr_0 1 1 0 1 expr=[size(@0,0),-1,-1] #0=(2,3,4)f32",
        ("pnnx.Expression pnnx_expr_1 1 1 0 2 expr=add(add(@0,log10(add(@0,1))),expm1),@0),log1p,"
        "@0 #0=(2,3,4)f32 #2=(2,3,4)f32"),
        "pnnx.Output pnnx_output_0 2 0 1 2"])
    assert model.operators[1].params["expr"] == "[size(@0,0),-1,-1]"
    assert model.operators[2].params["expr"] == \
        "add(add(@0,log10(add(@0,1))),expm1),@0),log1p,@0"
    # a list-valued expression is a host value: pnnx omits its '#' shape
    assert model.operators[1].output_shapes == [None]


def test_header_and_operator_fields(tmp_path):
    model = parse_lines(tmp_path, [
        "pnnx.Input               pnnx_input_0             0 1 0 #0=(1,3,8,8)f32",
        ("nn.Conv2d                features.0.conv.1        1 1 0 1 bias=True dilation=(1,1) "
        "groups=1 in_channels=3 kernel_size=(3,3) out_channels=8 padding=(1,1) "
        "padding_mode=zeros stride=(1,1) @bias=(8)f32 @weight=(8,3,3,3)f32 "
        "#0=(1,3,8,8)f32 #1=(1,8,8,8)f32"),
        "pnnx.Output              pnnx_output_0            1 0 1"], counts="3 2")
    assert model.operand_count == 2
    assert [op.type for op in model.operators] == ["pnnx.Input", "nn.Conv2d", "pnnx.Output"]
    conv = model.operators[1]
    assert conv.name == "features.0.conv.1"
    assert (conv.inputs, conv.outputs, conv.line) == (["0"], ["1"], 4)
    assert conv.params["kernel_size"] == [3, 3] and conv.params["padding_mode"] == "zeros"
    assert conv.attributes["weight"].shape == (8, 3, 3, 3)
    assert conv.attributes["bias"].shape == (8,) and conv.attributes["bias"].dtype == "f32"
    assert conv.input_shapes == [([1, 3, 8, 8], "f32")]
    assert conv.output_shapes == [([1, 8, 8, 8], "f32")]
    assert model.operators[2].outputs == []


def test_long_names_single_spaces_tabs_and_crlf(tmp_path):
    # Type/name are padded to 24 columns, but a longer one is followed by just one space.
    long = "a_very_long_operator_name_that_overflows.block.3"
    path = tmp_path / "m.pnnx.param"
    path.write_bytes(("7767517\r\n3 2\r\n"
                      "pnnx.Input pnnx_input_0 0 1 in_0 #in_0=(1,4)f32\r\n"
                      f"F.hardtanh\t{long} 1 1  in_0   out.x max_val=2 min_val=-2\r\n"
                      "pnnx.Output pnnx_output_0 1 0 out.x\r\n\r\n").encode())
    model = read_param(path)
    op = model.operators[1]
    assert (op.type, op.name, op.inputs, op.outputs) == ("F.hardtanh", long, ["in_0"], ["out.x"])
    assert op.params == {"max_val": 2, "min_val": -2}  # ints where floats are meant


def test_question_mark_dims_and_omitted_zero_dim_shapes(tmp_path):
    model = parse_lines(tmp_path, [
        "pnnx.Input pnnx_input_0 0 1 0 #0=(1,3,?,?)f32",
        "pnnx.Expression pnnx_expr_0 1 1 0 1 expr=size(@0,2) #0=(1,3,?,?)f32",
        "pnnx.Output pnnx_output_0 1 0 1"])
    assert model.operators[0].output_shapes == [([1, 3, None, None], "f32")]
    expr = model.operators[1]
    assert expr.input_shapes == [([1, 3, None, None], "f32")]
    assert expr.output_shapes == [None]  # 0-dim result: pnnx writes no '#'


def test_dollar_names_with_a_duplicated_operand(tmp_path):
    model = parse_lines(tmp_path, [
        "pnnx.Input pnnx_input_0 0 1 23 #23=(1,4,4)f32",
        ("torch.bmm torch.bmm_0 2 1 23 23 24 $input=23 $mat2=23 #23=(1,4,4)f32 #23=(1,4,4)f32 "
        "#24=(1,4,4)f32"),
        "pnnx.Output pnnx_output_0 1 0 24"])
    bmm = model.operators[1]
    assert bmm.inputs == ["23", "23"]
    assert bmm.input_names == ["input", "mat2"]
    assert bmm.input_shapes == [([1, 4, 4], "f32"), ([1, 4, 4], "f32")]


def test_dollar_names_are_not_trusted_over_positions(tmp_path):
    # nn.MultiheadAttention with attn_mask: pnnx writes $attn_mask pointing at x. Positions rule.
    model = parse_lines(tmp_path, [
        "pnnx.Input pnnx_input_0 0 1 0 #0=(1,5,8)f32",
        "pnnx.Input pnnx_input_1 0 1 1 #1=(5,5)bool",
        "torch.fake f 2 1 1 0 2 $attn_mask=0 #1=(5,5)bool #0=(1,5,8)f32 #2=(1,5,8)f32",
        "pnnx.Output pnnx_output_0 1 0 2"])
    op = model.operators[2]
    assert op.inputs == ["1", "0"]
    assert op.input_names == [None, "attn_mask"]
    assert op.input_shapes == [([5, 5], "bool"), ([1, 5, 8], "f32")]


def test_repeated_inputs(tmp_path):
    model = parse_lines(tmp_path, [
        "pnnx.Input pnnx_input_0 0 1 0 #0=(1,2,3)f32",
        ("torch.cat torch.cat_5 4 1 0 0 0 0 7 dim=1 #0=(1,2,3)f32 #0=(1,2,3)f32 #0=(1,2,3)f32 "
        "#0=(1,2,3)f32 #7=(1,8,3)f32"),
        "pnnx.Output pnnx_output_0 1 0 7"])
    cat = model.operators[1]
    assert cat.inputs == ["0", "0", "0", "0"] and cat.outputs == ["7"]
    assert cat.params == {"dim": 1}
    assert cat.input_shapes == [([1, 2, 3], "f32")] * 4
    assert cat.output_shapes == [([1, 8, 3], "f32")]


def test_multi_output_operator_tuple_and_several_outputs(tmp_path):
    model = parse_lines(tmp_path, [
        "pnnx.Input pnnx_input_0 0 1 0 #0=(1,6,4)f32",
        ("torch.chunk torch.chunk_0 1 3 0 1 2 3 chunks=3 dim=1 #0=(1,6,4)f32 #1=(1,2,4)f32 "
        "#2=(1,2,4)f32 #3=(1,2,4)f32"),
        "prim::TupleConstruct pnnx_10 2 1 1 2 4 #1=(1,2,4)f32 #2=(1,2,4)f32",
        "pnnx.Output pnnx_output_0 1 0 4",
        "pnnx.Output pnnx_output_1 1 0 3"])
    chunk, tup = model.operators[1], model.operators[2]
    assert chunk.outputs == ["1", "2", "3"]
    assert [s[0] for s in chunk.output_shapes] == [[1, 2, 4]] * 3
    assert tup.type == "prim::TupleConstruct" and tup.inputs == ["1", "2"]
    assert tup.output_shapes == [None]  # a tuple has no '#' shape
    assert [op.inputs for op in model.operators[3:]] == [["4"], ["3"]]


@pytest.mark.parametrize("suffix", list(DTYPES))
def test_every_dtype_suffix(tmp_path, suffix):
    model = parse_lines(tmp_path, [
        f"pnnx.Input pnnx_input_0 0 1 0 #0=(2,3){suffix}",
        f"pnnx.Attribute const 0 1 1 @data=(4){suffix} #1=(4){suffix}",
        "pnnx.Output pnnx_output_0 2 0 0 1"])
    assert model.operators[0].output_shapes == [([2, 3], suffix)]
    assert model.operators[1].attributes["data"].dtype == suffix


def test_weight_keys_with_dots(tmp_path):
    model = parse_lines(tmp_path, [
        "pnnx.Input pnnx_input_0 0 1 0 #0=(1,5,8)f32",
        ("nn.MultiheadAttention encoder.layers.0.self_attn 1 1 0 1 embed_dim=8 num_heads=2 "
        "@in_proj_weight=(24,8)f32 @in_proj_bias=(24)f32 @out_proj.weight=(8,8)f32 "
        "@out_proj.bias=(8)f32 #0=(1,5,8)f32 #1=(1,5,8)f32"),
        "pnnx.Output pnnx_output_0 1 0 1"])
    attn = model.operators[1]
    assert list(attn.attributes) == ["in_proj_weight", "in_proj_bias", "out_proj.weight",
                                     "out_proj.bias"]
    assert attn.attributes["out_proj.weight"].shape == (8, 8)


def test_operand_names_may_be_any_token(tmp_path):
    # The ONNX route names inputs in0, in1; optlevel 0 uses names like x.1 or 'input'.
    model = parse_lines(tmp_path, [
        "pnnx.Input pnnx_input_0 0 1 in0 #in0=(1,3)f32",
        "F.relu F.relu_0 1 1 in0 x.1 #in0=(1,3)f32 #x.1=(1,3)f32",
        "pnnx.Output pnnx_output_0 1 0 x.1"])
    assert model.operators[1].output_shapes == [([1, 3], "f32")]


# --- broken .param files ----------------------------------------------------------------------

def expect_format_error(path, *parts: str) -> str:
    """read_param(path) must raise ModelFormatError whose message has the file and `parts`."""
    with pytest.raises(ModelFormatError) as info:
        read_param(path)
    message = str(info.value)
    assert str(path) in message, message
    for part in parts:
        assert part in message, f"{part!r} not in {message!r}"
    return message


GOOD = ["pnnx.Input pnnx_input_0 0 1 0 #0=(1,3)f32",
        "nn.ReLU relu 1 1 0 1 #0=(1,3)f32 #1=(1,3)f32",
        "pnnx.Output pnnx_output_0 1 0 1"]


def test_good_file_reads(tmp_path):
    assert len(read_param(write_param(tmp_path, GOOD)).operators) == 3


def test_missing_file(tmp_path):
    path = tmp_path / "nope.pnnx.param"
    expect_format_error(path, "not found")


def test_binary_file_passed_as_param(tmp_path):
    path = tmp_path / "model.pnnx.param"
    path.write_bytes(b"PK\x03\x04\xff\xfe\x00\x00binary")
    expect_format_error(path, "not a text file", ".pnnx.bin")


@pytest.mark.parametrize("first", ["7767518", "ncnn", ""])
def test_wrong_magic(tmp_path, first):
    path = tmp_path / "model.pnnx.param"
    path.write_text("\n".join([first, "3 0", *GOOD]) + "\n")
    expect_format_error(path, "line 1", "7767517")


def test_empty_file(tmp_path):
    path = tmp_path / "model.pnnx.param"
    path.write_text("")
    expect_format_error(path, "line 1", "7767517", "empty")


def test_magic_only(tmp_path):
    path = tmp_path / "model.pnnx.param"
    path.write_text("7767517\n")
    expect_format_error(path, "line 2", "<operator_count> <operand_count>", "end of file")


@pytest.mark.parametrize("counts", ["3", "3 2 1", "three 2", "-3 2", "3 2.0", ""])
def test_bad_counts_line(tmp_path, counts):
    path = write_param(tmp_path, GOOD, counts=counts)
    expect_format_error(path, "line 2", "<operator_count> <operand_count>")


def test_fewer_operator_lines_than_declared(tmp_path):
    path = write_param(tmp_path, GOOD[:2], counts="3 2")  # truncated: pnnx.Output is gone
    expect_format_error(path, "line 4", "declares 3 operators", "has 2", "truncated")


def test_more_operator_lines_than_declared(tmp_path):
    path = write_param(tmp_path, GOOD, counts="2 2")
    expect_format_error(path, "declares 2 operators", "has 3")


def test_line_with_too_few_fields(tmp_path):
    path = write_param(tmp_path, [GOOD[0], "nn.ReLU relu 1", GOOD[2]])
    expect_format_error(path, "line 4", "<type> <name> <n_in> <n_out>", "3 field(s)")


def test_non_integer_counts_on_an_operator_line(tmp_path):
    path = write_param(tmp_path, [GOOD[0], "nn.ReLU relu one 1 0 1", GOOD[2]])
    expect_format_error(path, "line 4", "relu", "integers", "'one'")


def test_line_with_too_few_operands(tmp_path):
    path = write_param(tmp_path, [GOOD[0], "nn.ReLU relu 1 1 0", GOOD[2]])
    expect_format_error(path, "line 4", "relu", "1 input(s) and 1 output(s)",
                        "only 1 operand name(s)")


def test_too_few_operands_before_parameters(tmp_path):
    # The counts say 2 inputs but a parameter follows the first: it must not become an operand.
    path = write_param(tmp_path, [GOOD[0], "torch.cat cat 2 1 0 1 dim=1 #0=(1,3)f32", GOOD[2]])
    expect_format_error(path, "line 4", "cat", "expected an operand name", "dim=1")


def test_token_without_equals(tmp_path):
    path = write_param(tmp_path, [GOOD[0], "nn.ReLU relu 1 1 0 1 inplace", GOOD[2]])
    expect_format_error(path, "line 4", "relu", "expected 'key=value'", "'inplace'")


@pytest.mark.parametrize("shape, expected", [
    ("8,3f32", "expected '(' to open the shape"),
    ("(8,3f32", "expected ')' to close the shape"),
    ("(8,x)f32", "dimension 'x' is neither an integer nor '?'"),
    ("(8,?)f32", "'?' dimension"),
    ("(8,3)float", "unknown dtype suffix 'float'"),
])
def test_bad_weight_shape(tmp_path, shape, expected):
    line = f"nn.Linear fc 1 1 0 1 bias=False in_features=3 out_features=8 @weight={shape}"
    path = write_param(tmp_path, [GOOD[0], line, GOOD[2]])
    expect_format_error(path, "line 4", "fc", "@weight", expected)


@pytest.mark.parametrize("shape, expected", [
    ("(1,3)f33", "unknown dtype suffix 'f33'"),
    ("(1,3)", "unknown dtype suffix ''"),
    ("1,3)f32", "expected '('"),
    ("(1,three)f32", "neither an integer nor '?'"),
])
def test_bad_operand_shape(tmp_path, shape, expected):
    line = f"nn.ReLU relu 1 1 0 1 #0={shape} #1=(1,3)f32"
    path = write_param(tmp_path, [GOOD[0], line, GOOD[2]])
    message = expect_format_error(path, "line 4", "relu", "operand '0'", expected)
    assert "known: f32" in message or "unknown" not in expected


def test_duplicate_operator_name(tmp_path):
    path = write_param(tmp_path, [GOOD[0], GOOD[1], "nn.ReLU relu 1 1 1 2",
                                  "pnnx.Output pnnx_output_0 1 0 2"])
    expect_format_error(path, "line 5", "'relu'", "already used on line 4", "unique")


def test_errors_reach_the_user_through_kuiper_load(tmp_path):
    path = write_param(tmp_path, [GOOD[0], "nn.ReLU relu 1 1 0", GOOD[2]])
    with pytest.raises(kuiper.ModelFormatError, match=r"line 4"):
        kuiper.load(path)


def test_declared_weights_without_a_bin_file(tmp_path):
    line = "nn.Linear fc 1 1 0 1 bias=False in_features=3 out_features=2 @weight=(2,3)f32"
    path = write_param(tmp_path, [GOOD[0], line, GOOD[2]])
    with pytest.raises(kuiper.ModelFormatError) as info:
        kuiper.load(path)
    message = str(info.value)
    assert "model.pnnx.bin" in message and "not found" in message


def test_parsed_values_survive_the_runtime_graph(tmp_path):
    # The graph keeps the parser's params as they are; layers read them with typed accessors.
    from kuiper.graph.runtime_graph import RuntimeGraph

    path = write_param(tmp_path, ["pnnx.Input pnnx_input_0 0 1 0 #0=(1,3)f32",
                                  PARAMS_LINE, "pnnx.Output pnnx_output_0 1 0 1"])
    graph = RuntimeGraph(path).init()
    op = graph.operators[1]
    assert op.int_param("one") == -1  # a one-element tuple reads as an int too
    assert op.ints_param("k", 2) == [3, 3]
    assert op.float_param("pinf") == math.inf and op.float_param("ninf") == -math.inf
    assert math.isnan(op.float_param("nan"))
    assert op.float_param("neg") == -2.0
    assert op.bool_param("old") is True and op.bool_param("f") is False
    with pytest.raises(kuiper.OperatorError, match=r"'fake'.*'mode'.*number.*line 4"):
        op.float_param("mode")
    with pytest.raises(kuiper.OperatorError, match=r"'missing' is missing"):
        op.param("missing")
    assert np.isclose(op.float_param("f3"), 0.353553385)


FUZZ_BASE = [
    "pnnx.Input pnnx_input_0 0 1 0 #0=(1,3,4,4)f32",
    ("nn.Conv2d conv 1 1 0 1 bias=True dilation=(1,1) groups=1 in_channels=3 kernel_size=(3,3) "
    "out_channels=2 padding=(1,1) padding_mode=zeros stride=(1,1) @bias=(2)f32 "
    "@weight=(2,3,3,3)f32 #0=(1,3,4,4)f32 #1=(1,2,4,4)f32"),
    "nn.ReLU relu 1 1 1 2 #1=(1,2,4,4)f32 #2=(1,2,4,4)f32",
    "torch.cat cat 2 1 2 2 3 dim=1 #2=(1,2,4,4)f32 #2=(1,2,4,4)f32 #3=(1,4,4,4)f32",
    "pnnx.Output pnnx_output_0 1 0 3"]


def test_mutated_files_fail_cleanly(tmp_path):
    """Seeded random edits of a valid model (characters dropped, inserted, duplicated): loading
    and running must either work or raise a KuiperError -- never IndexError, KeyError, ..."""
    import random
    import zipfile

    with zipfile.ZipFile(tmp_path / "model.pnnx.bin", "w") as z:
        z.writestr("conv.bias", np.zeros(2, np.float32).tobytes())
        z.writestr("conv.weight", np.zeros((2, 3, 3, 3), np.float32).tobytes())
    good = "\n".join([MAGIC, "5 4", *FUZZ_BASE])
    alphabet = "()[],=#@$?-.0123456789 abcfi\n"
    rnd = random.Random(0)
    outcomes: dict[str, int] = {}
    for _ in range(300):
        text = good
        for _ in range(rnd.randint(1, 3)):
            k, roll = rnd.randrange(len(text)), rnd.random()
            if roll < 0.4:
                text = text[:k] + text[k + 1:]
            elif roll < 0.8:
                text = text[:k] + rnd.choice(alphabet) + text[k:]
            else:
                j = rnd.randrange(len(text))
                text = text[:k] + text[j:j + 5] + text[k:]
        path = tmp_path / "model.pnnx.param"
        path.write_text(text)
        try:
            kuiper.load(path)(np.zeros((1, 3, 4, 4), np.float32))
            outcome = "ok"
        except kuiper.KuiperError as e:
            outcome = type(e).__name__
        except Exception as e:
            raise AssertionError(f"{type(e).__name__}: {e}\nfor the file:\n{text}") from e
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
    # the edits must exercise both the parser errors and the files that still load
    assert outcomes.get("ModelFormatError", 0) > 50 and outcomes.get("ok", 0) > 10, outcomes
