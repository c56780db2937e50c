"""Loading an ONNX or TorchScript file through pnnx (kuiper/graph/convert.py, `kuiper convert`).

The fast tests run a stand-in for the pnnx program (a small Python script that writes a
one-ReLU model and counts its runs), so they need neither PyTorch nor the real converter:
they check the cache, the progress line, the quiet log, the errors and the CLI. The slow ones
export a small PyTorch model with torch.onnx.export and torch.jit.trace, convert it with the
real pnnx and compare Kuiper's output with PyTorch's on both backends.
"""

from __future__ import annotations

import os
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

import kuiper
from kuiper.cli.main import main
from kuiper.graph import convert
from kuiper.testing import assert_close

# A stand-in for pnnx: writes <stem>.pnnx.param (a ReLU at the given inputshape, 1x3x4x4 by
# default), an ncnn file Kuiper must not keep, a log line, and counts its runs in RUNS.
FAKE_PNNX = """#!{python}
import sys, pathlib
source = pathlib.Path(sys.argv[1])
shape = "1,3,4,4"
for arg in sys.argv[2:]:
    if arg.startswith("inputshape="):
        shape = arg[len("inputshape=["):-1]
print("fake pnnx pass_level0 ... pass_level5")
magic = "{magic}"
if source.read_bytes() == b"broken":
    print("read_proto_from_binary failed")
    sys.exit(255)
param = pathlib.Path(source.stem + ".pnnx.param")
param.write_text(magic + "\\n3 2\\n"
                 f"pnnx.Input in0 0 1 0 #0=({{shape}})f32\\n"
                 f"nn.ReLU relu 1 1 0 1 #0=({{shape}})f32 #1=({{shape}})f32\\n"
                 f"pnnx.Output out0 1 0 1 #1=({{shape}})f32\\n")
pathlib.Path(source.stem + ".ncnn.param").write_text("7767517")
runs = pathlib.Path({runs!r})
runs.write_text(str(int(runs.read_text() or 0) + 1) if runs.exists() else "1")
"""


