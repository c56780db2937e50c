"""A model's first OpenCL run: fewer programs, compiled once, said once, cached across processes.

- Fused epilogues that differ only in their numbers share one program (their numbers are
  bound as data: clkernels/epilogue.h, EPI_K). PP-OCRv5's detector fused a different
  `c1 * hardswish(a * x + b) + c2` into each of its 30 convolutions, each its own program.
- On a device that compiles kernels at their first launch (PoCL), the build ends with a warm-up
  run, so the first inference is not the one that compiles; `kuiper compare`'s "opencl ms"
  excludes every compile, and "building OpenCL kernels" is said once.
- Kuiper's own binary cache (kuiper/opencl/device/binary_cache.py) serves a program to a new
  process, and a changed header is a new key.
"""

from __future__ import annotations

import logging
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import kuiper
from kuiper.testing import assert_close
from tests.conftest import ROOT, opencl_available

pytestmark = pytest.mark.skipif(not opencl_available(), reason="no OpenCL device: install "
                                "PoCL with `pip install -e \".[pocl]\"`")

# Three 1x1 convolutions, each followed by its own affine hardswish: the same program for all
# three once the numbers are data. Weights: a fixed seeded pattern per layer.
LAYERS = 3


def affine_hardswish_model(folder) -> str:
    lines = ["pnnx.Input in0 0 1 x0 #x0=(1,8,12,12)f32"]
    weights = {}
    for i in range(LAYERS):
        a, b = 1.0 + 0.25 * i, 0.5 - 0.125 * i
        lines += [
            f"nn.Conv2d conv{i} 1 1 x{i} c{i} bias=True dilation=(1,1) groups=1 in_channels=8 "
            f"kernel_size=(1,1) out_channels=8 padding=(0,0) padding_mode=zeros stride=(1,1) "
            f"@weight=(8,8,1,1)f32 @bias=(8)f32 #x{i}=(1,8,12,12)f32 #c{i}=(1,8,12,12)f32",
            f"pnnx.Expression aff{i} 1 1 c{i} h{i} expr=add(mul(@0,{a}),{b}) "
            f"#c{i}=(1,8,12,12)f32 #h{i}=(1,8,12,12)f32",
            f"nn.Hardswish hs{i} 1 1 h{i} x{i + 1} #h{i}=(1,8,12,12)f32 "
            f"#x{i + 1}=(1,8,12,12)f32"]
        rng = np.random.default_rng(i)
        weights[f"conv{i}.weight"] = rng.standard_normal((8, 8, 1, 1)).astype(np.float32) / 3
        weights[f"conv{i}.bias"] = rng.standard_normal(8).astype(np.float32) / 3
    lines.append(f"pnnx.Output out0 1 0 x{LAYERS}")
    import zipfile

    path = folder / "m.pnnx.param"
    path.write_text("7767517\n" + f"{len(lines)} {LAYERS * 3 + 1}\n" + "\n".join(lines) + "\n")
    with zipfile.ZipFile(folder / "m.pnnx.bin", "w", zipfile.ZIP_STORED) as z:
        for name, array in weights.items():
            z.writestr(name, array.tobytes())
    return str(path)


def test_epilogues_that_differ_in_their_numbers_share_a_program(tmp_path):
    from kuiper.opencl.device.runtime import OpenCLRuntime

    path = affine_hardswish_model(tmp_path)
    runtime = OpenCLRuntime()  # a program cache of its own
    graph = kuiper.load(path, backend="opencl", runtime=runtime)
    assert len(graph.plan.epilogues) == LAYERS  # each convolution carries its affine hardswish
    conv_programs = [key for key in runtime._programs if key[0] == "file"
                     and any("EPI_ACT" in option for option in key[2])]
    assert len(conv_programs) == 1, conv_programs  # before: one per layer
    (options,) = [key[2] for key in conv_programs]
    assert any("EPI_K(0)" in option for option in options)
    x = np.random.default_rng(9).standard_normal((1, 8, 12, 12)).astype(np.float32)
    with kuiper.load(path) as cpu:
        assert_close(graph(x), cpu(x))


FIRST_RUN = textwrap.dedent("""
    import pathlib, sys
    import numpy as np
    import kuiper

    def compiled():  # PoCL's cache holds one folder per kernel and work-group size it compiled
        return sorted(str(p) for p in pathlib.Path(sys.argv[2]).rglob("*-goffs0*"))

    graph = kuiper.load(sys.argv[1], backend="opencl")
    after_load = compiled()
    graph(np.ones((1, 8, 12, 12), np.float32))
    print(graph.executor.warms_up, len(after_load), len(compiled()))
""")


def test_the_first_inference_is_not_the_one_that_compiles(tmp_path):
    """PoCL compiles each kernel at its first launch, into its cache: the build's warm-up run
    does it, so the first inference compiles nothing (before, it compiled every kernel)."""
    import os

    path = affine_hardswish_model(tmp_path)
    kcache = tmp_path / "kcache"
    env = dict(os.environ, POCL_CACHE_DIR=str(kcache), KUIPER_CACHE_DIR=str(tmp_path / "k"),
               PYTHONPATH=os.pathsep.join(
                   p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p))
    def first_run():
        result = subprocess.run([sys.executable, "-c", FIRST_RUN, path, str(kcache)],
                                cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
                                check=False)
        assert result.returncode == 0, result.stderr
        return result.stdout.split(), result.stderr

    (warms_up, after_load, after_first), cold_stderr = first_run()
    if warms_up != "True":
        pytest.skip("this device compiles every kernel when it builds its program")
    assert int(after_load) > 0 and after_first == after_load
    # PoCL's Clang printed "2 warnings generated." (notes on 16-wide vectors without AVX-512)
    # on the user's terminal at every cold build: runtime.py's device_options build with -w
    assert "warnings generated" not in cold_stderr and "warning generated" not in cold_stderr
    # a new process with the cache filled: nothing new compiled, at load or at the first run
    assert first_run()[0] == ["True", after_load, after_load]


