"""Every everyday mistake on the command line gets one `kuiper: error: ...` line, never a traceback.

Each command (info, run, bench, compare, ops, course, devices) is given bad paths and bad files:
missing, a folder, a symlink loop, an empty file, a device that reads forever (/dev/zero), a
named pipe, a wrong extension, the weights (.pnnx.bin) where the model (.pnnx.param) belongs.
Each case checks the exit status (2 for a usage error, 1 for anything else), that stderr holds a
`kuiper: error:` line saying what was wrong, and that no "Traceback" appears.

Most cases run the CLI in this process (`main(argv)`, fast); a few run `python -m kuiper` in a
subprocess, as a user does, to check the real exit status and streams. The model is the digits
demo's small CNN shipped with Kuiper (1x1x8x8 input), copied to a folder of its own.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "kuiper" / "demo"
FAST_BENCH = ("--backends", "cpu", "--repeat", "1", "--warmup", "0", "--top", "0")
ON_POSIX = os.name == "posix"


# --- running the CLI ----------------------------------------------------------------------------
def run_main(capsys, *args: str) -> subprocess.CompletedProcess:
    """`kuiper ARGS` in this process; argparse's SystemExit becomes the exit status."""
    from kuiper.cli.main import main

    try:
        code = main(list(args))
    except SystemExit as e:
        code = e.code
    out, err = capsys.readouterr()
    return subprocess.CompletedProcess(["kuiper", *args], code, out, err)


