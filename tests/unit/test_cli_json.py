"""`--json` on info, ops, devices, bench and compare: stdout is one JSON document and nothing
else (the human text is not mixed in), with the facts the text shows. Plus `info --dot` and the
`bench --plot` path without matplotlib.

Run in this process (`main()`) on the digits model that ships with Kuiper: 1x1x8x8 -> 1x10.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest

from kuiper.cli.main import main
from tests.conftest import opencl_available
from tests.unit.test_cli import assert_user_error, run_main

DIGITS = "kuiper/demo/digits.pnnx.param"


def parse(result) -> dict:
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)  # fails if any text was printed besides the document


def test_info_json(capsys):
    doc = parse(run_main(capsys, "info", DIGITS, "--json"))
    assert doc["inputs"] == [{"name": "0", "shape": [1, 1, 8, 8], "dtype": "float32"}]
    assert doc["outputs"][0]["shape"] == [1, 10]
    convs = [op for op in doc["operators"] if op["type"] == "nn.Conv2d"]
    assert [op["name"] for op in convs] == ["features.0", "features.2"]
    # conv 1 -> 8 channels 3x3 (72 weights + 8 biases), conv 8 -> 16 (1152 + 16)
    assert [op["params"] for op in convs] == [80, 1168]
    assert doc["parameters"] == sum(op["params"] for op in doc["operators"])
    assert doc["flops"] > 0 and not any(op["fallback"] for op in doc["operators"])
    batch4 = parse(run_main(capsys, "info", DIGITS, "--json", "--input-shape", "4x1x8x8"))
    assert batch4["outputs"][0]["shape"] == [4, 10]


def test_ops_json(capsys):
    doc = parse(run_main(capsys, "ops", "--json"))
    types = {t["type"]: t for t in doc["types"]}
    assert types["nn.ReLU"]["cpu"] == "yes" and types["nn.ReLU"]["opencl"] == "yes"
    assert types["pnnx.Attribute"]["opencl"] == "folded"
    assert doc["count"] == len(doc["types"]) >= doc["cpu"] > 100


@pytest.mark.skipif(not opencl_available(), reason="no OpenCL platform to list")
def test_devices_json(capsys):
    doc = parse(run_main(capsys, "devices", "--json"))
    defaults = [d for d in doc["devices"] if d["default"]]
    assert len(defaults) == 1 and doc["default"] == defaults[0]["index"]
    assert all(re.fullmatch(r"\d+:\d+", d["index"]) and d["memory_bytes"] > 0
               for d in doc["devices"])


def test_bench_json_has_percentiles_and_throughput(capsys):
    doc = parse(run_main(capsys, "bench", DIGITS, "--backends", "cpu", "--repeat", "9",
                         "--warmup", "1", "--rounds", "3", "--top", "3", "--json",
                         "--input-shape", "4x1x8x8"))
    (cpu,) = doc["columns"]
    runs = np.array(cpu["runs_ms"])
    assert cpu["runs"] == len(runs) == 9 and doc["batch"] == 4
    assert cpu["min_ms"] == pytest.approx(runs.min())
    assert cpu["median_ms"] == pytest.approx(np.median(runs)) == pytest.approx(cpu["p50_ms"])
    assert cpu["p50_ms"] <= cpu["p90_ms"] <= cpu["p99_ms"] <= runs.max() + 1e-9
    assert cpu["p99_ms"] == pytest.approx(np.percentile(runs, 99))
    assert cpu["inferences_per_s"] == pytest.approx(1e3 / cpu["median_ms"])
    assert cpu["items_per_s"] == pytest.approx(4 * cpu["inferences_per_s"])
    assert len(cpu["after_idle_runs_ms"]) == 3 and cpu["after_idle_ms"] > 0   # one per round
    assert {p["operator"] for p in cpu["profile_ms"]} >= {"features.0", "classifier.3"}
    assert cpu["launch_gaps"] == {}   # kernel launches and their gaps: OpenCL columns only


def test_bench_fixed_duration(capsys):
    result = run_main(capsys, "bench", DIGITS, "--backends", "cpu", "--seconds", "0.6",
                      "--rounds", "2", "--warmup", "0", "--top", "0")
    assert result.returncode == 0, result.stderr
    row = next(line for line in result.stdout.splitlines() if line.startswith("kuiper cpu"))
    assert "p99 ms" in result.stdout and "items/s" in result.stdout
    runs = int(re.search(r"runs per column: (\d+)", result.stdout).group(1))
    assert runs > 10, row  # 0.6 s of a sub-millisecond model: many runs, not --repeat's 20
    assert_user_error(run_main(capsys, "bench", DIGITS, "--seconds", "0"), "--seconds")


def test_compare_json(capsys):
    if not opencl_available():
        pytest.skip("compare needs two backends: no OpenCL device here")
    doc = parse(run_main(capsys, "compare", DIGITS, "--json"))
    assert doc["ok"] is True and doc["first_bad"] is None and doc["reference"] == "cpu"
    assert [o["output"] for o in doc["outputs"]] == [0]
    conv = next(op for op in doc["operators"] if op["operator"] == "features.0")
    assert conv["diffs"]["opencl"]["over"] is False and set(conv["ms"]) == {"cpu", "opencl"}


def test_info_dot(tmp_path, capsys):
    result = run_main(capsys, "info", DIGITS, "--dot")
    assert result.returncode == 0, result.stderr
    dot = result.stdout
    assert dot.startswith("digraph kuiper {") and dot.rstrip().endswith("}")
    nodes = dict(re.findall(r'^\s+(op\d+) \[label="([^"]*)"', dot, re.M))
    edges = re.findall(r'^\s+(op\d+) -> (op\d+) \[label="([^"]*)"\]', dot, re.M)
    assert len(nodes) == 11 and len(edges) == 10  # input, 9 operators, output; a chain
    by_name = {label.split("\\n")[0]: node for node, label in nodes.items()}
    assert nodes[by_name["features.0"]] == "features.0\\nnn.Conv2d\\n1x8x8x8"
    assert (by_name["features.0"], by_name["features.1"], "1: 1x8x8x8") in edges
    # to a file, and the -h note about Netron
    assert run_main(capsys, "info", DIGITS, "--dot", str(tmp_path / "g.dot")).returncode == 0
    assert (tmp_path / "g.dot").read_text() == dot
    with pytest.raises(SystemExit):
        main(["info", "-h"])
    assert "Netron" in capsys.readouterr().out


def test_bench_plot_without_matplotlib_says_what_to_install(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # absent, even where it is installed
    result = run_main(capsys, "bench", DIGITS, "--plot", str(tmp_path / "ops.png"))
    assert_user_error(result, "--plot needs matplotlib", "pip install matplotlib")
    assert result.stdout == ""  # refused before any timing
    assert_user_error(run_main(capsys, "bench", DIGITS, "--plot", str(tmp_path / "ops.txt")),
                      ".png")


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's `dot` is not installed")
def test_graphviz_renders_the_dot(tmp_path, capsys):
    assert run_main(capsys, "info", DIGITS, "--dot", str(tmp_path / "g.dot")).returncode == 0
    svg = subprocess.run(["dot", "-Tsvg", str(tmp_path / "g.dot")], capture_output=True,
                         text=True, timeout=60, check=False)
    assert svg.returncode == 0 and not svg.stderr, svg.stderr
    assert svg.stdout.count('class="node"') == 11 and svg.stdout.count('class="edge"') == 10


def test_bench_times_steady_state_and_reports_the_first_run_after_each_pause(monkeypatch):
    """A framework that is slow for its first runs after the pause between blocks (PoCL's
    threads: 3-4 MobileNetV2 runs) is re-warmed, untimed, before each timed block; the first
    run after each pause is kept apart ("after idle"). On a fake clock: no real sleeps, exact."""
    from types import SimpleNamespace

    from kuiper.bench import timing as bench

    clock = {"now": 0.0, "cold_runs": 0}

    def pause(seconds):   # the settle: the next 3 runs are slow
        clock["now"] += seconds
        clock["cold_runs"] = 3

    def run():            # 4 ms cold, 0.1 ms warm
        clock["now"] += 0.004 if clock["cold_runs"] else 0.0001
        clock["cold_runs"] = max(0, clock["cold_runs"] - 1)

    monkeypatch.setattr(bench, "time", SimpleNamespace(sleep=pause,
                                                       perf_counter=lambda: clock["now"]))
    monkeypatch.setattr(bench, "REWARM_SECONDS", 0.02)
    column = bench.Column("slow starter", run=run)
    bench.time_columns([column], warmup=1, repeat=6, rounds=3, advance=lambda c: None)
    assert len(column.runs) == 6 and len(column.after_idle) == 3
    assert column.runs == pytest.approx([0.0001] * 6)
    assert column.after_idle == pytest.approx([0.004] * 3)
    summary = bench.summary_numbers(column, batch=1)
    assert summary["after_idle_ms"] == pytest.approx(4.0)
    assert summary["after_idle_runs_ms"] == pytest.approx([4.0] * 3)


@pytest.mark.skipif(not opencl_available(), reason="no OpenCL platform to list")
def test_devices_lists_the_kernel_caches_with_their_sizes(capsys, tmp_path, monkeypatch):
    """Where compiled kernels are kept, each folder as its environment variable moves it."""
    monkeypatch.setenv("KUIPER_CACHE_DIR", str(tmp_path / "kuiper"))
    monkeypatch.setenv("POCL_CACHE_DIR", str(tmp_path / "pocl"))
    (tmp_path / "kuiper" / "kernels").mkdir(parents=True)
    (tmp_path / "kuiper" / "kernels" / "a.bin").write_bytes(b"x" * 1000)
    caches = {c["path"]: c for c in parse(run_main(capsys, "devices", "--json"))["kernel_caches"]}
    assert caches[str(tmp_path / "kuiper" / "kernels")]["bytes"] == 1000
    assert caches[str(tmp_path / "kuiper" / "kernels")]["files"] == 1
    assert caches[str(tmp_path / "pocl")]["files"] == 0  # not there yet: empty, not an error
    text = run_main(capsys, "devices").stdout
    assert "compiled kernels are kept in" in text and "1,000 bytes" in text
