"""A weight's declared dtype must be one its layer computes with (issue 31).

The .bin checks that an entry holds prod(shape) * itemsize bytes of the declared dtype; `f32`
and `i32` have the same size, so a weight re-declared `i32` in the .param was accepted, its
float bytes read as integers: outputs near 1e10, no error on either backend. Now a learned
weight must be floating-point (`RuntimeOperator.weight`, kuiper/core/ir.py), and a layer whose
weights may arrive as inputs (F.conv2d, F.linear, the F.*_norm) refuses non-float inputs
(`expect_floats`, layers/common/input_dtypes.py). A constant of integers that a layer means
to read as integers (an index) still loads.
"""

from __future__ import annotations

import zipfile

import numpy as np
import pytest

import kuiper

W = np.random.default_rng(0).standard_normal((4, 3, 3, 3)).astype(np.float32)


def write(tmp_path, lines: list[str], entries: dict[str, bytes]) -> str:
    path = tmp_path / "m.pnnx.param"
    path.write_text(f"7767517\n{len(lines)} 9\n" + "\n".join(lines) + "\n")
    with zipfile.ZipFile(tmp_path / "m.pnnx.bin", "w") as z:
        for name, data in entries.items():
            z.writestr(name, data)
    return str(path)


def conv_module(tmp_path, dtype: str) -> str:
    return write(tmp_path, [
        "pnnx.Input in 0 1 0 #0=(1,3,8,8)f32",
        "nn.Conv2d conv 1 1 0 1 bias=False dilation=(1,1) groups=1 in_channels=3 "
        f"kernel_size=(3,3) out_channels=4 padding=(1,1) padding_mode=zeros stride=(1,1) "
        f"@weight=(4,3,3,3){dtype} #0=(1,3,8,8)f32 #1=(1,4,8,8)f32",
        "pnnx.Output out 1 0 1"], {"conv.weight": W.tobytes()})


def conv_of_a_constant(tmp_path, dtype: str) -> str:
    return write(tmp_path, [
        "pnnx.Input in 0 1 0 #0=(1,3,8,8)f32",
        f"pnnx.Attribute w 0 1 1 @data=(4,3,3,3){dtype} #1=(4,3,3,3){dtype}",
        "F.conv2d conv 2 1 0 1 2 bias=None dilation=(1,1) groups=1 padding=(1,1) stride=(1,1) "
        f"$input=0 $weight=1 #0=(1,3,8,8)f32 #1=(4,3,3,3){dtype} #2=(1,4,8,8)f32",
        "pnnx.Output out 1 0 2"], {"w.data": W.tobytes()})


def linear_of_a_constant(tmp_path, dtype: str) -> str:
    return write(tmp_path, [
        "pnnx.Input in 0 1 0 #0=(2,27)f32",
        f"pnnx.Attribute w 0 1 1 @data=(4,27){dtype} #1=(4,27){dtype}",
        "F.linear fc 2 1 0 1 2 bias=None $input=0 $weight=1 #2=(2,4)f32",
        "pnnx.Output out 1 0 2"], {"w.data": W.tobytes()})


@pytest.mark.parametrize("dtype", ["i32", "u8", "bool", "c64"])
def test_a_modules_weight_of_another_dtype_is_refused(tmp_path, backend, dtype):
    # (u8, bool and c64 take another number of bytes: refused by their size in the .bin first)
    with pytest.raises(kuiper.KuiperError) as info:
        kuiper.load(conv_module(tmp_path, dtype), backend=backend)
    message = str(info.value)
    assert "conv" in message and ("expected floating-point" in message
                                  or "bytes but the declared shape" in message), message


def test_i32_weight_names_the_operator_and_what_was_expected(tmp_path, backend):
    with pytest.raises(kuiper.OperatorError, match=r"operator 'conv' \(nn.Conv2d\): weight "
                       r"'@weight' is declared int32 in the .param, expected floating-point"):
        kuiper.load(conv_module(tmp_path, "i32"), backend=backend)


@pytest.mark.parametrize("model", [conv_of_a_constant, linear_of_a_constant])
def test_a_constant_weight_of_integers_is_refused(tmp_path, backend, model):
    with pytest.raises(kuiper.OperatorError, match=r"input 1 \('1'\) is int32, but F\.\w+ "
                       r"takes float16, float32, float64"):
        kuiper.load(model(tmp_path, "i32"), backend=backend)


@pytest.mark.parametrize("model", [conv_module, conv_of_a_constant])
def test_the_same_models_in_float32_run(tmp_path, backend, model):
    x = np.ones((1, 3, 8, 8), np.float32)
    y = kuiper.load(model(tmp_path, "f32"), backend=backend)(x)
    assert y.shape == (1, 4, 8, 8) and np.abs(y).max() < 100  # not float bytes read as ints


def test_a_constant_of_indices_still_loads(tmp_path, backend):
    index = np.array([2, 0, 1], np.int64)
    path = write(tmp_path, [
        "pnnx.Input in 0 1 0 #0=(3,5)f32",
        "pnnx.Attribute idx 0 1 1 @data=(3)i64 #1=(3)i64",
        "torch.index_select sel 2 1 0 1 2 dim=0 $input=0 $index=1 #2=(3,5)f32",
        "pnnx.Output out 1 0 2"], {"idx.data": index.tobytes()})
    x = np.arange(15, dtype=np.float32).reshape(3, 5)
    np.testing.assert_array_equal(kuiper.load(path, backend=backend)(x), x[index])
