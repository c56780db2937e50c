"""16-wide vectors only where the device's compiler builds them
(kuiper/opencl/device/vector_width.py).

PoCL 3.0 on an AMD Zen 4 CPU aborts the process on float16/int16 code; Kuiper asks once, in a
child process, and then keeps the CPU kernels to 8-wide vectors there. These tests check the
answer's plumbing with stand-in devices, and on the suite's own device that no parameter set
or algorithm the selector offers needs what the device cannot build.
"""

from __future__ import annotations

import json
import os

import pytest

from kuiper.core.log import KuiperWarning
from kuiper.layers.opencl_conv import implicit_gemm as conv_implicit_gemm
from kuiper.layers.opencl_conv import selector as conv_select
from kuiper.layers.opencl_conv.algorithms import ALGORITHMS
from kuiper.layers.opencl_gemm import parameter_sets as gemm_params
from kuiper.opencl.device import vector_width
from kuiper.opencl.device.runtime import OpenCLRuntime
from kuiper.opencl.device.tuning_cache import device_key
from tests.conftest import opencl_available
from tests.opencl.conv_harness import make_problem, wide
from tests.opencl.probe_fakes import GPU, FakeDevice, no_probe

pytestmark = pytest.mark.skipif(not opencl_available(), reason="no OpenCL device")


@pytest.fixture
def fresh(fresh_probe):
    fresh_probe(vector_width)


def test_only_pocl_cpu_devices_are_asked(fresh, monkeypatch):
    monkeypatch.setattr(vector_width, "_probe", no_probe)
    assert vector_width.wide_vectors(FakeDevice("Oclgrind"))
    assert vector_width.wide_vectors(FakeDevice("Portable Computing Language", GPU))


@pytest.mark.parametrize("value,expected", [("8", False), ("16", True)])
def test_the_environment_variable_answers_without_asking(fresh, monkeypatch, value, expected):
    monkeypatch.setattr(vector_width, "_probe", no_probe)
    monkeypatch.setenv(vector_width.ENV, value)
    assert vector_width.wide_vectors(FakeDevice("Portable Computing Language")) is expected
    assert vector_width.width(FakeDevice("Portable Computing Language")) == int(value)


def test_an_answer_is_asked_once_then_kept_in_the_cache_and_environment(fresh, monkeypatch):
    asked = []

    def probe(device, key):
        asked.append(key)
        return False

    monkeypatch.setattr(vector_width, "_probe", probe)
    device = FakeDevice("Portable Computing Language")
    assert not vector_width.wide_vectors(device)
    assert not vector_width.wide_vectors(device)
    assert len(asked) == 1
    assert os.environ[vector_width.ENV] == "8"   # for child processes
    vector_width._save(asked[0], False)
    monkeypatch.setattr(vector_width, "_known", {})
    monkeypatch.delenv(vector_width.ENV)
    monkeypatch.setattr(vector_width, "_probe", no_probe)
    assert not vector_width.wide_vectors(device)             # from the cache folder


def test_a_failing_child_process_means_no_wide_vectors(fresh, monkeypatch):
    """What an abort of the compiler looks like from here: a non-zero exit, no "ok"."""
    monkeypatch.setattr(vector_width, "PROBE_SCRIPT", "import sys; sys.exit(134)")
    assert vector_width._probe(FakeDevice("Portable Computing Language"), "key") is False
    assert vector_width._load() == {"key": False}


@pytest.mark.parametrize("damage", ["fifo", "dev_zero", "deep", "digits", "not_bool", "list"])
def test_a_hostile_cache_file_is_ignored_with_a_warning(fresh, tmp_path, monkeypatch, damage):
    """A FIFO (a hang), /dev/zero (an endless read), nesting too deep, a 5,000-digit number or
    answers of the wrong type: ignored with a warning, the device asked again (issue 31)."""
    path = tmp_path / vector_width.FILE_NAME
    device = FakeDevice("Portable Computing Language")
    key = device_key(device)
    if damage == "fifo":
        os.mkfifo(path)
    elif damage == "dev_zero":
        path.symlink_to("/dev/zero")
    else:
        path.write_text({"deep": "[" * 100_000, "digits": '{"k": ' + "9" * 5000 + "}",
                         "not_bool": json.dumps({key: "yes"}), "list": "[true]"}[damage])
    asked = []
    monkeypatch.setattr(vector_width, "_probe", lambda device, key: asked.append(key) or True)
    with pytest.warns(KuiperWarning, match="vector-width cache .* cannot be used .* ignored"):
        assert vector_width.wide_vectors(device)
    assert len(asked) == 1


def test_nothing_offered_needs_vectors_the_device_cannot_build():
    device = OpenCLRuntime.shared().device
    ok = vector_width.wide_vectors(device)
    problem = make_problem((1, 32, 14, 14), (64, 32, 3, 3), padding=1)
    for name in conv_select.candidates(problem, device):
        for params in ALGORITHMS[name].parameter_sets(problem, device):
            assert ok or not wide(name, params), (name, params)
    for params in gemm_params.gemm_parameter_sets(device):
        assert ok or not wide("gemm", params), params
    for params in conv_implicit_gemm.device_sets(device):
        assert ok or not wide("implicit_gemm", params), params
    assert ("direct" in conv_select.candidates(problem, device)) == ok
