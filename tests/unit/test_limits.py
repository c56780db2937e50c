"""Resource budgets (kuiper/core/limits.py): a tiny file that asks for petabytes is refused at load,
by a ResourceError naming the operator, before anything is allocated."""

import numpy as np
import pytest

import kuiper
from kuiper import Limits, ResourceError
from kuiper.core.limits import planned_bytes
from kuiper.testing import run_operator, write_operator_model


def write(tmp_path, text: str) -> str:
    path = tmp_path / "model.pnnx.param"
    path.write_text("7767517\n" + text)
    return str(path)


def relu_chain(tmp_path, shape: str, n: int = 3) -> str:
    lines = [f"pnnx.Input in0 0 1 0 #0=({shape})f32"]
    lines += [f"nn.ReLU r{i} 1 1 {i} {i + 1}" for i in range(n)]
    lines.append(f"pnnx.Output out0 1 0 {n}")
    return write(tmp_path, f"{n + 2} {n + 1}\n" + "\n".join(lines) + "\n")


def test_huge_declared_input_is_refused_at_load(tmp_path, backend):
    path = relu_chain(tmp_path, "100000,100000,100000")
    with pytest.raises(ResourceError, match=r"input '0': a tensor of shape \(100000, 100000, "
                       r"100000\) needs 3.6 PiB \(4,000,000,000,000,000 bytes\)"):
        kuiper.load(path, backend=backend)


def test_upsample_by_1e10_is_refused_before_its_tables(backend):
    x = np.ones((1, 1, 2, 2), np.float32)
    with pytest.raises(ResourceError,
                       match=r"operator 'op0' \(nn.Upsample\).*\(1, 1, 2, 20000000000\)"):
        run_operator("nn.Upsample", [x], params={"scale_factor": (1.0, 1e10)}, backend=backend)


@pytest.mark.parametrize("scale", ["(inf,2.0)", "(nan,2.0)", "(1e999,2.0)"])
def test_upsample_scale_must_be_finite(tmp_path, backend, scale):
    path = write(tmp_path, "3 2\npnnx.Input in0 0 1 0 #0=(1,1,4,4)f32\n"
                           f"nn.Upsample up 1 1 0 1 mode=nearest scale_factor={scale}\n"
                           "pnnx.Output out0 1 0 1\n")
    with pytest.raises(kuiper.KuiperError, match="scale_factor"):
        kuiper.load(path, backend=backend)


def test_limits_per_graph_and_from_environment(tmp_path, monkeypatch, backend):
    path = relu_chain(tmp_path, "1,1000")  # 4,000 bytes per tensor
    kuiper.load(path, backend=backend, limits=Limits(4000, 10**9))
    with pytest.raises(ResourceError, match=r"needs 3.9 KiB \(4,000 bytes\), above the limit "
                                            r"of 3.9 KiB \(3,999 bytes\)"):
        kuiper.load(path, backend=backend, limits=Limits(3999, 10**9))
    monkeypatch.setenv("KUIPER_MAX_TENSOR_BYTES", "3999")
    with pytest.raises(ResourceError, match="KUIPER_MAX_TENSOR_BYTES"):
        kuiper.load(path, backend=backend)
    monkeypatch.setenv("KUIPER_MAX_TENSOR_BYTES", "lots")
    with pytest.raises(ResourceError, match="KUIPER_MAX_TENSOR_BYTES='lots' is not a number"):
        kuiper.load(path, backend=backend)


@pytest.mark.parametrize("memory", ["greedy_by_size", "naive"])
def test_total_budget_counts_what_each_backend_keeps(tmp_path, backend, memory):
    # Four 4,000-byte tensors: the OpenCL executor with memory="naive" keeps all (16,000
    # bytes); the CPU executor frees each after its last use, and an OpenCL memory plan reuses
    # bytes alike, so at most two are alive at once (8,000 bytes).
    path = relu_chain(tmp_path, "1,1000")
    graph = kuiper.load(path)
    assert planned_bytes(graph.order, graph.specs, graph.output_operands, True) == 8000
    assert planned_bytes(graph.order, graph.specs, graph.output_operands, False) == 16000
    need = 16000 if (backend, memory) == ("opencl", "naive") else 8000
    kuiper.load(path, backend=backend, memory=memory, limits=Limits(10**9, need))
    with pytest.raises(ResourceError, match=rf"one inference needs .* \({need:,} bytes\)"):
        kuiper.load(path, backend=backend, memory=memory, limits=Limits(10**9, need - 1))


def test_a_refused_new_size_leaves_the_graph_usable(tmp_path, backend, rng):
    x = rng.standard_normal((1, 3, 4, 4)).astype(np.float32)
    path = write_operator_model(tmp_path, "nn.ReLU", [x])
    graph = kuiper.load(path, backend=backend, limits=Limits(4 * 3 * 8 * 8, 10**9))
    with pytest.raises(ResourceError, match="input '0'"):
        graph.forward(np.ones((1, 3, 9, 9), np.float32))
    (y,) = graph.forward(x)  # the old size builds again and runs
    np.testing.assert_array_equal(y, np.maximum(x, 0))
    (y,) = graph.forward(np.full((1, 3, 8, 8), -1.0, np.float32))
    assert y.shape == (1, 3, 8, 8) and not y.any()


def test_numel_does_not_overflow():
    spec = kuiper.TensorSpec.of((10**6,) * 4)
    assert spec.numel == 10**24  # np.prod in int64 would wrap to a wrong (even negative) count
