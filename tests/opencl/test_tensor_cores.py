"""The tensor-core probe (kuiper/opencl/device/tensor_cores.py) and what it switches.

Only NVIDIA devices are asked (in a child process, once per device and driver); every other
device answers "none" at once. The selector and the cost model then offer the gemm_mma sets
only for a GEMM computed in a reduced precision on a device that passed.
"""

from __future__ import annotations

import os
import time

import pytest

from kuiper.layers.opencl_gemm import mma_sets
from kuiper.layers.opencl_gemm.cost import ranked_gemm_params
from kuiper.opencl.device import tensor_cores
from tests.conftest import opencl_available
from tests.opencl.described_devices import fake_h100, fake_two_core_cpu
from tests.opencl.probe_fakes import GPU, FakeDevice, no_probe


def gpu(platform: str) -> FakeDevice:
    return FakeDevice(platform, GPU, "a GPU", "580.159.04")


@pytest.fixture
def fresh(fresh_probe):
    fresh_probe(tensor_cores)


@pytest.mark.parametrize("platform", ["Portable Computing Language", "Oclgrind",
                                      "AMD Accelerated Parallel Processing", "Intel(R) OpenCL"])
def test_devices_that_are_not_nvidia_answer_none_without_asking(fresh, monkeypatch, platform):
    monkeypatch.setattr(tensor_cores, "_probe", no_probe)
    assert tensor_cores.tensor_cores(gpu(platform)) == frozenset()


def test_an_nvidia_answer_is_asked_once_then_kept_in_the_cache_and_environment(fresh,
                                                                              monkeypatch):
    asked = []

    def probe(device, key):
        asked.append(key)
        return frozenset({"tf32"})

    monkeypatch.setattr(tensor_cores, "_probe", probe)
    device = gpu("NVIDIA CUDA")
    assert tensor_cores.tensor_cores(device) == {"tf32"}
    assert tensor_cores.tensor_cores(device) == {"tf32"}
    assert len(asked) == 1
    assert os.environ[tensor_cores.ENV] == "tf32"    # for child processes
    tensor_cores._save(asked[0], frozenset({"tf32"}))
    monkeypatch.setattr(tensor_cores, "_known", {})
    monkeypatch.delenv(tensor_cores.ENV)
    monkeypatch.setattr(tensor_cores, "_probe", no_probe)
    assert tensor_cores.tensor_cores(device) == {"tf32"}   # from the cache folder


@pytest.mark.parametrize("value,expected", [("tf32,fp16", {"tf32", "fp16"}), ("none", set()),
                                            ("fp16", {"fp16"}), ("", set())])
def test_the_environment_variable_answers_without_asking(fresh, monkeypatch, value, expected):
    monkeypatch.setattr(tensor_cores, "_probe", no_probe)
    monkeypatch.setenv(tensor_cores.ENV, value)
    assert tensor_cores.tensor_cores(gpu("NVIDIA CUDA")) == expected


def test_a_cache_file_that_is_not_json_is_ignored(fresh, monkeypatch, tmp_path):
    (tmp_path / tensor_cores.FILE_NAME).write_text("{not json")
    monkeypatch.setattr(tensor_cores, "_probe", lambda device, key: frozenset())
    assert tensor_cores.tensor_cores(gpu("NVIDIA CUDA")) == frozenset()


@pytest.mark.skipif(not opencl_available(), reason="no OpenCL device")
def test_this_machines_device_answers_quickly_and_without_crashing():
    """On PoCL or Oclgrind: no child process, no PTX, an immediate 'none'; on an NVIDIA GPU the
    probe's own answer (printed for the GPU run's log)."""
    from kuiper.opencl.device.runtime import OpenCLRuntime

    runtime = OpenCLRuntime.shared()
    start = time.perf_counter()
    found = tensor_cores.tensor_cores(runtime.device)
    print(f"{runtime.name}: tensor cores {tensor_cores.text(found)}")
    if "nvidia" not in runtime.device.platform.name.lower():
        assert found == frozenset()
        assert time.perf_counter() - start < 1.0


@pytest.mark.skipif(not opencl_available(), reason="no OpenCL device")
def test_the_probe_script_passes_with_the_emulated_kernel():
    """The probe's child process, its kernel built with -DMMA_EMULATED=1: the harness (build
    options, arguments, launch sizes, the exact comparison) works, so on the GPU only the
    instruction can fail it."""
    from kuiper.opencl.device.runtime import OpenCLRuntime

    device = OpenCLRuntime.shared().device
    found = tensor_cores._probe(device, "test", emulated=True)
    assert found == {"tf32", "fp16"}


def test_the_cost_model_offers_the_tensor_cores_only_where_they_are_and_asked_for():
    """A described H100 with tensor cores: a big product under tf32 / fp16 goes to gemm_mma of
    that precision (1.2x gemm_tiled at 4096^3 on an H200, cost.py); a small one is offered them
    too, and may stay on gemm_tiled; under fp32, or without tensor cores, or on a CPU, never."""
    h100 = fake_h100()
    h100.tensor_cores = ("tf32", "fp16")
    for precision in ("tf32", "fp16"):
        best = ranked_gemm_params(h100, 4096, 4096, 4096, precision=precision)[0]
        assert best["kernel"] == "gemm_mma" and mma_sets.precision_of(best) == precision
        small = ranked_gemm_params(h100, 512, 49, 4608, precision=precision)  # stage 4, b1
        assert any(p["kernel"] == "gemm_mma" and mma_sets.precision_of(p) == precision
                   for p in small)
    assert all(p["kernel"] != "gemm_mma" for p in ranked_gemm_params(h100, 4096, 4096, 4096))
    plain = fake_h100()
    assert all(p["kernel"] != "gemm_mma"
               for p in ranked_gemm_params(plain, 4096, 4096, 4096, precision="tf32"))
    assert all(p["kernel"] != "gemm_mma"
               for p in ranked_gemm_params(fake_two_core_cpu(), 512, 512, 512,
                                           precision="fp16"))


def test_emulated_tensor_cores_offer_the_emulated_sets_anywhere():
    cpu = fake_two_core_cpu()
    with mma_sets.emulated_tensor_cores():
        sets = [p for p in ranked_gemm_params(cpu, 512, 512, 512, precision="tf32")
                if p["kernel"] == "gemm_mma"]
    assert sets and all(p.get("MMA_EMULATED") for p in sets)
    assert not any(p["kernel"] == "gemm_mma"
                   for p in ranked_gemm_params(cpu, 512, 512, 512, precision="tf32"))
