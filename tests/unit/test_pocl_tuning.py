"""What Kuiper does for PoCL's CPU devices only: thread pinning and the kernels' prefetches.

PoCL's worker threads are pinned to the cores unless the user says otherwise (POCL_AFFINITY),
and the weight prefetches (__builtin_prefetch, a Clang builtin) are compiled in only where the
kernels become native code through Clang: PoCL's CPU devices, not Oclgrind, which also calls
itself a CPU but stops at the builtin, nor GPUs.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from kuiper.layers.opencl_conv.launch import PREFETCH_STEPS, prefetch_options
from kuiper.opencl.device import runtime


def device(kind: str, platform: str):
    cl = pytest.importorskip("pyopencl")
    types = {"cpu": cl.device_type.CPU, "gpu": cl.device_type.GPU,
             "all": cl.device_type.CPU | cl.device_type.GPU | cl.device_type.ACCELERATOR}
    return SimpleNamespace(type=types[kind], platform=SimpleNamespace(name=platform))


@pytest.mark.parametrize("kind,platform,native", [
    ("cpu", "Portable Computing Language", True),
    ("all", "Oclgrind", False),                        # claims every device type
    ("gpu", "NVIDIA CUDA", False),
    ("gpu", "Portable Computing Language", False),     # PoCL's CUDA device
    ("cpu", "Intel(R) OpenCL", False),                 # not known to compile with Clang
])
def test_prefetches_only_where_kernels_compile_to_native_cpu_code(kind, platform, native):
    dev = device(kind, platform)
    assert runtime.compiles_to_native_cpu(dev) is native
    expected = [f"-DPREFETCH_STEPS={PREFETCH_STEPS}"] if native else []
    assert prefetch_options(dev) == expected


def test_pocl_threads_are_pinned_unless_the_user_chose(monkeypatch):
    pytest.importorskip("pyopencl")
    every_core = set(range(runtime.os.cpu_count()))
    monkeypatch.setattr(runtime.os, "sched_getaffinity", lambda pid: every_core, raising=False)
    monkeypatch.delenv("POCL_AFFINITY", raising=False)
    runtime._cl()
    assert runtime.os.environ["POCL_AFFINITY"] == "1"
    monkeypatch.setenv("POCL_AFFINITY", "0")
    runtime._cl()
    assert runtime.os.environ["POCL_AFFINITY"] == "0"


def test_pocl_threads_stay_unpinned_on_a_share_of_the_cores(monkeypatch):
    """Under taskset or a container's cpuset PoCL would pin its workers to cores the process
    may not use: Kuiper leaves them alone there."""
    monkeypatch.setattr(runtime.os, "sched_getaffinity", lambda pid: {1}, raising=False)
    monkeypatch.setattr(runtime.os, "cpu_count", lambda: 4)
    monkeypatch.delenv("POCL_AFFINITY", raising=False)
    assert runtime.pin_pocl_threads() is False
    assert "POCL_AFFINITY" not in runtime.os.environ