def run_subprocess(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    full_env = dict(os.environ, **(env or {}))
    full_env["PYTHONPATH"] = os.pathsep.join([str(ROOT), full_env.get("PYTHONPATH", "")])
    return subprocess.run([sys.executable, "-m", "kuiper", *args], cwd=ROOT, env=full_env,
                          capture_output=True, text=True, timeout=300, check=False)


def assert_error(result: subprocess.CompletedProcess, status: int, *fragments: str) -> str:
    """Exit `status`, a `kuiper: error:` line holding every fragment, no traceback anywhere.

    Returns the error line."""
    everything = result.stdout + result.stderr
    assert result.returncode == status, (result.returncode, everything)
    assert "Traceback" not in everything, everything
    lines = [line for line in result.stderr.splitlines() if line.startswith("kuiper: error: ")]
    assert len(lines) == 1, result.stderr
    for fragment in fragments:
        assert fragment.lower() in lines[0].lower(), (fragment, lines[0])
    return lines[0]


# --- files --------------------------------------------------------------------------------------
@pytest.fixture
def model(tmp_path) -> Path:
    """The digits model in a folder of its own, without pnnx's digits_pnnx.py."""
    folder = tmp_path / "model"
    folder.mkdir()
    for name in ("digits.pnnx.param", "digits.pnnx.bin"):
        shutil.copy(DEMO / name, folder / name)
    return folder / "digits.pnnx.param"


# Bad files, each made under a given name (its extension matters: a .npy, a .txt, a .param...).
BAD_KINDS = ("missing", "directory", "symlink_loop", "empty", "device", "fifo")


def make_bad(kind: str, path: Path) -> Path:
    if kind == "directory":
        path.mkdir()
    elif kind == "symlink_loop":
        other = path.with_name(path.name + ".other")
        os.symlink(other, path)
        os.symlink(path, other)
    elif kind == "empty":
        path.write_bytes(b"")
    elif kind == "device":  # reads zeros forever: a reader must refuse it, not slurp it
        if not os.path.exists("/dev/zero"):
            pytest.skip("no /dev/zero on this system")
        os.symlink("/dev/zero", path)
    elif kind == "fifo":  # open() for reading blocks until a writer comes: must not hang
        if not hasattr(os, "mkfifo"):
            pytest.skip("no named pipes on this system")
        os.mkfifo(path)
    return path


# What the error line says for each kind (any one of the words will do).
SAYS = {"missing": ("not found",), "directory": ("directory", "folder"),
        "symlink_loop": ("symbolic link", "cannot be opened"), "device": ("not a regular file",),
        "fifo": ("not a regular file",)}


def assert_says(line: str, kind: str) -> None:
    words = SAYS.get(kind)
    if words:
        assert any(w in line.lower() for w in words), (kind, line)


# --- the model argument -------------------------------------------------------------------------
MODEL_COMMANDS = {"info": (), "run": (), "bench": FAST_BENCH, "compare": ("--backends", "cpu")}


@pytest.mark.parametrize("command", MODEL_COMMANDS)
@pytest.mark.parametrize("kind", BAD_KINDS)
def test_bad_model_path(command, kind, tmp_path, capsys):
    bad = make_bad(kind, tmp_path / "bad.pnnx.param")
    line = assert_error(run_main(capsys, command, str(bad), *MODEL_COMMANDS[command]), 1,
                        "bad.pnnx.param")
    assert_says(line, kind)
    if kind == "empty":
        assert "7767517" in line or "empty" in line


@pytest.mark.parametrize("command", MODEL_COMMANDS)
def test_weights_given_as_the_model(command, model, capsys):
    bin_path = model.with_name("digits.pnnx.bin")
    assert_error(run_main(capsys, command, str(bin_path), *MODEL_COMMANDS[command]), 1,
                 "weight file", "digits.pnnx.param")


@pytest.mark.parametrize("name", ["model.onnx", "model.pt", "model.ncnn.param"])
def test_other_frameworks_models_are_named(name, tmp_path, capsys):
    (tmp_path / name).write_bytes(b"\x08\x07")
    assert_error(run_main(capsys, "info", str(tmp_path / name)), 1, "not a PNNX model", "pnnx")


@pytest.mark.parametrize("command", MODEL_COMMANDS)
def test_text_file_of_the_wrong_kind(command, tmp_path, capsys):
    notes = tmp_path / "notes.txt"
    notes.write_text("hello\n")
    assert_error(run_main(capsys, command, str(notes), *MODEL_COMMANDS[command]), 1,
                 "notes.txt", "7767517")


@pytest.mark.parametrize("kind", ["missing", "directory", "symlink_loop", "empty", "device"])
def test_bad_weights_beside_the_model(kind, model, capsys):
    bin_path = model.with_name("digits.pnnx.bin")
    bin_path.unlink()
    make_bad(kind, bin_path)
    line = assert_error(run_main(capsys, "info", str(model)), 1, "digits.pnnx.bin")
    assert_says(line, kind)


# --- file options: --input, --labels, --output ------------------------------------------------
@pytest.mark.parametrize("command", ["run", "compare"])
@pytest.mark.parametrize("kind", BAD_KINDS)
def test_bad_input_file(command, kind, model, tmp_path, capsys):
    bad = make_bad(kind, tmp_path / "x.npy")
    extra = ("--backends", "cpu") if command == "compare" else ()
    line = assert_error(run_main(capsys, command, str(model), "--input", str(bad), *extra), 1,
                        "x.npy")
    assert_says(line, kind)
    if kind == "empty":
        assert "not a plain NumPy array file" in line


@pytest.mark.parametrize("command", ["run", "compare"])
def test_input_of_an_unknown_kind_names_the_accepted_ones(command, model, tmp_path, capsys):
    text = tmp_path / "x.csv"
    text.write_text("1,2,3\n")
    extra = ("--backends", "cpu") if command == "compare" else ()
    assert_error(run_main(capsys, command, str(model), "--input", str(text), *extra), 1,
                 "x.csv", ".npy", ".png")


@pytest.mark.parametrize("command", ["run", "compare"])
def test_damaged_image(command, model, tmp_path, capsys):
    pytest.importorskip("PIL", reason="images need Pillow")
    cat = tmp_path / "cat.png"
    cat.write_bytes(b"\x89PNG not really")
    extra = ("--backends", "cpu") if command == "compare" else ()
    assert_error(run_main(capsys, command, str(model), "--input", str(cat), *extra), 1,
                 "cat.png", "not an image")


def test_compare_takes_an_image_as_run_does(model, tmp_path, capsys):
    image = pytest.importorskip("PIL.Image", reason="images need Pillow")
    path = tmp_path / "seven.png"
    image.fromarray(np.full((16, 16), 200, np.uint8)).save(path)
    result = run_main(capsys, "compare", str(model), "--input", str(path), "--backends", "cpu")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "features.0" in result.stdout


def test_npz_archive_named_npy(model, tmp_path, capsys):
    fake = tmp_path / "x.npy"
    with open(fake, "wb") as f:  # np.savez would add .npz to the name
        np.savez(f, a=np.zeros(3))
    assert_error(run_main(capsys, "run", str(model), "--input", str(fake)), 1, "np.save")


def test_weights_given_as_an_input(model, capsys):
    assert_error(run_main(capsys, "run", str(model), "--input",
                          str(model.with_name("digits.pnnx.bin"))), 1, "expected a .npy array")


@pytest.mark.parametrize("kind", ["missing", "directory", "symlink_loop", "device", "fifo"])
def test_bad_labels_file(kind, model, tmp_path, capsys):
    bad = make_bad(kind, tmp_path / "labels.txt")
    line = assert_error(run_main(capsys, "run", str(model), "--labels", str(bad)), 1,
                        "labels.txt", "class names")
    assert_says(line, kind)
    assert "input  " not in capsys.readouterr().out  # refused before the model ran


def test_binary_labels_file(model, capsys):
    assert_error(run_main(capsys, "run", str(model), "--labels",
                          str(model.with_name("digits.pnnx.bin"))), 1, "not a UTF-8 text file")


def test_output_errors(model, tmp_path, capsys):
    assert_error(run_main(capsys, "run", str(model), "--output",
                          str(tmp_path / "no" / "such" / "folder" / "y.npy")), 1,
                 "does not exist", "create it")
    (tmp_path / "y.npy").mkdir()
    assert_error(run_main(capsys, "run", str(model), "--output", str(tmp_path / "y.npy")), 1,
                 "is a folder")
    assert_error(run_main(capsys, "run", str(model), "--output", str(tmp_path / "y.txt")), 1,
                 ".npy or .npz")
    # and a good one works
    result = run_main(capsys, "run", str(model), "--output", str(tmp_path / "out.npz"))
    assert result.returncode == 0, result.stderr
    assert np.load(tmp_path / "out.npz")["9"].shape == (1, 10)


# --- sizes and shapes ---------------------------------------------------------------------------
def test_huge_input_shape_is_refused_before_allocating(model, capsys):
    # 1 x 1 x 100000 x 100000 float32 = 40 GB: refused with the size, nothing allocated
    line = assert_error(run_main(capsys, "run", str(model), "--input-shape", "1x1x100000x100000"),
                        1, "40,000,000,000 bytes")
    assert "limit" in line


def test_random_inputs_refuse_a_huge_shape_themselves():
    from kuiper.core.errors import ResourceError
    from kuiper.graph.runtime_graph import Port
    from kuiper.io.inputs import random_inputs

    port = Port("x", (1, 3, 100000, 100000), np.dtype(np.float32))
    with pytest.raises(ResourceError, match="120,000,000,000 bytes"):
        random_inputs([port])


@pytest.mark.parametrize("how", ["input-shape", "input"])
def test_wrong_channel_count_says_what_the_model_expects(how, model, tmp_path, capsys):
    if how == "input":
        np.save(tmp_path / "x.npy", np.zeros((1, 3, 8, 8), np.float32))
        args = ("--input", str(tmp_path / "x.npy"))
    else:
        args = ("--input-shape", "1x3x8x8")
    line = assert_error(run_main(capsys, "run", str(model), *args), 1, "1 channel")
    assert "re-export the model" not in line  # a re-export cannot change the weights


# --- usage errors (exit 2) ----------------------------------------------------------------------
def test_no_option_abbreviations(model, capsys):
    # `--input` is not `--input-shape` for bench (which has no --input): an unknown option
    line = assert_error(run_main(capsys, "bench", str(model), "--input", "x.npy", *FAST_BENCH), 2,
                        "unrecognized arguments: --input")
    assert "bad shape" not in line
    assert_error(run_main(capsys, "info", str(model), "--input-sh", "1x1x8x8"), 2,
                 "unrecognized arguments")
    assert_error(run_main(capsys, "run", str(model), "--lab", "x.txt"), 2, "--lab")


@pytest.mark.parametrize("command", ["bench", "compare"])
def test_empty_or_unknown_backends(command, model, capsys):
    assert_error(run_main(capsys, command, str(model), "--backends", ""), 2, "--backends",
                 "cpu, opencl")
    assert_error(run_main(capsys, command, str(model), "--backends", "cuda"), 2, "cuda",
                 "cpu, opencl")


def test_compare_unknown_reference_is_a_usage_error(model, capsys):
    assert_error(run_main(capsys, "compare", str(model), "--against", "tensorflow"), 2,
                 "unknown reference tensorflow")


@pytest.mark.parametrize("rtol", ["nan", "-1", "inf", "tight"])
def test_compare_bad_tolerance(rtol, model, capsys):
    assert_error(run_main(capsys, "compare", str(model), "--rtol", rtol), 2, "--rtol", ">= 0")


def test_bad_shape_text(model, capsys):
    assert_error(run_main(capsys, "run", str(model), "--input-shape", "1x0x8x8"), 2,
                 "positive integer")


# --- model code is run only when asked for ------------------------------------------------------
@pytest.fixture
def model_with_code(model) -> Path:
    """The model, with a digits_pnnx.py that leaves a mark when anything runs it."""
    model.with_name("digits_pnnx.py").write_text(
        "from pathlib import Path\nPath(__file__).with_name('CODE_RAN').write_text('yes')\n"
        "raise SystemExit('this model code must not run')\n")
    return model


def test_no_command_runs_model_code_unasked(model_with_code, capsys):
    marker = model_with_code.with_name("CODE_RAN")
    pytest.importorskip("onnxruntime", reason="the onnxruntime column needs onnxruntime")
    for args in (("info",), ("run",), ("compare", "--backends", "cpu"),
                 ("bench", *FAST_BENCH, "--against", "onnxruntime")):
        result = run_main(capsys, args[0], str(model_with_code), *args[1:])
        assert result.returncode == 0, (args, result.stdout + result.stderr)
        assert not marker.exists(), f"`kuiper {' '.join(args)}` ran digits_pnnx.py"
    # the bench says what is missing and which flag would export one from the module
    assert "no digits.onnx beside the model" in result.stdout
    assert "--trust-model-code" in result.stdout


@pytest.mark.parametrize("kind", ["directory", "symlink_loop", "broken", "exits"])
def test_compare_against_a_bad_torch_module(kind, model, capsys):
    pytest.importorskip("torch", reason="--against torch needs PyTorch")
    module = model.with_name("digits_pnnx.py")
    if kind == "broken":
        module.write_text("def Model(:\n")
    elif kind == "exits":  # the user's file may do anything: it must not end Kuiper quietly
        module.write_text("raise SystemExit(3)\n")
    else:
        make_bad(kind, module)
    assert_error(run_main(capsys, "compare", str(model), "--backends", "cpu", "--against",
                          "torch"), 1, "digits_pnnx.py")


def test_help_says_which_options_run_model_code(capsys):
    bench = run_main(capsys, "bench", "-h")
    assert bench.returncode == 0
    assert "--trust-model-code" in bench.stdout and "_pnnx.py" in bench.stdout
    compare = run_main(capsys, "compare", "-h")
    assert compare.returncode == 0 and "RUNS the Python file" in compare.stdout


# --- ops, course, devices -----------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["missing", "directory", "device", "fifo"])
def test_ops_bad_plugin_path(kind, tmp_path, capsys):
    bad = make_bad(kind, tmp_path / "myplugin.py")
    assert_error(run_main(capsys, "ops", "--plugin", str(bad)), 1, "myplugin.py", "PLUGINS.md")


def test_ops_plugin_symlink_loop(tmp_path, capsys):
    bad = make_bad("symlink_loop", tmp_path / "myplugin.py")
    assert_error(run_main(capsys, "ops", "--plugin", str(bad)), 1, "myplugin.py",
                 "cannot be resolved")


def test_ops_missing_plugin_file_says_so(tmp_path, capsys):
    assert_error(run_main(capsys, "ops", "--plugin", str(tmp_path / "nothere.py")), 1,
                 "nothere.py", "does not exist")


def test_ops_plugin_folder_without_init(tmp_path, capsys, monkeypatch):
    (tmp_path / "adir").mkdir()
    (tmp_path / "adir" / "layers.py").write_text("raise SystemExit('never imported')\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    assert_error(run_main(capsys, "ops", "--plugin", "adir"), 1, "adir",
                 "without __init__.py")


def test_ops_plugin_that_is_not_python(model, capsys):
    weights = model.with_name("weights.py")
    shutil.copy(model.with_name("digits.pnnx.bin"), weights)
    assert_error(run_main(capsys, "ops", "--plugin", str(weights)), 1, "weights.py")


@pytest.mark.parametrize("kind", ["missing", "empty", "symlink_loop", "device"])
def test_course_dir_that_is_not_a_folder(kind, tmp_path, monkeypatch, capsys):
    bad = make_bad(kind, tmp_path / "course_notes")
    monkeypatch.setenv("KUIPER_COURSE_DIR", str(bad))
    line = assert_error(run_main(capsys, "course", "list"), 1, "course_notes",
                        "KUIPER_COURSE_DIR")
    assert ("not found" in line) == (kind == "missing")


def test_course_bad_lesson(capsys):
    assert_error(run_main(capsys, "course", "check", "99"), 1, "no lesson 99")
    assert_error(run_main(capsys, "course", "check", "one"), 2, "invalid int value")


def test_opencl_device_that_matches_nothing(model, capsys):
    from tests.conftest import opencl_available

    if not opencl_available():
        pytest.skip("no OpenCL device: the error would be about the missing driver instead")
    line = assert_error(run_main(capsys, "run", str(model), "--backend", "opencl", "--device",
                                 "no-such-gpu"), 1, "no-such-gpu", "1:0")
    assert "PYOPENCL_CTX" in line


# --- as a user runs it: a subprocess ------------------------------------------------------------
def test_subprocess_model_errors(model, tmp_path):
    assert_error(run_subprocess("info", str(tmp_path / "nope.pnnx.param")), 1, "not found")
    zero = make_bad("device", tmp_path / "zero.pnnx.param")
    assert_error(run_subprocess("run", str(zero)), 1, "not a regular file")
    loop = make_bad("symlink_loop", tmp_path / "loop.pnnx.param")
    assert_error(run_subprocess("compare", str(loop), "--backends", "cpu"), 1, "loop.pnnx.param")


def test_subprocess_usage_error(model):
    result = run_subprocess("bench", str(model), "--input", "x.npy")
    assert_error(result, 2, "bench: unrecognized arguments: --input x.npy", "kuiper bench -h")
    assert result.stderr.startswith("usage: kuiper bench")
    assert_error(run_subprocess(), 2, "no command given")


def test_subprocess_huge_shape(model):
    assert_error(run_subprocess("bench", str(model), "--input-shape", "1x3x100000x100000",
                                *FAST_BENCH), 1, "bytes")


def test_a_reference_that_fails_shows_the_cause_after_its_wrapper_line():
    """torch.compile wraps the compiler's error as "BackendCompilerFailed: backend='inductor'
    raised:" and the cause on the next line; `kuiper bench` printed only the wrapper line."""
    from kuiper.bench.columns import first_line, why

    class BackendCompilerFailed(Exception):
        pass

    wrapped = BackendCompilerFailed("backend='inductor' raised:\nRuntimeError: no kernel for "
                                    "tf32\n\nSet TORCHDYNAMO_VERBOSE=1 for more")
    assert why(wrapped) == ("it failed: BackendCompilerFailed: backend='inductor' raised: "
                            "RuntimeError: no kernel for tf32")
    assert first_line(ValueError("one line\nsecond")) == "ValueError: one line"
    assert first_line(ValueError("")) == "ValueError: "
    assert len(first_line(ValueError("x" * 500))) == 200
