"""The command line, as a user runs it: `python -m kuiper ...` in a subprocess.

One tiny classifier (conv -> relu -> global pool -> linear, 3-channel 8x8 input, 5 classes) is
exported with pnnx once per session; every command runs on it. Expected values come from
PyTorch (the module itself), never from Kuiper's own output.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from kuiper.testing import assert_close
from tests.conftest import opencl_available

ROOT = Path(__file__).resolve().parents[2]
MODEL_SHAPE = (1, 3, 8, 8)
CLASSES = 5


def kuiper_cli(*args: str, env: dict | None = None, code: str | None = None
               ) -> subprocess.CompletedProcess:
    """Run `python -m kuiper ARGS` (or `python -c CODE ARGS`) from the repository root."""
    cmd = [sys.executable] + (["-c", code] if code else ["-m", "kuiper"]) + list(args)
    full_env = dict(os.environ, **(env or {}))
    full_env["PYTHONPATH"] = os.pathsep.join([str(ROOT), full_env.get("PYTHONPATH", "")])
    return subprocess.run(cmd, cwd=ROOT, env=full_env, capture_output=True, text=True,
                          timeout=300, check=False)


def assert_user_error(result: subprocess.CompletedProcess, *fragments: str) -> None:
    """Exit status 1, one `kuiper: error:` line with the fragments, and no traceback."""
    assert result.returncode == 1, (result.returncode, result.stdout, result.stderr)
    assert result.stderr.startswith("kuiper: error: "), result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    for fragment in fragments:
        assert fragment in result.stderr, (fragment, result.stderr)


def tiny_classifier():
    from torch import nn

    class Tiny(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 4, kernel_size=3, padding=1)
            self.relu = nn.ReLU()
            self.pool = nn.AdaptiveAvgPool2d(1)
            self.fc = nn.Linear(4, CLASSES)

        def forward(self, x):
            return self.fc(self.pool(self.relu(self.conv(x))).flatten(1))

    import torch
    torch.manual_seed(0)
    return Tiny().eval()


@pytest.fixture(scope="module")
def tiny(export_model):
    """(param path, torch module) of the tiny classifier."""
    import torch

    module = tiny_classifier()
    path = export_model("cli_tiny_classifier", module, torch.zeros(MODEL_SHAPE))
    return path, module


def torch_forward(module, x: np.ndarray) -> np.ndarray:
    import torch

    with torch.no_grad():
        return module(torch.from_numpy(x)).numpy()


# --- parser and errors ----------------------------------------------------------------------
def test_help_lists_every_command():
    result = kuiper_cli("--help")
    assert result.returncode == 0, result.stderr
    for command in ("info", "run", "ops", "devices", "demo", "bench"):
        assert command in result.stdout


def run_main(capsys, *args: str) -> subprocess.CompletedProcess:
    """`kuiper ARGS` in this process (faster; for the many error cases)."""
    from kuiper.cli.main import main

    try:
        code = main(list(args))
    except SystemExit as e:  # argparse exits on usage errors
        code = e.code
    out, err = capsys.readouterr()
    return subprocess.CompletedProcess(["kuiper", *args], code, out, err)


def test_usage_errors_exit_2(capsys):
    assert kuiper_cli().returncode == 2                      # no command
    assert run_main(capsys, "frobnicate").returncode == 2    # unknown command
    result = run_main(capsys, "info", "m.pnnx.param", "--input-shape", "1xfoo")
    assert result.returncode == 2 and "1x3x224x224" in result.stderr
    result = run_main(capsys, "bench", "m.pnnx.param", "--against", "tensorflow")
    assert result.returncode == 2 and "tensorflow" in result.stderr


def test_missing_and_broken_model_files_are_errors(tmp_path, capsys):
    assert_user_error(run_main(capsys, "info", str(tmp_path / "nope.pnnx.param")),
                      "file not found")
    bad = tmp_path / "bad.pnnx.param"
    bad.write_text("hello\n")
    assert_user_error(kuiper_cli("run", str(bad)), "line 1", "7767517")


# --- info, run ------------------------------------------------------------------------------
def test_info(tiny):
    path, _ = tiny
    result = kuiper_cli("info", str(path))
    assert result.returncode == 0, result.stderr
    for fragment in ("nn.Conv2d", "nn.Linear", "1x4x8x8 float32", "1x5 float32",
                     f"{4 * 3 * 9 + 4 + 4 * CLASSES + CLASSES} parameters", "FLOPs"):
        assert fragment in result.stdout, (fragment, result.stdout)


def test_info_at_another_input_size(tiny):
    result = kuiper_cli("info", str(tiny[0]), "--input-shape", "2x3x5x7")
    assert result.returncode == 0, result.stderr
    assert "2x4x5x7 float32" in result.stdout and "2x5 float32" in result.stdout


def test_run_npy_matches_torch_and_prints_top5(backend, tiny, tmp_path, rng):
    path, module = tiny
    x = rng.standard_normal((2, 3, 8, 8)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    result = kuiper_cli("run", str(path), "--input", str(tmp_path / "x.npy"), "--output",
                        str(tmp_path / "y.npy"), "--backend", backend)
    assert result.returncode == 0, result.stderr
    assert_close(np.load(tmp_path / "y.npy"), torch_forward(module, x))
    assert "2x5 float32" in result.stdout
    assert result.stdout.count("top-5") == 2  # one line per sample
    probs = np.exp(torch_forward(module, x)[0].astype(np.float64))
    probs /= probs.sum()
    best = int(probs.argmax())
    assert f"class {best} {probs[best]:.1%}" in result.stdout


def test_run_image_is_resized_and_imagenet_normalised(tiny, tmp_path):
    from PIL import Image

    path, module = tiny
    # A uniform image stays uniform under any resize, so the expected input is known exactly.
    rgb = (255, 0, 128)
    Image.new("RGB", (30, 20), rgb).save(tmp_path / "pic.png")
    mean, std = np.array([0.485, 0.456, 0.406]), np.array([0.229, 0.224, 0.225])
    expected_x = np.broadcast_to(((np.array(rgb) / 255 - mean) / std)[None, :, None, None],
                                 MODEL_SHAPE).astype(np.float32)
    result = kuiper_cli("run", str(path), "--input", str(tmp_path / "pic.png"), "--output",
                        str(tmp_path / "y.npz"))
    assert result.returncode == 0, result.stderr
    saved = np.load(tmp_path / "y.npz")
    assert_close(saved[saved.files[0]], torch_forward(module, expected_x))


def test_image_for_a_one_channel_model_is_plain_grey(tmp_path):
    from PIL import Image

    from kuiper.graph.runtime_graph import Port
    from kuiper.io.inputs import load_image

    Image.new("L", (16, 16), 51).save(tmp_path / "g.png")
    x = load_image(tmp_path / "g.png", Port("in", (1, 1, 8, 8), np.dtype(np.float32)))
    assert x.shape == (1, 1, 8, 8) and x.dtype == np.float32
    np.testing.assert_allclose(x, 51 / 255, rtol=1e-6)


def test_run_input_errors(tiny, tmp_path, capsys):
    path, _ = tiny
    np.save(tmp_path / "x.npy", np.zeros((1, 3, 8), np.float32))
    assert_user_error(kuiper_cli("run", str(path), "--input", str(tmp_path / "x.npy")),
                      "should be 4-D")
    assert_user_error(run_main(capsys, "run", str(path), "--input", str(tmp_path / "x.npy"),
                               "--input", str(tmp_path / "x.npy")), "1 input(s)", "got 2")
    (tmp_path / "x.txt").write_text("1 2 3")
    assert_user_error(run_main(capsys, "run", str(path), "--input", str(tmp_path / "x.txt")),
                      "expected a .npy array or an image")
    assert_user_error(run_main(capsys, "run", str(path), "--input", str(tmp_path / "none.npy")),
                      "file not found")
    assert_user_error(run_main(capsys, "run", str(path), "--output", str(tmp_path / "y.txt")),
                      "use a .npy or .npz")


# --- ops, devices ---------------------------------------------------------------------------
def test_ops_table():
    result = kuiper_cli("ops")
    assert result.returncode == 0, result.stderr
    rows = {line.split()[0]: line.split()[1:] for line in result.stdout.splitlines()
            if line.strip()}
    assert rows["nn.ReLU"][:2] == ["yes", "yes"]
    assert rows["pnnx.Attribute"][:2] == ["yes", "folded"]
    only_cl = kuiper_cli("ops", "--backend", "opencl")
    assert only_cl.returncode == 0 and "pnnx.Attribute" not in only_cl.stdout


@pytest.mark.skipif(not opencl_available(), reason="no OpenCL device to list")
def test_devices_marks_the_default():
    result = kuiper_cli("devices")
    assert result.returncode == 0, result.stderr
    marked = [line for line in result.stdout.splitlines() if line.startswith("*  ")]
    assert len(marked) == 1, result.stdout
    # a PYOPENCL_CTX that matches nothing: the list is still shown, with no default
    result = kuiper_cli("devices", env={"PYOPENCL_CTX": "no-such-device"})
    assert result.returncode == 0 and "no default device" in result.stdout


def test_devices_without_any_opencl_platform(monkeypatch, capsys):
    # In process: hiding the platforms from the real OpenCL loader is not portable.
    from kuiper.cli import main as cli
    from kuiper.opencl.device import runtime

    monkeypatch.setattr(runtime, "list_devices", list)
    assert cli.main(["devices"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("kuiper: error: no OpenCL platform found")
    assert runtime.INSTALL_HINT in err  # what to install depends on the platform


# --- demo -----------------------------------------------------------------------------------
def test_demo_agrees_with_torch(backend):
    result = kuiper_cli("demo", "--backend", backend, "--show", "3")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "360/360 predictions identical" in result.stdout
    assert "accuracy 9" in result.stdout  # > 90%: the model is trained
    assert "label:" in result.stdout


def test_demo_needs_neither_torch_nor_sklearn():
    code = ("import sys\n"
            "for m in ('torch', 'sklearn', 'pnnx', 'onnxruntime'): sys.modules[m] = None\n"
            "from kuiper.cli.main import main\nsys.exit(main(sys.argv[1:]))")
    result = kuiper_cli("demo", "--show", "0", code=code)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "OK: Kuiper and PyTorch agree" in result.stdout


def test_demo_pictures():
    from kuiper.demo.digits import ASCII_SHADES, pick_examples, render_digit, render_row

    image = np.zeros((8, 8), np.float32)
    image[2:6, 3] = 1.0
    lines = render_digit(image)
    assert len(lines) == 8 and all(len(line) == 16 for line in lines)
    assert lines[3][6:8] == "██" and lines[0] == " " * 16
    assert render_digit(image, ASCII_SHADES)[3][6:8] == "##"
    row = render_row([image, image], [["a"], ["b"]]).splitlines()
    assert len(row) == 9 and row[-1].split() == ["a", "b"]
    # mistakes get shown: 2 of 6 pictures when there are mistakes to show
    labels = np.arange(20) % 10
    predictions = labels.copy()
    predictions[[7, 15]] = 0
    assert pick_examples(predictions, labels, 6) == [0, 1, 2, 3, 7, 15]


# --- bench ----------------------------------------------------------------------------------
def test_bench_with_references(tiny):
    backends = "cpu,opencl" if opencl_available() else "cpu"
    result = kuiper_cli("bench", str(tiny[0]), "--backends", backends,
                        "--against", "torch,onnxruntime", "--trust-model-code", "--repeat", "2",
                        "--warmup", "1")
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    table = [line for line in out.splitlines() if line.startswith(("kuiper ", "torch ",
                                                                   "onnxruntime "))]
    # one row per backend, OpenCL's again with its data on the device, then the two references
    device_io = [line for line in table if line.startswith("kuiper opencl, device I/O")]
    assert len(device_io) == (backends == "cpu,opencl"), out
    assert len(table) == len(backends.split(",")) + len(device_io) + 2, out
    assert "1.00x" in next(line for line in table if line.startswith("torch"))
    assert "per-operator time" in out and "nn.Conv2d" in out
    # by kind, onnxruntime's own profile beside Kuiper's (kuiper/bench/kinds.py)
    kinds = out[out.index("time by kind of operator"):].splitlines()
    assert "onnxruntime" in kinds[1] and kinds[1].split()[:3] == ["kind", "kuiper", "cpu"], out
    conv = next(line for line in kinds if line.startswith("conv other"))
    assert all(float(v) > 0 for v in conv.split()[2:]), conv
    if backends == "cpu,opencl":   # the device's busy time, and the gaps between its kernels
        gaps = re.search(r"launches of kuiper opencl: (\d+) kernels per inference, ([\d.]+) ms of "
                         r"kernel time in ([\d.]+) ms from the first start to the last end: "
                         r"([\d.]+) ms \(\d+%\) between kernels, median gap ([\d.]+) us", out)
        assert gaps, out
        launches, busy, span, idle, _ = map(float, gaps.groups())
        assert launches >= 1 and 0 < busy <= span, gaps.group(0)
        assert idle == pytest.approx(span - busy, abs=2e-3), gaps.group(0)
    for line in table:  # max |diff| against kuiper cpu: every column computed the same thing
        diff = re.search(r"\d\.\d\dx\s+(\S+)", line)
        assert diff and float(diff.group(1)) < 1e-4, line


def test_bench_skips_missing_references():
    code = ("import sys\nsys.modules['torch'] = None\n"
            "from kuiper.cli.main import main\nsys.exit(main(sys.argv[1:]))")
    result = kuiper_cli("bench", "kuiper/demo/digits.pnnx.param", "--backends", "cpu",
                        "--against", "torch,onnxruntime", "--repeat", "2", "--warmup", "0",
                        "--top", "0", code=code)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "torch: skipped, torch is not installed (pip install torch==2.13.0)" in result.stdout
    assert "onnxruntime: skipped, no digits.onnx beside the model" in result.stdout
    assert "kuiper cpu" in result.stdout


def test_bench_bad_repeat(capsys):
    assert_user_error(run_main(capsys, "bench", "kuiper/demo/digits.pnnx.param", "--repeat",
                               "0"), "--repeat")
