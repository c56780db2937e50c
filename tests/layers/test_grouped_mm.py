"""aten::_grouped_mm (one matrix product per group of rows, or per batch item) against torch."""

import numpy as np
import pytest
import torch

import kuiper
from kuiper.testing import assert_close, run_operator


def run_grouped(tmp_path, backend, x, w, offs=None):
    """One aten::_grouped_mm as pnnx writes Mixtral's: bias and out_dtype `expr=None`."""
    from tests.layers.test_scatter import write_model

    values = {"x": x, "w": w} | ({} if offs is None else {"offs": offs})
    names = list(values)
    suffix = {"float32": "f32", "int32": "i32", "int64": "i64"}
    lines = [f"pnnx.Input in{i} 0 1 {name} #{name}=({','.join(map(str, v.shape))})"
             f"{suffix[v.dtype.name]}" for i, (name, v) in enumerate(values.items())]
    lines += ["pnnx.Expression none 0 1 nothing expr=None",
              f"aten::_grouped_mm op0 {len(names) + 2} 1 {' '.join(names)} nothing nothing y",
              "pnnx.Output out 1 0 y"]
    graph = kuiper.load(write_model(tmp_path, lines, {}), backend=backend)
    (y,) = graph.forward(*values.values())
    return y


def reference(x, w, ends):
    """torch's products group by group; rows after the last end are 0 here."""
    out = torch.zeros(x.shape[0], w.shape[2])
    start = 0
    for g, end in enumerate(ends):
        out[start:end] = torch.from_numpy(x[start:end]) @ torch.from_numpy(w[g])
        start = end
    return out.numpy()


@pytest.mark.parametrize("counts", [[12, 15, 9, 10], [0, 46, 0, 0], [5, 0, 0, 3], [1], [7, 6, 0]])
@pytest.mark.parametrize("offs_dtype", [np.int32, np.int64, np.float32])
def test_grouped_mm_by_rows(backend, rng, tmp_path, counts, offs_dtype):
    """Mixtral's expert products: tokens sorted by expert, offs = the cumulative counts (float
    when they come from histc through cumsum); empty groups, and rows past the last group."""
    groups, k, n = len(counts), 13, 21
    ends = np.cumsum(counts)
    rows = int(ends[-1]) + (2 if counts == [5, 0, 0, 3] else 0)   # two rows in no group
    x = rng.standard_normal((rows, k)).astype(np.float32)
    w = rng.standard_normal((groups, k, n)).astype(np.float32)
    y = run_grouped(tmp_path, backend, x, w, ends.astype(offs_dtype))
    assert_close(y, reference(x, w, ends))
    if hasattr(torch, "_grouped_mm") and rows == ends[-1] and offs_dtype == np.int32:
        try:   # PyTorch's own, where this build runs it on the CPU
            want = torch._grouped_mm(torch.from_numpy(x), torch.from_numpy(w),
                                     offs=torch.from_numpy(ends.astype(np.int32)))
        except (RuntimeError, NotImplementedError):
            return
        assert_close(y, want.numpy())


def test_grouped_mm_batched(backend, rng, tmp_path):
    x = rng.standard_normal((3, 5, 11)).astype(np.float32)
    w = rng.standard_normal((3, 11, 7)).astype(np.float32)
    y = run_grouped(tmp_path, backend, x, w)
    assert_close(y, (torch.from_numpy(x) @ torch.from_numpy(w)).numpy())


@pytest.mark.parametrize("shapes, message", [
    (((4, 8), (2, 8, 3), (3,)), r"offs \(3,\) do not fit"),
    (((4, 8), (2, 9, 3), (2,)), "do not fit"),
    (((4, 8), (8, 3), (2,)), "should be 3-D"),
    (((2, 4, 8), (3, 8, 5), None), "do not fit"),
    (((4, 8), (2, 8, 3), None), "only a 2-D input with offs"),
])
def test_grouped_mm_bad_shapes(rng, shapes, message):
    x_shape, w_shape, offs_shape = shapes
    inputs = [np.zeros(x_shape, np.float32), np.zeros(w_shape, np.float32)]
    if offs_shape is not None:
        inputs.append(np.zeros(offs_shape, np.int32))
    with pytest.raises(kuiper.OperatorError, match=message):
        run_operator("aten::_grouped_mm", inputs)


@pytest.mark.parametrize("offs", [[4, 2], [3, 9], [-1, 4], [2.5, 6]])
def test_grouped_mm_bad_offsets_are_an_error_on_the_cpu(rng, offs):
    x, w = np.zeros((6, 4), np.float32), np.zeros((2, 4, 3), np.float32)
    dtype = np.float32 if isinstance(offs[0], float) else np.int32
    with pytest.raises(kuiper.KuiperError, match=r"should be whole numbers, non-decreasing, "
                                                 "from 0 to the input's 6 rows"):
        run_operator("aten::_grouped_mm", [x, w, np.array(offs, dtype)])
