"""From PyTorch to Kuiper without friction: `kuiper.export` / `kuiper export` (kuiper/io/export.py)
on a transformer block, whose nn.MultiheadAttention makes a plain `pnnx.export` stop with
"TracingCheckError: Graphs differed across invocations", and `kuiper bench --against
onnxruntime` on it (the TorchScript ONNX exporter cannot export that attention).
"""

from __future__ import annotations

import re
import textwrap

import pytest

import kuiper
from kuiper.testing import assert_close
from tests.unit.test_cli import assert_user_error, kuiper_cli, run_main

torch = pytest.importorskip("torch")
pytest.importorskip("pnnx", reason="exports need pnnx (pip install pnnx)")
pytestmark = pytest.mark.slow

BLOCK = textwrap.dedent('''
    import torch
    from torch import nn


    class Block(nn.Module):
        """A pre-norm transformer encoder block."""

        def __init__(self, d=32, heads=4):
            super().__init__()
            self.norm1, self.norm2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.attn = nn.MultiheadAttention(d, heads, batch_first=True)
            self.mlp = nn.Sequential(nn.Linear(d, 64), nn.GELU(), nn.Linear(64, d))

        def forward(self, x):
            h = self.norm1(x)
            x = x + self.attn(h, h, h, need_weights=False)[0]
            return x + self.mlp(self.norm2(x))


    def make():
        torch.manual_seed(0)
        return Block()
''')


@pytest.fixture(scope="module")
def block_file(tmp_path_factory):
    folder = tmp_path_factory.mktemp("user_code")
    (folder / "models.py").write_text(BLOCK)
    return folder / "models.py"


def load_block(path):
    import importlib.util

    spec = importlib.util.spec_from_file_location("user_models", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.make()


def test_export_a_transformer_block(block_file, backend, tmp_path):
    model = load_block(block_file)
    x = torch.randn(1, 8, 32, generator=torch.Generator().manual_seed(1))
    param = kuiper.export(model, (x,), tmp_path / "out" / "block")
    assert param == tmp_path / "out" / "block.pnnx.param"
    # what Kuiper reads, and pnnx's PyTorch rebuild for `--against torch`; nothing else
    assert sorted(p.name for p in param.parent.iterdir()) == [
        "block.pnnx.bin", "block.pnnx.param", "block_pnnx.py"]
    assert "nn.MultiheadAttention" in param.read_text()
    with torch.no_grad():
        expected = model(x).numpy()
    assert_close(kuiper.load(param, backend=backend)(x.numpy()), expected)


def test_an_export_that_does_not_compute_the_module_is_refused(tmp_path):
    """The traced graph is not the eager module's (a Python counter, read at trace time):
    Kuiper's output on the example differs, and the export says so instead of handing it over."""
    class Drifting(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.calls = 0

        def forward(self, x):
            self.calls += 1
            return x * self.calls

    with pytest.raises(kuiper.KuiperError, match="output 0 of the export differs from the "
                                                  "module's .*kuiper compare"):
        kuiper.export(Drifting(), torch.ones(1, 4), tmp_path / "drift")


def test_kuiper_export_command(block_file, tmp_path, capsys):
    out = tmp_path / "cli" / "block"
    result = run_main(capsys, "export", f"{block_file}:make", "--input-shape", "1x8x32",
                      "-o", str(out))
    assert result.returncode == 0, result.stderr
    assert "matches PyTorch on a seeded example" in result.stdout
    assert (tmp_path / "cli" / "block.pnnx.bin").is_file()
    assert_user_error(run_main(capsys, "export", f"{block_file}:nothing", "--input-shape",
                               "1x8x32", "-o", str(out)), "has no function or class named")
    assert_user_error(run_main(capsys, "export", "models.py", "--input-shape", "1x8x32",
                               "-o", str(out)), "FILE.py:NAME")


def test_bench_against_onnxruntime_runs_a_transformer_block(block_file, tmp_path):
    """The TorchScript exporter has no ONNX form for the fused attention; PyTorch's default
    exporter does: the onnxruntime column is there, and no TorchScript graph is printed."""
    param = kuiper.export(load_block(block_file), torch.randn(1, 8, 32), tmp_path / "block")
    result = kuiper_cli("bench", str(param), "--backends", "cpu", "--against", "onnxruntime",
                        "--trust-model-code", "--repeat", "2", "--warmup", "1", "--top", "0")
    assert result.returncode == 0, result.stdout + result.stderr
    row = next(line for line in result.stdout.splitlines() if line.startswith("onnxruntime"))
    assert float(row.split()[-1]) < 1e-4  # max |diff| against kuiper cpu
    assert "graph(" not in result.stdout + result.stderr


def test_bench_says_in_one_line_why_onnxruntime_cannot_run(block_file, tmp_path):
    """Both exporters fail (here on purpose, as the TorchScript one fails on attention:
    printing its whole TorchScript graph from C++ first): one line, no graph."""
    param = kuiper.export(load_block(block_file), torch.randn(1, 8, 32), tmp_path / "block")
    code = textwrap.dedent('''
        import os, sys, torch

        def failing_export(*args, **kwargs):
            os.write(2, b"Torch IR graph at exception: graph(%input : Float(1, 8, 32)\\n" * 35)
            raise RuntimeError("Exporting the operator 'aten::_native_multi_head_attention' "
                               "is not supported\\nmore detail\\nand more")

        torch.onnx.export = failing_export
        from kuiper.cli.main import main
        sys.exit(main(sys.argv[1:]))
    ''')
    result = kuiper_cli("bench", str(param), "--backends", "cpu", "--against", "onnxruntime",
                        "--trust-model-code", "--repeat", "2", "--warmup", "0", "--top", "0",
                        code=code)
    assert result.returncode == 0, result.stdout + result.stderr
    text = result.stdout + result.stderr
    assert "Torch IR graph" not in text and "more detail" not in text
    lines = [line for line in text.splitlines() if "onnxruntime" in line]
    assert len(lines) == 1 and lines[0].startswith("onnxruntime: skipped"), lines
    assert re.search(r"TorchScript exporter: RuntimeError: Exporting the operator "
                     r"'aten::_native_multi_head_attention' is not supported; dynamo exporter",
                     lines[0])
    assert any(line.startswith("kuiper cpu ") for line in result.stdout.splitlines())
