"""Hostile `.pnnx.param` files: the minimal cases of a fuzzing campaign (issue 14), each loaded
through `kuiper.load`, each expected to fail fast with a `KuiperError` that names the file, the
line and what was expected -- never hang, exhaust memory, or leak a bare Python exception.

Three classes: files that are not files (devices, pipes, folders, giants), numbers that cannot
be what pnnx wrote (beyond int64, negative sizes, floats overflowing to infinity, 5,000-digit
counts), and graphs whose structure is broken (an operator with the wrong operands, a consumed
pnnx.Output, thousands of chained tuples).
"""

from __future__ import annotations

import os
import stat
import time

import pytest

import kuiper
from kuiper.cli import main as cli
from kuiper.core.errors import GraphError, KuiperError, ModelFormatError, OperatorError
from kuiper.graph.runtime_graph import RuntimeGraph
from kuiper.parser.files import MAX_PARAM_BYTES, MAX_PARAM_MB
from kuiper.parser.param import read_param
from kuiper.testing import write_param

MAGIC = "7767517"
INPUT = "pnnx.Input in 0 1 x #x=(2,3)f32"


def write_model(tmp_path, lines: list[str], counts: str | None = None) -> str:
    return write_param(tmp_path, lines, counts=counts or f"{len(lines)} 9", name="hostile")


def load_error(path, error=KuiperError, *parts: str) -> str:
    """Load `path`, expect `error` quickly, check that the message holds each part."""
    start = time.perf_counter()
    with pytest.raises(error) as info:
        kuiper.load(path)
    assert time.perf_counter() - start < 5, "a hostile file must fail fast"
    message = str(info.value)
    for part in parts:
        assert part in message, f"{part!r} not in {message!r}"
    return message


# --- files that are not regular files, or far too big --------------------------------------------

@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="needs /dev/zero (POSIX)")
def test_dev_zero_is_refused_not_read_forever():
    load_error("/dev/zero", ModelFormatError, "/dev/zero", "character device",
               "only regular files are read")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs named pipes (POSIX)")
def test_named_pipe_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "pipe.pnnx.param"
    os.mkfifo(fifo)
    load_error(fifo, ModelFormatError, str(fifo), "named pipe")


def test_directory_is_refused(tmp_path):
    folder = tmp_path / "model.pnnx.param"
    folder.mkdir()
    load_error(folder, ModelFormatError, str(folder), "directory")


def test_param_above_the_size_bound_is_refused_before_reading(tmp_path):
    path = tmp_path / "huge.pnnx.param"
    with open(path, "wb") as f:
        f.write(f"{MAGIC}\n".encode())
        f.truncate(MAX_PARAM_BYTES + 1)  # sparse: costs no disk, and must not be read
    load_error(path, ModelFormatError, str(path), f"refused above {MAX_PARAM_MB} MB")


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="needs /dev/zero (POSIX)")
def test_weight_file_that_is_a_device_is_refused(tmp_path):
    param = write_model(tmp_path, [INPUT, "pnnx.Attribute a 0 1 w @data=(2,3)f32",
                                   "pnnx.Expression e 2 1 x w y expr=add(@0,@1)",
                                   "pnnx.Output out 1 0 y"])
    with pytest.raises(ModelFormatError, match="character device"):
        kuiper.load(param, bin_path="/dev/zero")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs named pipes (POSIX)")
def test_weight_file_that_is_a_pipe_is_refused(tmp_path):
    param = write_model(tmp_path, [INPUT, "pnnx.Attribute a 0 1 w @data=(2,3)f32",
                                   "pnnx.Expression e 2 1 x w y expr=add(@0,@1)",
                                   "pnnx.Output out 1 0 y"])
    os.mkfifo(tmp_path / "hostile.pnnx.bin")
    assert stat.S_ISFIFO(os.stat(tmp_path / "hostile.pnnx.bin").st_mode)
    with pytest.raises(ModelFormatError, match="named pipe"):
        kuiper.load(param)


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="needs /dev/zero (POSIX)")
def test_kuiper_info_on_dev_zero_reports_and_exits(capsys):
    assert cli.main(["info", "/dev/zero"]) != 0
    assert "character device" in capsys.readouterr().err


# --- numbers pnnx cannot have written ------------------------------------------------------------

@pytest.mark.parametrize("line, parts", [
    ("pnnx.Attribute a 0 1 w @data=(-2,-2)f32", ["weight '@data'", "-2 is negative", "'?'"]),
    ("pnnx.Attribute a 0 1 w @data=(99999999999999999999)f32", ["beyond int64"]),
    ("pnnx.Attribute a 0 1 w @data=(" + "9" * 5000 + ")f32", ["(5000 characters)",
                                                             "beyond int64"]),
    ("pnnx.Attribute a 0 1 w @data=(\u0663)f32", ["neither an integer nor '?'"]),
    ("nn.ReLU r 1 1 x y #x=(99999999999999999999)f32", ["shape of operand 'x'",
                                                        "beyond int64"]),
    ("F.max_pool2d p 1 1 x y kernel_size=(2,2) stride=(9223372036854775808,1)",
     ["parameter 'stride'", "9223372036854775808 is beyond int64"]),
    ("F.upsample u 1 1 x y mode=nearest scale_factor=(1e999,2.0)",
     ["parameter 'scale_factor'", "overflows to infinity"]),
    ("nn.Linear fc 1 1 x y in_features=" + "7" * 5000, ["in_features", "beyond int64"]),
    ("pnnx.Output out " + "9" * 5000 + " 0 x", ["input and output counts", "below 10**9"]),
    ("pnnx.Output out \u0661 0 x", ["input and output counts"]),
])
def test_numbers_beyond_what_pnnx_writes_name_line_and_expectation(tmp_path, line, parts):
    path = write_model(tmp_path, [INPUT, line, "pnnx.Output out 1 0 x"])
    load_error(path, ModelFormatError, path, "line 4", *parts)