@pytest.fixture
def fake_pnnx(tmp_path, monkeypatch):
    """Point Kuiper at the stand-in pnnx and a fresh cache; returns a function that says how
    many times pnnx ran. `fake_pnnx.magic = "..."` before a load changes the format written."""
    if os.name == "nt":
        pytest.skip("the stand-in pnnx is a script with a #! line (POSIX only)")
    runs = tmp_path / "runs"
    program = tmp_path / "bin" / "pnnx"
    program.parent.mkdir()

    def write(magic: str = "7767517") -> None:
        program.write_text(FAKE_PNNX.format(python=sys.executable, magic=magic, runs=str(runs)))
        program.chmod(0o755)

    write()
    monkeypatch.setattr(convert, "pnnx_executable", lambda: program)
    monkeypatch.setenv("KUIPER_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("KUIPER_PNNX_LOG", raising=False)

    def count() -> int:
        return int(runs.read_text()) if runs.exists() else 0

    count.write = write
    return count


def model_file(tmp_path: Path, name: str = "m.onnx", data: bytes = b"an onnx model") -> Path:
    path = tmp_path / "models" / name
    path.parent.mkdir(exist_ok=True)
    path.write_bytes(data)
    return path


def test_load_converts_once_then_uses_the_cache(tmp_path, fake_pnnx, capfd):
    onnx = model_file(tmp_path)
    x = np.linspace(-1, 1, 2 * 3 * 5 * 5, dtype=np.float32).reshape(2, 3, 5, 5)
    graph = kuiper.load(onnx, input_shapes=[x.shape])
    np.testing.assert_array_equal(graph(x), np.maximum(x, 0))
    err = capfd.readouterr().err
    assert "kuiper: converting m.onnx with pnnx" in err
    assert "pass_level" not in err  # pnnx's own log stays in its file ...
    entry = Path(graph.param_path).parent
    assert entry.parent == tmp_path / "cache" and entry.name.startswith("m-")
    assert "pass_level" in (entry / "pnnx.log").read_text()  # ... which keeps it
    # only what Kuiper reads is kept, and nothing is written beside the user's file
    assert sorted(p.name for p in entry.iterdir()) == ["complete", "m.pnnx.param", "pnnx.log"]
    assert sorted(p.name for p in onnx.parent.iterdir()) == ["m.onnx"]

    again = kuiper.load(onnx, input_shapes=[x.shape])
    assert again.param_path == graph.param_path and fake_pnnx() == 1
    assert "converting" not in capfd.readouterr().err
    # other shapes, or other contents, are other cache entries
    other = kuiper.load(onnx, input_shapes=[(1, 3, 6, 6)])
    assert other.param_path != graph.param_path and other.inputs[0].shape == (1, 3, 6, 6)
    onnx.write_bytes(b"an edited onnx model")
    assert kuiper.load(onnx, input_shapes=[x.shape]).param_path != graph.param_path
    assert fake_pnnx() == 3


def test_the_pnnx_log_is_shown_when_asked(tmp_path, fake_pnnx, capfd, monkeypatch):
    monkeypatch.setenv("KUIPER_PNNX_LOG", "1")
    kuiper.load(model_file(tmp_path, "m.pt"))
    assert "pass_level0" in capfd.readouterr().err


# --- a cache that heals (issue 31) --------------------------------------------------------
# Each of these gave a bare NotADirectoryError or FileNotFoundError on every load, or an entry
# that every load converted again and then failed on.
def _file(entry: Path) -> None:
    entry.write_text("not a folder")


def _dangling_link(entry: Path) -> None:
    entry.symlink_to(entry.parent / "nowhere")


def _link_loop(entry: Path) -> None:
    entry.symlink_to(entry)


def _complete_without_model(entry: Path) -> None:
    entry.mkdir()
    (entry / convert.COMPLETE).write_text("pnnx 1\n")


def _model_is_a_fifo(entry: Path) -> None:
    _complete_without_model(entry)
    os.mkfifo(entry / "m.pnnx.param")


def _model_is_damaged(entry: Path) -> None:
    _complete_without_model(entry)
    (entry / "m.pnnx.param").write_text("7767517\n3 2\npnnx.Input in0 0 1 0\n")  # cut short


@pytest.mark.parametrize("damage", [_file, _dangling_link, _link_loop, _complete_without_model,
                                    _model_is_a_fifo, _model_is_damaged])
def test_a_broken_cache_entry_is_converted_again_once_then_used(tmp_path, fake_pnnx, damage):
    onnx = model_file(tmp_path)
    entry = Path(kuiper.load(onnx).param_path).parent
    assert fake_pnnx() == 1
    convert.remove_entry(entry)
    damage(entry)
    x = np.linspace(-1, 1, 48, dtype=np.float32).reshape(1, 3, 4, 4)
    np.testing.assert_array_equal(kuiper.load(onnx)(x), np.maximum(x, 0))
    assert fake_pnnx() == 2  # converted again, once
    assert convert.entry_ready(entry, "m")
    kuiper.load(onnx)
    assert fake_pnnx() == 2  # then used


def _missing(log: Path) -> None:
    log.unlink()


def _fifo(log: Path) -> None:
    log.unlink()
    os.mkfifo(log)


def _endless(log: Path) -> None:
    log.unlink()
    log.symlink_to("/dev/zero")


@pytest.mark.parametrize("damage", [_missing, _fifo, _endless])
def test_an_unreadable_cached_log_is_ignored_with_a_warning(tmp_path, fake_pnnx, monkeypatch,
                                                            damage):
    onnx = model_file(tmp_path)
    entry = Path(kuiper.load(onnx).param_path).parent
    damage(entry / convert.LOG_NAME)
    monkeypatch.setenv("KUIPER_PNNX_LOG", "1")
    with pytest.warns(kuiper.KuiperWarning, match=r"pnnx's log of the cached conversion .*"
                                                  r"pnnx\.log cannot be shown .*it is ignored"):
        graph = kuiper.load(onnx)  # no hang on the FIFO, no endless read of /dev/zero
    assert graph.inputs[0].shape == (1, 3, 4, 4)
    assert fake_pnnx() == 1  # the model itself was fine: still the cached one


def test_without_pnnx_the_error_gives_the_commands(tmp_path, monkeypatch):
    monkeypatch.setattr(convert, "pnnx_executable", lambda: None)
    onnx = model_file(tmp_path)
    with pytest.raises(kuiper.ConversionError) as info:
        kuiper.load(onnx, input_shapes=[(1, 3, 8, 8)])
    message = str(info.value)
    assert f"`pip install pnnx=={convert.TESTED_PNNX_VERSION}`" in message
    assert f"`pnnx {onnx.resolve()} inputshape=[1,3,8,8]`" in message
    assert "m.pnnx.param" in message


def test_a_failed_conversion_names_its_log_and_is_not_cached(tmp_path, fake_pnnx):
    pt = model_file(tmp_path, "weights.pth", b"broken")
    for _ in range(2):
        with pytest.raises(kuiper.ConversionError) as info:
            kuiper.load(pt)
        message = str(info.value)
        assert "exit status 255" in message and "torch.jit.trace" in message
        assert "input_shapes=" in message  # no shapes were given: say how
        log = Path(message.rsplit("pnnx's log: ", 1)[1].rstrip(")"))
        assert "read_proto_from_binary failed" in log.read_text()
    assert not (log.parent / convert.COMPLETE).exists()


def test_a_pnnx_that_writes_another_format_is_named(tmp_path, fake_pnnx):
    fake_pnnx.write(magic="7767518")
    with pytest.raises(kuiper.ConversionError) as info:
        kuiper.load(model_file(tmp_path), input_shapes=[(1, 3, 4, 4)])
    message = str(info.value)
    for part in ("'7767518'", "format 7767517", f"pnnx {convert.TESTED_PNNX_VERSION}",
                 f"pip install pnnx=={convert.TESTED_PNNX_VERSION}", "pnnx.log"):
        assert part in message, message


def test_a_pnnx_that_cannot_start_and_bad_shapes_are_kuiper_errors(tmp_path, fake_pnnx,
                                                                   monkeypatch):
    not_a_program = tmp_path / "pnnx-broken"
    not_a_program.write_bytes(b"\x00\x01 not an executable")
    not_a_program.chmod(0o755)
    monkeypatch.setattr(convert, "pnnx_executable", lambda: not_a_program)
    with pytest.raises(kuiper.ConversionError, match="cannot run pnnx .*pip install pnnx=="):
        kuiper.load(model_file(tmp_path), input_shapes=[(1, 3, 4, 4)])
    with pytest.raises(kuiper.ArgumentError, match=r"input_shapes\[0\]: got '1x3x4x4'"):
        kuiper.load(model_file(tmp_path), input_shapes=["1x3x4x4"])


def test_the_cache_folder_follows_the_environment(tmp_path, monkeypatch):
    monkeypatch.delenv("KUIPER_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert convert.cache_dir() == tmp_path / "xdg" / "kuiper"
    monkeypatch.setenv("KUIPER_CACHE_DIR", str(tmp_path / "mine"))
    assert convert.cache_dir() == tmp_path / "mine"


def test_the_tested_pnnx_is_the_installed_one():
    """TESTED_PNNX_VERSION states what the suite runs with: update it with the pnnx pin."""
    if convert.pnnx_executable() is None:
        pytest.skip("pnnx is not installed (pip install pnnx)")
    assert convert.pnnx_version() == convert.TESTED_PNNX_VERSION


def test_cli_convert_and_info_take_an_onnx_file(tmp_path, fake_pnnx, capsys):
    onnx = model_file(tmp_path)
    out = tmp_path / "converted"
    assert main(["convert", str(onnx), "--input-shape", "1x3x4x4", "-o", str(out)]) == 0
    assert (out / "m.pnnx.param").is_file() and str(out / "m.pnnx.param") in capsys.readouterr().out
    assert main(["info", str(onnx), "--input-shape", "1x3x4x4"]) == 0  # the cached one
    assert "nn.ReLU" in capsys.readouterr().out and fake_pnnx() == 1
    assert main(["convert", str(tmp_path / "m.pnnx.param")]) == 1
    assert "takes an ONNX file or a TorchScript file" in capsys.readouterr().err


# --- the real pnnx, on a real export --------------------------------------------------------
@pytest.fixture(scope="module")
def exports(tmp_path_factory):
    """A small CNN exported to ONNX and to TorchScript, and PyTorch's output for X."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("onnx", reason="torch.onnx.export needs the onnx package")
    if convert.pnnx_executable() is None:
        pytest.skip("pnnx is not installed (pip install pnnx)")
    from torch import nn

    class Small(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 6, 3, padding=1)
            self.fc = nn.Linear(6 * 5 * 7, 4)

        def forward(self, x):
            y = torch.relu(self.conv(x)) + x.mean(1, keepdim=True)
            return self.fc(y.flatten(1)).sigmoid()

    torch.manual_seed(0)
    model = Small().eval()
    x = torch.from_numpy(np.random.default_rng(7).standard_normal((1, 3, 5, 7), np.float32))
    folder = tmp_path_factory.mktemp("exports")
    with warnings.catch_warnings():  # both exporters are deprecated; users still have their files
        warnings.simplefilter("ignore", DeprecationWarning)
        torch.onnx.export(model, (x,), str(folder / "small.onnx"), dynamo=False)
        torch.jit.trace(model, x).save(str(folder / "small.pt"))
    with torch.no_grad():
        return folder, x.numpy(), model(x).numpy()


@pytest.mark.slow
@pytest.mark.parametrize("suffix", [".onnx", ".pt"])
def test_exports_convert_and_match_pytorch(exports, suffix, backend, tmp_path, monkeypatch):
    monkeypatch.setenv("KUIPER_CACHE_DIR", str(tmp_path / "cache"))
    folder, x, expected = exports
    graph = kuiper.load(folder / f"small{suffix}", backend=backend, input_shapes=[x.shape])
    assert_close(graph(x), expected)
