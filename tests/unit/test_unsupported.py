"""Operators no layer runs: all of them in one error, and `kuiper info` still shows the model
(kuiper/graph/unsupported.py, kuiper/graph/summary.py: parsed_summary)."""

from __future__ import annotations

import pytest

import kuiper
from kuiper.cli.main import main
from kuiper.testing import write_param

INPUT = "pnnx.Input in0 0 1 0 #0=(1,3,8,8)f32"


def write_model(tmp_path, body: list[str]) -> str:
    """A chain in0 -> body... -> out0; each body line is 'type name' (shapes 1x3x8x8)."""
    lines = [INPUT]
    for k, op in enumerate(body):
        lines.append(f"{op} 1 1 {k} {k + 1} #{k}=(1,3,8,8)f32 #{k + 1}=(1,3,8,8)f32")
    lines.append(f"pnnx.Output out0 1 0 {len(body)} #{len(body)}=(1,3,8,8)f32")
    return write_param(tmp_path, lines, name="m")


MIXED = ["torch.frobnicate frob", "nn.ReLU relu", "nn.ReLu typo", "mymods.Swish2 act",
         "F.sigmoid sig"]


def test_all_unsupported_operators_are_listed_at_once(tmp_path, backend):
    path = write_model(tmp_path, MIXED)
    with pytest.raises(kuiper.UnsupportedOperatorError) as info:
        kuiper.load(path, backend=backend)
    message = str(info.value)
    assert message.startswith(f"{path}: 3 operators have no {backend} layer:\n")
    for line in ("  line 4: operator 'frob' (torch.frobnicate)",
                 "  line 6: operator 'typo' (nn.ReLu) -- did you mean nn.ReLU",
                 "  line 7: operator 'act' (mymods.Swish2)"):
        assert line in message, message
    assert "'relu'" not in message and "'sig'" not in message  # those have layers
    for pointer in ("`kuiper ops` lists the", "custom operator", "kuiper/PLUGINS.md",
                    "moduleop"):  # (moduleop: mymods.Swish2 looks like a kept module)
        assert pointer in message, message
    assert info.value.operators == [(4, "frob", "torch.frobnicate"), (6, "typo", "nn.ReLu"),
                                    (7, "act", "mymods.Swish2")]


def test_one_unsupported_operator_keeps_the_one_line_form(tmp_path):
    path = write_model(tmp_path, ["nn.ReLu typo"])
    with pytest.raises(kuiper.UnsupportedOperatorError) as info:
        kuiper.load(path)
    message = str(info.value)
    assert message.startswith(f"{path}, line 4: operator 'typo': no cpu layer for operator "
                              "type 'nn.ReLu'. Did you mean nn.ReLU")
    assert "\n" not in message and "kuiper/PLUGINS.md" in message and "kuiper ops" in message


def test_a_file_full_of_unknown_types_gives_a_bounded_message(tmp_path):
    path = write_model(tmp_path, [f"x.Op{k} op{k}" for k in range(500)])
    with pytest.raises(kuiper.UnsupportedOperatorError) as info:
        kuiper.load(path)
    message = str(info.value)
    assert "500 operators have no cpu layer" in message and "... and 480 more" in message
    assert len(message) < 6000, len(message)
    assert len(info.value.operators) == 500


def test_info_prints_the_model_with_the_unsupported_operators_marked(tmp_path, capsys):
    path = write_model(tmp_path, MIXED)
    assert main(["info", path]) == 1
    out, err = capsys.readouterr()
    table = [(line[:1], line[1:].split(), line) for line in out.splitlines()]
    rows = {cells[1]: line for mark, cells, line in table  # '!' / ' ', line, name, type, ...
            if mark in ("!", " ") and len(cells) > 3 and cells[0].isdigit()}
    assert set(rows) == {"frob", "relu", "typo", "act", "sig"}, out
    assert {name for name, row in rows.items() if row.startswith("!")} == {"frob", "typo", "act"}
    assert "1x3x8x8 f32" in rows["sig"]  # shapes as the file declares them
    assert "3 marked '!' have no cpu layer" in out
    assert err.startswith("kuiper: error: ") and "3 operators have no cpu layer" in err


def test_info_of_a_supported_model_is_unchanged(tmp_path, capsys):
    assert main(["info", write_model(tmp_path, ["nn.ReLU relu"])]) == 0
    out = capsys.readouterr().out
    assert "nn.ReLU" in out and "no cpu layer" not in out and "!" not in out