def test_huge_counts_on_line_two(tmp_path):
    path = write_model(tmp_path, [INPUT, "pnnx.Output out 1 0 x"], counts="2 " + "9" * 5000)
    load_error(path, ModelFormatError, "line 2", "two integers")


def test_inf_written_as_pnnx_writes_it_is_still_a_value(tmp_path):
    # The word `inf` is how pnnx writes infinity (torch.clamp max=inf): it stays accepted.
    path = write_model(tmp_path, [INPUT, "torch.clamp c 1 1 x y max=inf min=-1",
                                  "pnnx.Output out 1 0 y"])
    graph = kuiper.load(path)
    assert graph.outputs[0].shape == (2, 3)


# --- broken structure ----------------------------------------------------------------------------

def test_operator_missing_its_inputs(tmp_path):
    # `Tensor.t` takes one tensor; here it consumes nothing and produces an operand.
    path = write_model(tmp_path, [INPUT, "Tensor.t t 0 1 a", "pnnx.Output out 2 0 x a"])
    load_error(path, OperatorError, "operator 't' (Tensor.t)", "line 4", path, "0 input(s)")


def test_input_without_an_output(tmp_path):
    path = write_model(tmp_path, [INPUT, "pnnx.Input in2 0 0", "pnnx.Output out 1 0 x"])
    load_error(path, GraphError, path, "line 4", "'in2' (pnnx.Input)",
               "expected no inputs and 1 output")


def test_output_whose_output_is_consumed(tmp_path):
    path = write_model(tmp_path, [INPUT, "pnnx.Output out 1 1 x z", "nn.ReLU r 1 1 z y",
                                  "pnnx.Output out2 1 0 y"])
    load_error(path, GraphError, path, "line 4", "'out' (pnnx.Output)", "no outputs")


def test_three_thousand_chained_tuples_do_not_recurse(tmp_path):
    chain = [f"prim::TupleConstruct tc{i} 1 1 t{i} t{i + 1}" for i in range(3000)]
    path = write_model(tmp_path, ["pnnx.Input in 0 1 t0 #t0=(2)f32", *chain,
                                  "pnnx.Output out 1 0 t3000"])
    load_error(path, GraphError, "prim::TupleConstruct")  # nested tuples: not supported


def test_cycle_of_tuples(tmp_path):
    path = write_model(tmp_path, [INPUT, "prim::TupleConstruct a 2 1 x tb ta",
                                  "prim::TupleConstruct b 1 1 ta tb", "pnnx.Output out 1 0 ta"])
    load_error(path, GraphError, path, "reached twice")


def test_a_tuple_output_still_flattens(tmp_path):
    path = write_model(tmp_path, [INPUT, "nn.ReLU r 1 1 x y",
                                  "prim::TupleConstruct t 2 1 x y tup", "pnnx.Output out 1 0 tup"])
    assert [p.name for p in kuiper.load(path).outputs] == ["x", "y"]


def test_expression_text_is_not_range_checked_as_a_value(tmp_path):
    # `expr` stays raw text: an expression that is just `2` is a constant, not a parameter value.
    path = write_model(tmp_path, [INPUT, "pnnx.Expression c 0 1 k expr=2",
                                  "pnnx.Expression e 2 1 x k y expr=mul(@0,@1)",
                                  "pnnx.Output out 1 0 y"])
    assert kuiper.load(path).outputs[0].shape == (2, 3)


# --- big but linear: a 64 MB file must not take hours ---------------------------------------------

def test_one_operator_with_fifty_thousand_inputs_parses_in_linear_time(tmp_path):
    n = 50_000  # matching `#` shapes and `$` names to inputs was quadratic: over a minute here
    names = " ".join(f"x{i}" for i in range(n))
    shapes = " ".join(f"#x{i}=(1)f32" for i in range(n))
    dollars = " ".join(f"$a{i}=x{i}" for i in range(n))
    path = write_model(tmp_path, [f"torch.cat c {n} 1 {names} y {shapes} {dollars}"])
    start = time.perf_counter()
    (op,) = read_param(path).operators
    assert time.perf_counter() - start < 15
    assert op.input_names[-1] == f"a{n - 1}" and op.input_shapes[-1] == ([1], "f32")


def test_one_operand_feeding_sixty_thousand_operators_links_in_linear_time(tmp_path):
    n = 60_000  # `op not in operand.consumers` scanned the list: about 30 s here
    relus = [f"nn.ReLU r{i} 1 1 x y{i}" for i in range(n)]
    path = write_model(tmp_path, [INPUT, *relus, "pnnx.Output out 1 0 y0"])
    start = time.perf_counter()
    graph = RuntimeGraph(path).init()
    assert time.perf_counter() - start < 10
    assert len(graph.operands["x"].consumers) == n