def test_compare_times_no_compile_and_says_building_once(tmp_path, caplog):
    """`kuiper compare` warms up the observed (unfused) run it times: no program is built
    during the recorded run; and the build is announced once, not once per binding."""
    from kuiper.bench import compare
    from kuiper.opencl.device.runtime import OpenCLRuntime

    path = affine_hardswish_model(tmp_path)
    builds, recorded = [], []
    real_build, real_init = OpenCLRuntime.build_source, compare.Trace.__init__

    def counting_build(self, *args, **kwargs):
        builds.append(time.perf_counter())
        return real_build(self, *args, **kwargs)

    def marking_init(self, *args, **kwargs):  # the Trace is made just before the timed run
        recorded.append(time.perf_counter())
        real_init(self, *args, **kwargs)

    x = [np.random.default_rng(1).standard_normal((1, 8, 12, 12)).astype(np.float32)]
    with pytest.MonkeyPatch.context() as patch, caplog.at_level(logging.INFO, logger="kuiper"):
        patch.setattr(OpenCLRuntime, "build_source", counting_build)
        patch.setattr(OpenCLRuntime, "_shared", {})  # a fresh runtime: its kernels are built
        patch.setattr(compare.Trace, "__init__", marking_init)
        trace, _ = compare.trace_backend(path, "opencl", x)
    assert builds and trace.seconds  # kernels were built, operators were timed ...
    assert max(builds) < recorded[0]  # ... and every build came before the timed run
    said = [r.getMessage() for r in caplog.records if "OpenCL kernels" in r.getMessage()
            and r.levelno >= logging.INFO]
    assert len(said) == 1 and said[0].startswith("building OpenCL kernels for "), said


# --- Kuiper's binary cache --------------------------------------------------------------------
CACHED_BUILD = textwrap.dedent("""
    import sys
    import numpy as np
    from kuiper.opencl.device.runtime import OpenCLRuntime

    runtime = OpenCLRuntime()
    kernel = runtime.kernel_of(runtime.program_from_path(sys.argv[1]), "twice", "twice.cl")
    x = runtime.to_device(np.arange(4, dtype=np.float32))
    kernel(runtime.queue, (4,), None, x.data)
    print(runtime.cached_builds, x.get().tolist())
""")


def cached_build(kernel_file, env):
    result = subprocess.run([sys.executable, "-c", CACHED_BUILD, str(kernel_file)], cwd=ROOT,
                            env=env, capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stderr
    return result.stdout.split(None, 1)


def test_programs_come_from_the_binary_cache_in_a_new_process(tmp_path, monkeypatch):
    import os

    (tmp_path / "k").mkdir()
    (tmp_path / "k" / "factor.h").write_text("#define FACTOR 2.0f\n")
    kernel = tmp_path / "k" / "twice.cl"
    kernel.write_text('#include "factor.h"\n__kernel void twice(__global float *x) '
                      "{ x[get_global_id(0)] *= FACTOR; }\n")
    env = dict(os.environ, KUIPER_CACHE_DIR=str(tmp_path / "cache"), KUIPER_KERNEL_CACHE="1",
               PYTHONPATH=os.pathsep.join(
                   p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p))
    assert cached_build(kernel, env) == ["0", "[0.0, 2.0, 4.0, 6.0]\n"]   # built, stored
    assert cached_build(kernel, env) == ["1", "[0.0, 2.0, 4.0, 6.0]\n"]   # from the cache
    assert len(list((tmp_path / "cache" / "kernels").glob("*.bin"))) == 1
    (tmp_path / "k" / "factor.h").write_text("#define FACTOR 3.0f\n")    # a header changed:
    assert cached_build(kernel, env) == ["0", "[0.0, 3.0, 6.0, 9.0]\n"]   # a new key
    env["KUIPER_KERNEL_CACHE"] = "0"
    assert cached_build(kernel, env)[0] == "0"


def test_a_binary_the_driver_refuses_is_rebuilt(tmp_path, monkeypatch):
    from kuiper.opencl.device import binary_cache
    from kuiper.opencl.device.runtime import OpenCLRuntime

    monkeypatch.setenv("KUIPER_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("KUIPER_KERNEL_CACHE", "1")
    source = "__kernel void one(__global float *x) { x[0] = 1.0f; }"
    runtime = OpenCLRuntime()
    runtime.program_from_source(source, [], "one")
    (stored,) = (tmp_path / "kernels").glob("*.bin")
    stored.write_bytes(b"not a binary")
    again = OpenCLRuntime()
    program = again.program_from_source(source, [], "one")
    assert again.cached_builds == 0 and "one" in program.kernel_names
    assert binary_cache.load(stored.stem) != b"not a binary"  # replaced by the good one


def test_kernel_compiler_warnings_are_off_on_pocl_unless_asked_for(monkeypatch):
    """-w on PoCL's CPU devices (its Clang's ABI notes are noise to a user), nowhere else, and
    KUIPER_KERNEL_WARNINGS=1 brings them back for someone writing a kernel."""
    from kuiper.opencl.device.runtime import OpenCLRuntime, compiles_to_native_cpu

    runtime = OpenCLRuntime.shared()
    pocl = compiles_to_native_cpu(runtime.device)
    monkeypatch.delenv("KUIPER_KERNEL_WARNINGS", raising=False)
    assert ("-w" in runtime.device_options) == pocl
    monkeypatch.setenv("KUIPER_KERNEL_WARNINGS", "1")
    assert "-w" not in runtime.device_options
