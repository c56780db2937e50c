"""pnnx.Attribute: constants of any dtype come out exactly as stored, on both backends."""

import zipfile

import numpy as np
import pytest

import kuiper

SUFFIX = {np.float32: "f32", np.float64: "f64", np.int64: "i64", np.int32: "i32",
          np.uint8: "u8", np.bool_: "bool", np.float16: "f16"}


def write_constant_model(folder, data: np.ndarray, declared_shape) -> str:
    """x passes through; the constant is a second output (pnnx stores 0-dim data as (1))."""
    dims = ",".join(str(d) for d in data.shape)
    out_dims = ",".join(str(d) for d in declared_shape)
    suffix = SUFFIX[data.dtype.type]
    out_shape = f" #1=({out_dims}){suffix}" if declared_shape else ""
    text = "\n".join([
        "7767517", "3 2",
        "pnnx.Input pnnx_input_0 0 1 0 #0=(2,3)f32",
        f"pnnx.Attribute const 0 1 1 @data=({dims}){suffix}{out_shape}",
        "pnnx.Output pnnx_output_0 2 0 0 1", ""])
    param = folder / "c.pnnx.param"
    param.write_text(text)
    with zipfile.ZipFile(folder / "c.pnnx.bin", "w", zipfile.ZIP_STORED) as z:
        z.writestr("const.data", data.tobytes())
    return str(param)


@pytest.mark.parametrize("dtype", list(SUFFIX))
def test_constant_of_every_dtype(backend, rng, tmp_path, dtype):
    data = (rng.standard_normal((3, 1, 5)) * 10).astype(dtype)
    graph = kuiper.load(write_constant_model(tmp_path, data, data.shape), backend=backend)
    x = rng.standard_normal((2, 3)).astype(np.float32)
    y, c = graph(x)
    np.testing.assert_array_equal(y, x)
    assert c.dtype == data.dtype
    np.testing.assert_array_equal(c, data)


def test_zero_dim_constant_is_stored_as_one_element(backend, tmp_path):
    data = np.array([2.5], np.float32)  # pnnx writes @data=(1)f32 for a 0-dim tensor
    graph = kuiper.load(write_constant_model(tmp_path, data, ()), backend=backend)
    _, c = graph(np.zeros((2, 3), np.float32))
    assert float(np.asarray(c).reshape(-1)[0]) == 2.5
