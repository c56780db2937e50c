"""Choosing an OpenCL device from PYOPENCL_CTX (or `device=` / `--device`) as pyopencl does.

pyopencl reads PYOPENCL_CTX as answers to "which platform?" and "which device(s)?", split at
':'; each answer is an index or a piece of the name, and an empty answer means the first. Kuiper
must accept every value pyopencl accepts and pick the same device (the first, when pyopencl would
pick several), and say which devices exist when a value matches nothing.

Most tests use made-up platforms (several platforms and devices, which this machine lacks); one
checks Kuiper against pyopencl's own choice on the machine's real platforms.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from kuiper.core.errors import OpenCLUnavailableError
from kuiper.opencl.device import runtime

PLATFORMS = {  # platform name, vendor -> device names
    ("Oclgrind", "Oclgrind"): ["Oclgrind Simulator"],
    ("Portable Computing Language", "The pocl project"): ["pthread-Xeon", "cpu-other"],
    ("NVIDIA CUDA", "NVIDIA Corporation"): ["NVIDIA H100", "NVIDIA A100"],
}


def fake_rows() -> list[tuple[str, str, object]]:
    """What runtime.list_devices() returns, for PLATFORMS."""
    rows = []
    for p, ((name, vendor), devices) in enumerate(PLATFORMS.items()):
        platform = SimpleNamespace(name=name, vendor=vendor)
        for d, device in enumerate(devices):
            dev = SimpleNamespace(name=device, platform=platform, type=0)
            rows.append((f"{p}:{d}", f"{name} / {device} (CPU)", dev))
    return rows


@pytest.fixture
def fake_platforms(monkeypatch):
    pytest.importorskip("pyopencl", reason="choose_device needs pyopencl's device types")
    monkeypatch.setattr(runtime, "list_devices", fake_rows)
    monkeypatch.delenv("PYOPENCL_CTX", raising=False)


@pytest.mark.parametrize("spec, expected", [
    ("2:1", "NVIDIA A100"),        # platform and device indices
    ("2", "NVIDIA H100"),          # a platform alone: its first device
    (":", "Oclgrind Simulator"),   # empty answers: the first platform, its first device
    (":1", None),                  # ...which has no device 1
    ("1:", "pthread-Xeon"),
    ("portable:1", "cpu-other"),   # a piece of the platform name, a device index
    ("1:pthread", "pthread-Xeon"),  # an index, a piece of the device name
    ("nvidia:a100", "NVIDIA A100"),  # pieces of both, any case
    ("2:1,0", "NVIDIA A100"),      # several devices: Kuiper uses the first named
    ("2:0,7", None),               # ...but every one must exist, as pyopencl demands
    ("9", None),                   # no platform 9, and no platform named "9"
    ("2:5", None),
    ("0:0:0", None),               # more answers than questions: pyopencl refuses it too
    ("H100", "NVIDIA H100"),       # Kuiper's own: a piece of a device name alone
    ("pocl", "pthread-Xeon"),      # ...or of the vendor
    ("no-such-device", None),
])
def test_device_spec(spec, expected, fake_platforms):
    if expected is None:
        with pytest.raises(OpenCLUnavailableError) as error:
            runtime.choose_device(spec)
        message = str(error.value)
        assert repr(spec) in message
        for index, label, _ in fake_rows():  # every device is listed, with its P:D
            assert f"{index}  {label.rsplit(' (', 1)[0]}" in message
    else:
        assert runtime.choose_device(spec).name == expected


def test_environment_variable_is_read_the_same_way(fake_platforms, monkeypatch):
    monkeypatch.setenv("PYOPENCL_CTX", "portable:0")
    assert runtime.choose_device().name == "pthread-Xeon"
    monkeypatch.setenv("PYOPENCL_CTX", "nowhere:0")
    with pytest.raises(OpenCLUnavailableError, match="PYOPENCL_CTX='nowhere:0'"):
        runtime.choose_device()
    # an explicit device= wins over the environment
    assert runtime.choose_device("2:1").name == "NVIDIA A100"


def test_empty_environment_variable_means_no_preference(fake_platforms, monkeypatch):
    # `PYOPENCL_CTX= kuiper ...` unsets it in effect: Kuiper's default choice, which skips
    # the Oclgrind simulator (listed first) for a real device.
    monkeypatch.setenv("PYOPENCL_CTX", "")
    assert runtime.choose_device().name != "Oclgrind Simulator"


def real_platforms():
    cl = pytest.importorskip("pyopencl", reason="pyopencl is needed to compare with it")
    try:
        platforms = cl.get_platforms()
    except cl.Error as e:
        pytest.skip(f"no OpenCL platform to compare on ({e})")
    if not platforms:
        pytest.skip("no OpenCL platform to compare on")
    return cl, platforms


def test_same_choice_as_pyopencl_on_this_machine(monkeypatch):
    cl, platforms = real_platforms()
    monkeypatch.delenv("PYOPENCL_CTX", raising=False)
    specs = ["", ":", "0", "0:0", ":0", "0:", str(len(platforms) - 1), "0:0,0", "9", "0:9", "a:0",
             "0:0:0", "nosuchplatform:0"]
    for p, platform in enumerate(platforms):
        word = platform.name.split()[0].lower()  # "portable", "oclgrind", "nvidia", ...
        specs += [f"{word}:0", f"{p}:{platform.get_devices()[0].name.split()[0][:6]}"]
    for spec in specs:
        try:
            theirs = cl.choose_devices(interactive=False, answers=spec.split(":"))[0]
        except Exception:  # noqa: BLE001 - pyopencl raises RuntimeError or cl.Error
            theirs = None
        ours = runtime.match_device_spec(spec, runtime.list_devices())
        if theirs is not None or ":" in spec:  # without ':' Kuiper also tries device names
            assert ours == theirs, (spec, ours, theirs)


def test_a_device_that_cannot_build_is_not_chosen_and_asking_for_it_says_why(fake_platforms,
                                                                           monkeypatch):
    """PoCL 3.0 on a CPU newer than its LLVM (an AMD Zen 5) fails every build with "unknown
    target CPU 'generic'": Kuiper's default choice passes it over, and asking for it is a clear
    OpenCLUnavailableError naming the device and the compiler's complaint."""
    complaint = "error: unknown target CPU 'generic'"
    monkeypatch.setattr(runtime, "why_it_cannot_build",
                        lambda dev: complaint if dev.name.startswith(("pthread", "cpu-")) else None)
    assert runtime.choose_device().name == "NVIDIA H100"
    with pytest.raises(OpenCLUnavailableError, match="pthread-Xeon cannot compile.*generic"):
        runtime.choose_device("portable:0")
    # nothing else usable (the simulator is never a default): the error says why, not "none"
    monkeypatch.setattr(runtime, "why_it_cannot_build",
                        lambda dev: None if "Oclgrind" in dev.name else complaint)
    with pytest.raises(OpenCLUnavailableError,
                       match="cannot compile OpenCL C.*does not know this CPU.*NumPy backend"):
        runtime.choose_device()
    assert runtime.choose_device("oclgrind").name == "Oclgrind Simulator"


def test_the_build_probe_answers_none_for_a_device_it_does_not_ask():
    """Only PoCL's CPU devices are probed (a GPU's build costs more to probe, and the known
    failure is PoCL's); a stand-in device without a platform is not either."""
    assert runtime.why_it_cannot_build(SimpleNamespace(name="NVIDIA H100", platform=None,
                                                       type=0)) is None


def test_a_gpu_is_chosen_without_building_on_pocl(fake_platforms, monkeypatch):
    """Devices are probed in the order of preference, so a GPU machine's process never pays
    for a PoCL context and build it does not use."""
    import pyopencl as cl

    rows = fake_rows()
    for _, label, dev in rows:
        if "NVIDIA" in label:
            dev.type = cl.device_type.GPU
    monkeypatch.setattr(runtime, "list_devices", lambda: rows)
    asked = []
    monkeypatch.setattr(runtime, "why_it_cannot_build", lambda dev: asked.append(dev.name))
    assert runtime.choose_device().name == "NVIDIA H100"
    assert asked == ["NVIDIA H100"]
