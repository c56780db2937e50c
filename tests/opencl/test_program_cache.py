"""One program cache per runtime: kernel files and generated sources are each built once."""

import numpy as np
import pytest

import kuiper
from kuiper.clkernels import KERNEL_DIR
from kuiper.core.errors import KernelBuildError
from kuiper.testing import write_operator_model
from tests.conftest import opencl_available


@pytest.fixture
def runtime(monkeypatch):
    """A runtime of its own (an empty cache) that counts the programs it compiles."""
    if not opencl_available():
        pytest.skip("no OpenCL device: pocl-binary-distribution failed to load")
    from kuiper.opencl.device.runtime import OpenCLRuntime

    rt = OpenCLRuntime()
    rt.builds = []
    real_build = rt.build_source

    def counting_build(source, options, label, include=()):
        rt.builds.append(label)
        return real_build(source, options, label, include)

    monkeypatch.setattr(rt, "build_source", counting_build)
    return rt


def test_same_generated_expression_builds_once(runtime, tmp_path):
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    path = write_operator_model(tmp_path, "pnnx.Expression", [x], {"expr": "mul(@0,7)"})
    first = kuiper.load(path, backend="opencl", runtime=runtime)
    second = kuiper.load(path, backend="opencl", runtime=runtime)
    assert runtime.builds.count("pnnx.Expression mul(@0,7)") == 1
    generated = [key for key in runtime._programs if key[0] == "source"]
    assert len(generated) == 1 and "(x0 * 7.0f)" in generated[0][1]
    np.testing.assert_array_equal(first(x), x * 7)
    np.testing.assert_array_equal(second(x), x * 7)


def test_files_and_sources_share_the_cache(runtime):
    source = "__kernel void copy(__global float *x) { x[0] = x[1]; }"
    built = runtime.program_from_source(source, [], "copy")
    assert runtime.program_from_source(source, [], "copy again") is built
    assert runtime.program_from_source(source, ["-DUNUSED=1"], "copy") is not built
    assert runtime.program("relu") is runtime.program("relu")
    assert runtime.builds == ["copy", "copy", str(KERNEL_DIR / "relu.cl")]
    assert sorted(key[0] for key in runtime._programs) == ["file", "source", "source"]


def test_build_errors_name_the_source_and_are_not_cached(runtime):
    with pytest.raises(KernelBuildError, match="broken kernel"):
        runtime.program_from_source("__kernel void f(void) { y; }", [], "broken kernel")
    with pytest.raises(KernelBuildError, match="no_such_kernel.cl"):
        runtime.program("no_such_kernel")
    assert runtime._programs == {}
