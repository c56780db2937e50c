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
# default), an ncnn file Kuiper must not keep, a log line, and counts its runs in RUNS. The
# files named in FAKE_PNNX_NEEDS (external data, relative to the model) must lie beside the
# model, as pnnx's onnxruntime needs them: a missing one crashes it, as the real pnnx crashes.
FAKE_PNNX = """#!{python}
import os, signal, sys, pathlib
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
for needed in filter(None, os.environ.get("FAKE_PNNX_NEEDS", "").split(",")):
    data = source.parent / needed
    if not data.is_file():
        print("\x1b[0;93mort CreateSession failed\x1b[m External data path does not exist: "
              + str(data), flush=True)
        os.kill(os.getpid(), signal.SIGSEGV)
    print("read external data", needed, len(data.read_bytes()), "bytes")
if os.environ.get("FAKE_PNNX_SAYS"):
    print(os.environ["FAKE_PNNX_SAYS"])
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


def onnx_with_external_data(folder: Path, one_file: bool, dynamic: bool = False) -> Path:
    """A small ONNX model, y = relu(x + a) * b, whose two weights live in external data: one
    file (`m.onnx.data`, as PyTorch writes it) or one file per tensor (in a `weights/` folder,
    as onnx.save_model writes them for a model over 2 GB). Built with the onnx package alone."""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    folder.mkdir(parents=True, exist_ok=True)
    size: list = ["n" if dynamic else 1, 3, 16, 16]  # weights of 3 KB: over onnx's threshold
    a = numpy_helper.from_array(np.full((1, 3, 16, 16), 0.5, np.float32), "a")
    b = numpy_helper.from_array(np.full((1, 3, 16, 16), 2.0, np.float32), "b")
    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "a"], ["s"]), helper.make_node("Relu", ["s"], ["r"]),
         helper.make_node("Mul", ["r", "b"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, size)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, size)], [a, b])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    path = folder / "m.onnx"
    onnx.save_model(model, str(path), save_as_external_data=True, size_threshold=0,
                    all_tensors_to_one_file=one_file,
                    location="m.onnx.data" if one_file else None)
    if not one_file:  # onnx names each file after its tensor, beside the model: move them
        (folder / "weights").mkdir(exist_ok=True)
        model = onnx.load(str(path), load_external_data=False)
        for tensor in model.graph.initializer:
            for entry in tensor.external_data:
                if entry.key == "location":
                    (folder / entry.value).rename(folder / "weights" / entry.value)
                    entry.value = f"weights/{entry.value}"
        onnx.save_model(model, str(path))
    return path


def test_external_data_files_are_found_linked_and_keyed(tmp_path, fake_pnnx, monkeypatch,
                                                       capfd):
    """An ONNX file whose weights are in other files converts with them in pnnx's work folder
    (before: only the .onnx was linked, and pnnx crashed), as the one file `m.onnx.data` that
    pnnx's reader looks for (several files are gathered into it), and an edited weights file
    is another cache entry (before: only the .onnx was hashed)."""
    monkeypatch.setenv("FAKE_PNNX_NEEDS", "m.onnx.data")
    weights = 2 * 768 * 4  # a and b, 768 float32 each
    for one_file, files in ((True, ["m.onnx.data"]), (False, ["weights/a", "weights/b"])):
        folder = tmp_path / f"one_file_{one_file}"
        source = onnx_with_external_data(folder, one_file)
        assert convert.external_data(source) == files
        graph = kuiper.load(source)
        entry = Path(graph.param_path).parent
        log = (entry / "pnnx.log").read_text()
        read = int(log.split("read external data m.onnx.data ")[1].split()[0])
        assert read >= weights  # both tensors (onnx may align them)
        gathered = "gathering the external data of m.onnx" in capfd.readouterr().err
        assert gathered == (not one_file)  # PyTorch's layout is linked as it is
        # the entry keeps what Kuiper reads; the user's folder is as it was
        assert sorted(p.name for p in entry.iterdir()) == ["complete", "m.pnnx.param",
                                                             "pnnx.log"]
        before = fake_pnnx()
        assert kuiper.load(source).param_path == graph.param_path and fake_pnnx() == before
        data = folder / files[-1]
        data.write_bytes(data.read_bytes()[::-1])  # other weights, same .onnx
        assert kuiper.load(source).param_path != graph.param_path
        assert fake_pnnx() == before + 1


def test_pytorchs_data_file_is_found_without_the_onnx_package(tmp_path, fake_pnnx,
                                                              monkeypatch):
    """Without `onnx` (or for a file it cannot parse), the file PyTorch writes beside the model
    is still found by its name."""
    monkeypatch.setattr(convert, "_onnx_model", lambda source: None)
    source = model_file(tmp_path)
    (source.parent / "m.onnx.data").write_text("weights")
    monkeypatch.setenv("FAKE_PNNX_NEEDS", "m.onnx.data")
    assert convert.external_data(source) == ["m.onnx.data"]
    graph = kuiper.load(source, input_shapes=[(1, 3, 4, 4)])
    assert "read external data m.onnx.data 7 bytes" in (
        Path(graph.param_path).parent / "pnnx.log").read_text()


def test_a_missing_external_data_file_is_named(tmp_path, fake_pnnx):
    source = onnx_with_external_data(tmp_path / "model", one_file=True)
    (source.parent / "m.onnx.data").unlink()
    with pytest.raises(kuiper.ConversionError) as info:
        kuiper.load(source)
    message = str(info.value)
    assert "'m.onnx.data' is not in" in message and "copy or move them as one" in message
    assert "input_shapes" not in message and fake_pnnx() == 0


def test_a_crash_names_its_cause_not_input_shapes(tmp_path, fake_pnnx, monkeypatch):
    """pnnx killed by a signal: the message says so and quotes the end of pnnx's log, where the
    cause is; it suggests input shapes only for a model whose inputs have dynamic sizes."""
    monkeypatch.setattr(convert, "external_data", lambda source: [])  # as before the fix
    monkeypatch.setenv("FAKE_PNNX_NEEDS", "m.onnx.data")
    static = onnx_with_external_data(tmp_path / "static", one_file=True)
    with pytest.raises(kuiper.ConversionError) as info:
        kuiper.load(static)
    message = str(info.value)
    assert "pnnx crashed with SIGSEGV" in message
    assert "External data path does not exist" in message and "\x1b" not in message
    assert "input_shapes" not in message  # the model's sizes are fixed: not the cause
    dynamic = onnx_with_external_data(tmp_path / "dynamic", one_file=True, dynamic=True)
    with pytest.raises(kuiper.ConversionError, match="Input.s. x have dynamic sizes.*"
                                                     "input_shapes="):
        kuiper.load(dynamic)


def test_pnnx_saying_it_found_no_weights_is_a_failure(tmp_path, fake_pnnx, monkeypatch):
    """pnnx's reader prints 'FATAL ERROR no external data' and exits 0 with made-up weights
    when the data is not where it looks: that model must not be loaded (nor cached)."""
    monkeypatch.setenv("FAKE_PNNX_SAYS", "FATAL ERROR no external data")
    with pytest.raises(kuiper.ConversionError, match="'FATAL ERROR no external data'.*cannot "
                                                     "be trusted"):
        kuiper.load(model_file(tmp_path), input_shapes=[(1, 3, 4, 4)])
    entries = list((tmp_path / "cache").iterdir())
    assert entries and not any((e / convert.COMPLETE).exists() for e in entries)


def test_an_external_data_path_outside_the_folder_is_refused(tmp_path, fake_pnnx):
    onnx = pytest.importorskip("onnx")
    source = onnx_with_external_data(tmp_path / "model", one_file=True)
    model = onnx.load(str(source), load_external_data=False)
    for tensor in model.graph.initializer:
        for entry in tensor.external_data:
            if entry.key == "location":
                entry.value = "../elsewhere.data"
    onnx.save_model(model, str(source))
    (tmp_path / "elsewhere.data").write_bytes(b"\0" * 1024)
    with pytest.raises(kuiper.ConversionError, match="'../elsewhere.data' is not inside"):
        kuiper.load(source)
    assert fake_pnnx() == 0


# --- the real pnnx, on a real export --------------------------------------------------------
@pytest.fixture(scope="module")
def exports(tmp_path_factory):
    """A small CNN exported to ONNX (by PyTorch's default exporter, `small_dynamo.onnx`, and by
    the TorchScript one, `small.onnx`), to TorchScript, and PyTorch's output for X."""
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
    # the default exporter (dynamo), as a user calls it: it writes small_dynamo.onnx.data too
    torch.onnx.export(model, (x,), str(folder / "small_dynamo.onnx"))
    with torch.no_grad():
        return folder, x.numpy(), model(x).numpy()


