"""A machine without OpenCL: the CPU backend works, and asking for OpenCL says how to get it.

Two ways a machine can lack OpenCL, both simulated here without touching the real drivers:
- pyopencl imports, but finds no platform. pyopencl's wheels carry their own ICD loader, which
  always also reads the drivers installed into pyopencl/.libs (PoCL, Oclgrind), so an empty
  OCL_ICD_VENDORS folder does NOT hide them; instead `pyopencl.get_platforms` is replaced, to
  raise what the loader raises with no driver (PLATFORM_NOT_FOUND_KHR) or to return [];
- pyopencl itself does not import: a folder first on PYTHONPATH holds a `pyopencl` package
  whose import fails (run in a fresh interpreter, since this one has imported the real one).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import kuiper
from kuiper.demo import DIGITS_PARAM, DIGITS_TEST
from kuiper.opencl.device import runtime
from kuiper.opencl.device.runtime import INSTALL_HINT, install_hint
from tests.unit.test_cli import assert_user_error

ROOT = Path(__file__).resolve().parents[2]

# Run at the top of a fresh interpreter: pyopencl finds no platform, as on a machine with no
# OpenCL driver. `how` is "raise" or "empty".
NO_PLATFORM = """
import pyopencl
def get_platforms():
    if {how!r} == "empty":
        return []
    raise pyopencl.LogicError("clGetPlatformIDs", -1001, "PLATFORM_NOT_FOUND_KHR")
pyopencl.get_platforms = get_platforms
"""
CLI = "import sys\nfrom kuiper.cli.main import main\nsys.exit(main(sys.argv[1:]))\n"


def run_python(args: list[str], code: str | None = None, pythonpath: Path | None = None
               ) -> subprocess.CompletedProcess:
    """`python -m kuiper ARGS`, or `python -c CODE ARGS`, from the repository root."""
    env = dict(os.environ)
    env.pop("PYOPENCL_CTX", None)
    env["PYTHONPATH"] = os.pathsep.join(
        str(p) for p in (pythonpath, ROOT, env.get("PYTHONPATH")) if p)
    cmd = [sys.executable] + (["-c", code] if code else ["-m", "kuiper"]) + args
    return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
                          check=False)


def demo_accuracy(graph) -> float:
    test = np.load(DIGITS_TEST)
    logits = graph.forward(test["images"])[0]
    return float(np.mean(np.argmax(logits, axis=1) == test["labels"]))


@pytest.fixture(params=["raise", "empty"])
def no_platform(request, monkeypatch):
    """pyopencl finds no OpenCL platform (in this process, until the test ends)."""
    import pyopencl

    def get_platforms():
        if request.param == "empty":
            return []
        raise pyopencl.LogicError("clGetPlatformIDs", -1001, "PLATFORM_NOT_FOUND_KHR")

    monkeypatch.setattr(pyopencl, "get_platforms", get_platforms)
    # runtimes other tests created stay shared per process: without this, a cached one would
    # be handed out without asking for platforms at all
    monkeypatch.setattr(runtime.OpenCLRuntime, "_shared", {})
    monkeypatch.delenv("PYOPENCL_CTX", raising=False)
    return request.param


@pytest.fixture(scope="module")
def no_pyopencl(tmp_path_factory) -> Path:
    """A folder to put first on PYTHONPATH: `import pyopencl` fails there."""
    folder = tmp_path_factory.mktemp("no-pyopencl")
    (folder / "pyopencl").mkdir()
    (folder / "pyopencl" / "__init__.py").write_text(
        'raise ImportError("simulated: no pyopencl on this machine")\n')
    return folder


# --- the hint itself ------------------------------------------------------------------------
def test_the_hint_fits_each_platform():
    linux_x86 = install_hint("linux", "x86_64")
    assert 'pip install "kuiper-engine[pocl]"' in linux_x86 and "vendor" in linux_x86
    assert 'pip install -e ".[pocl]"' in linux_x86
    for system, machine in (("darwin", "arm64"), ("win32", "AMD64"), ("linux", "aarch64")):
        hint = install_hint(system, machine)
        assert "[pocl]" not in hint, (system, machine, hint)
    assert "Apple" in install_hint("darwin", "arm64")
    assert "vendor" in install_hint("win32", "AMD64")
    aarch64 = install_hint("linux", "aarch64")
    assert "vendor" in aarch64 and "distribution" in aarch64
    assert INSTALL_HINT == install_hint()


# --- pyopencl imports, no platform ----------------------------------------------------------
def test_cpu_backend_runs_the_demo(no_platform):
    graph = kuiper.load(DIGITS_PARAM, input_shapes=[np.load(DIGITS_TEST)["images"].shape])
    assert demo_accuracy(graph) > 0.9


def test_opencl_backend_says_how_to_get_a_device(no_platform):
    with pytest.raises(kuiper.OpenCLUnavailableError) as info:
        kuiper.load(DIGITS_PARAM, backend="opencl")
    assert "no OpenCL platform found" in str(info.value)
    assert INSTALL_HINT in str(info.value)


@pytest.mark.parametrize("how", ["raise", "empty"])
@pytest.mark.parametrize("command", ["info", "run"])
def test_cli_with_opencl_is_a_clear_error(command, how):
    result = run_python([command, str(DIGITS_PARAM), "--backend", "opencl"],
                        code=NO_PLATFORM.format(how=how) + CLI)
    assert_user_error(result, "no OpenCL platform found", INSTALL_HINT)


def test_cli_on_the_cpu_runs():
    result = run_python(["run", str(DIGITS_PARAM)], code=NO_PLATFORM.format(how="raise") + CLI)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "cpu:" in result.stdout


# --- pyopencl does not import ---------------------------------------------------------------
def test_without_pyopencl_the_cpu_backend_runs_the_demo(no_pyopencl):
    code = f"""
import numpy as np
import kuiper
test = np.load({str(DIGITS_TEST)!r})
graph = kuiper.load({str(DIGITS_PARAM)!r}, input_shapes=[test["images"].shape])
accuracy = np.mean(np.argmax(graph.forward(test["images"])[0], axis=1) == test["labels"])
assert accuracy > 0.9, accuracy
try:
    kuiper.load({str(DIGITS_PARAM)!r}, backend="opencl")
except kuiper.OpenCLUnavailableError as e:
    print(e)
"""
    result = run_python([], code=code, pythonpath=no_pyopencl)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "pyopencl is not importable" in result.stdout and INSTALL_HINT in result.stdout


@pytest.mark.parametrize("command", ["info", "run"])
def test_without_pyopencl_the_cli_says_how_to_get_it(command, no_pyopencl):
    result = run_python([command, str(DIGITS_PARAM), "--backend", "opencl"],
                        pythonpath=no_pyopencl)
    assert_user_error(result, "pyopencl is not importable", "pip install pyopencl",
                      INSTALL_HINT)
    on_cpu = run_python([command, str(DIGITS_PARAM)], pythonpath=no_pyopencl)
    assert on_cpu.returncode == 0, on_cpu.stdout + on_cpu.stderr