@pytest.mark.slow
@pytest.mark.parametrize("name", ["small.onnx", "small_dynamo.onnx", "small.pt"])
def test_exports_convert_and_match_pytorch(exports, name, backend, tmp_path, monkeypatch):
    monkeypatch.setenv("KUIPER_CACHE_DIR", str(tmp_path / "cache"))
    folder, x, expected = exports
    if name == "small_dynamo.onnx":  # the case under test: weights beside the .onnx
        assert (folder / "small_dynamo.onnx.data").is_file()
    graph = kuiper.load(folder / name, backend=backend, input_shapes=[x.shape])
    assert_close(graph(x), expected)
    # loaded without input shapes: the exported sizes are fixed
    assert_close(kuiper.load(folder / name, backend=backend)(x), expected)


@pytest.mark.slow
def test_default_export_with_one_file_per_weight_converts(exports, tmp_path, monkeypatch):
    """The same model with every weight in its own file in a subfolder (how onnx saves models
    over 2 GB), converted by the real pnnx."""
    onnx = pytest.importorskip("onnx")
    monkeypatch.setenv("KUIPER_CACHE_DIR", str(tmp_path / "cache"))
    folder, x, expected = exports
    model = onnx.load(str(folder / "small_dynamo.onnx"))  # with its weights
    (tmp_path / "split").mkdir()
    # the weights (over 512 bytes) go out; small constants such as ReduceMean's axes stay in
    # the .onnx, where onnxruntime's shape inference (inside pnnx) must read them
    onnx.save_model(model, str(tmp_path / "split" / "small.onnx"), save_as_external_data=True,
                    all_tensors_to_one_file=False, size_threshold=512)
    source = tmp_path / "split" / "small.onnx"
    assert len(convert.external_data(source)) >= 2  # the conv's and the fc's weights
    assert_close(kuiper.load(source)(x), expected)
