"""`kuiper tune` and its cache (kuiper/opencl/device/tuning_cache.py, kuiper/cli/tune.py).

The cache: a round trip, its keys (device name *and* driver version), a corrupt or foreign
file ignored with a warning, an unwritable cache dir refused with a clear error. The command:
on a small model, it writes the cache, the next load uses it ("tuned" in `kuiper info`), and
its table and JSON say what won and by how much.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from types import SimpleNamespace

import numpy as np
import pytest
import torch

import kuiper
from kuiper.core.log import KuiperWarning
from kuiper.opencl.device import tuning_cache as tuning
from kuiper.testing import write_operator_model, write_param
from tests.conftest import opencl_available

needs_opencl = pytest.mark.skipif(not opencl_available(), reason="no OpenCL device")


def fake_device(name="GPU 9000", driver="1.0"):
    """What tuning.py reads of a pyopencl Device."""
    return SimpleNamespace(name=name, driver_version=driver,
                           platform=SimpleNamespace(name="Some Platform"))


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    folder = tmp_path / "cache"
    monkeypatch.setenv("KUIPER_CACHE_DIR", str(folder))
    return folder


WINNER = {"algorithm": "im2col_gemm", "params": {"kernel": "gemm_tiled", "TILE_M": 64},
          "seconds": 1.5e-4}


def test_round_trip_and_keys(cache_dir):
    device = fake_device()
    path = tuning.store(device, {"conv:a": WINNER})
    assert path == cache_dir / "tuning.json" and path.exists()
    assert tuning.lookup(device, "conv:a") == WINNER
    assert tuning.lookup(device, "conv:b") is None
    # another driver version or another device: measurements do not carry over
    assert tuning.lookup(fake_device(driver="2.0"), "conv:a") is None
    assert tuning.lookup(fake_device(name="GPU 9001"), "conv:a") is None
    # a second store adds, keeps the first, and the file is read again once it changed
    tuning.store(device, {"conv:b": dict(WINNER, seconds=2e-4)})
    assert tuning.lookup(device, "conv:a") == WINNER
    assert tuning.lookup(device, "conv:b")["seconds"] == 2e-4
    data = json.loads(path.read_text())
    assert data["version"] == tuning.VERSION
    assert list(data["devices"]) == ["Some Platform / GPU 9000 | 1.0"]


def test_a_gpu_winograd_winner_with_its_gemm_set_survives_the_cache(cache_dir):
    """On a GPU, Winograd's candidates carry their GEMM's parameter set under "gemm"; the
    cache refused such an entry as malformed, so a tuned winner of that kind was measured,
    written and then ignored (found on an H200). One level of nesting is a
    parameter set; a deeper one is still refused."""
    from kuiper.layers.opencl_gemm.parameter_sets import GPU_PARAMETER_SETS

    device = fake_device()
    winners = {f"conv:{i}": {"algorithm": "winograd_f4x4", "params": {"gemm": p},
                             "seconds": 1e-4} for i, p in enumerate(GPU_PARAMETER_SETS)}
    tuning.store(device, winners)
    assert all(tuning.lookup(device, key) == entry for key, entry in winners.items())
    deeper = {"algorithm": "w", "params": {"gemm": {"inner": {"TILE_M": 64}}}, "seconds": 1.0}
    assert not tuning.well_formed(deeper)
    assert not tuning.well_formed({"algorithm": "w", "params": {"gemm": {str(i): i for i in
                                                                          range(100)}}})


def test_keys_of_problems():
    assert tuning.gemm_key(5, 33, 70, trans_b=True) == "gemm:m5n33k70z1_tb"
    assert tuning.gemm_key(5, 33, 70) == "gemm:m5n33k70z1"
    problem = SimpleNamespace(key="n1c3o8g1_i1x8x8")
    assert tuning.conv_key(problem) == "conv:n1c3o8g1_i1x8x8"


@pytest.mark.parametrize("content", ["{not json", '["a list"]', '{"version": 99, "devices": {}}',
                                     '{"version": 1, "devices": {"x": 3}}', "\udcff"])
def test_a_corrupt_cache_is_ignored_with_a_warning(cache_dir, content):
    cache_dir.mkdir()
    (cache_dir / "tuning.json").write_text(content, errors="surrogateescape")
    with pytest.warns(KuiperWarning, match="tuning cache .* ignored"):
        assert tuning.lookup(fake_device(), "conv:a") is None
    # storing over it replaces it with a valid file
    tuning.store(fake_device(), {"conv:a": WINNER})
    assert tuning.lookup(fake_device(), "conv:a") == WINNER


def test_a_malformed_entry_is_no_winner(cache_dir):
    tuning.store(fake_device(), {"conv:a": {"algorithm": 3}, "conv:b": "fast"})
    assert tuning.lookup(fake_device(), "conv:a") is None
    assert tuning.lookup(fake_device(), "conv:b") is None


def test_an_unwritable_cache_dir_is_a_clear_error(tmp_path, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("KUIPER_CACHE_DIR", str(blocker / "cache"))
    with pytest.raises(tuning.TuningError, match="cannot write the tuning cache .*KUIPER_CACHE"):
        tuning.store(fake_device(), {"conv:a": WINNER})
    assert issubclass(tuning.TuningError, kuiper.KuiperError)


# --- the command --------------------------------------------------------------------------------
def run_main(capsys, *args):
    from kuiper.cli.main import main

    try:
        code = main(list(args))
    except SystemExit as e:
        code = e.code
    out, err = capsys.readouterr()
    return subprocess.CompletedProcess(["kuiper", *args], code, out, err)


@pytest.fixture
def conv_model(tmp_path, rng):
    x = rng.standard_normal((1, 5, 9, 7)).astype(np.float32)
    w = rng.standard_normal((6, 5, 3, 3)).astype(np.float32)
    params = {"in_channels": 5, "out_channels": 6, "kernel_size": (3, 3), "stride": (1, 1),
              "padding": (1, 1), "dilation": (1, 1), "groups": 1, "bias": False,
              "padding_mode": "zeros"}
    return write_operator_model(tmp_path, "nn.Conv2d", [x], params=params, weights={"weight": w})


@needs_opencl
def test_tune_writes_the_cache_and_the_next_load_uses_it(capsys, cache_dir, conv_model):
    result = run_main(capsys, "tune", conv_model, "--runs", "2")
    assert result.returncode == 0, result.stderr
    assert "tuning 1/1: conv op0" in result.stderr          # progress, at INFO
    header = result.stdout.splitlines()[0].split()
    assert header[:4] == ["layer", "kind", "algorithm", "params"] and "GFLOP/s" in header
    row = result.stdout.splitlines()[2].split()
    assert row[0] == "op0" and row[1] == "conv" and row[-1].endswith("x")
    assert float(row[-1][:-1]) >= 1.0      # the winner is at least as fast as the model's pick
    assert (cache_dir / "tuning.json").exists()
    graph = kuiper.load(conv_model, backend="opencl")
    layer = next(op.layer for op in graph.order if op.type == "nn.Conv2d")
    assert layer.algorithm_reason == "tuned" and layer.algorithm == row[2]
    info = run_main(capsys, "info", conv_model, "--backend", "opencl")
    assert info.returncode == 0
    line = next(li for li in info.stdout.splitlines() if li.startswith("op0 ") and "tuned" in li)
    assert layer.algorithm in line
    document = json.loads(run_main(capsys, "info", conv_model, "--backend", "opencl",
                                   "--json").stdout)
    assert document["kernels"][0]["reason"] == "tuned"


@needs_opencl
@pytest.mark.parametrize("groups,stride,batch", [(1, 2, 1), (2, 3, 2)])
def test_tune_times_a_transposed_convolutions_gemm(capsys, cache_dir, tmp_path, rng, groups,
                                                   stride, batch):
    """A ConvTranspose2d's weight GEMM (W^T @ x into the column buffer) is a tuning problem of
    its own, keyed by its shape, batch*groups and TRANS_A; the next load binds the winner
    ("tuned" in `kuiper info`) and still computes what PyTorch does."""
    x = rng.standard_normal((batch, 4, 5, 7)).astype(np.float32)
    w = rng.standard_normal((4, 6 // groups, 3, 2)).astype(np.float32)
    params = {"in_channels": 4, "out_channels": 6, "kernel_size": (3, 2),
              "stride": (stride, stride), "padding": (1, 0), "output_padding": (1, 1),
              "dilation": (1, 1), "groups": groups, "bias": False}
    path = write_operator_model(tmp_path, "nn.ConvTranspose2d", [x], params=params,
                                weights={"weight": w})
    result = run_main(capsys, "tune", path, "--runs", "1", "--json")
    assert result.returncode == 0, result.stderr
    (problem,) = json.loads(result.stdout)["problems"]
    m, n, k, z = 6 // groups * 6, 5 * 7, 4 // groups, batch * groups
    assert problem["kind"] == "gemm"
    assert problem["key"] == tuning.gemm_key(m, n, k, z, trans_a=True)
    assert problem["best"]["algorithm"] == "gemm" and len(problem["candidates"]) > 1
    graph = kuiper.load(path, backend="opencl")
    layer = next(op.layer for op in graph.order if op.type == "nn.ConvTranspose2d")
    assert (layer.algorithm, layer.algorithm_reason) == ("gemm", "tuned")
    assert layer.algorithm_params == problem["best"]["params"]
    info = run_main(capsys, "info", path, "--backend", "opencl")
    assert any(li.startswith("op0 ") and "tuned" in li for li in info.stdout.splitlines())
    expected = torch.nn.functional.conv_transpose2d(
        torch.from_numpy(x), torch.from_numpy(w), stride=stride, padding=(1, 0),
        output_padding=1, groups=groups).numpy()
    np.testing.assert_allclose(graph(x), expected, rtol=1e-4, atol=1e-4)


@needs_opencl
def test_tune_json(capsys, cache_dir, conv_model):
    result = run_main(capsys, "tune", conv_model, "--runs", "1", "--json")
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    (problem,) = document["problems"]
    timed = [c["seconds"] for c in problem["candidates"] if c["seconds"] is not None]
    assert problem["best"]["seconds"] == min(timed)
    assert problem["cost_model"]["algorithm"] in {c["algorithm"] for c in problem["candidates"]}
    assert document["cache"] == str(cache_dir / "tuning.json")


@needs_opencl
def test_a_tune_makes_one_cache_flush_and_flushes_before_every_timed_run(monkeypatch,
                                                                          conv_model):
    """The flush's 64 MiB scratch buffer is made once per tune, not once per candidate; on a
    CPU device every timed run of every candidate follows a flush."""
    from kuiper.opencl.device.runtime import is_cpu
    from kuiper.opencl.execution import tuner as tune

    made, flushes = [], []
    real_flush = tune.cache_flush

    def counting_flush(runtime):
        made.append(1)
        flush = real_flush(runtime)
        return None if flush is None else (lambda: (flushes.append(1), flush()))

    monkeypatch.setattr(tune, "cache_flush", counting_flush)
    graph = kuiper.load(conv_model, backend="opencl")
    (problem,) = tune.tune_graph(graph, runs=2)
    timed = sum(c.seconds is not None for c in problem.candidates)
    assert len(made) == 1 and timed > 1
    assert len(flushes) == (2 * timed if is_cpu(graph.executor.runtime.device) else 0)


@needs_opencl
def test_an_interrupted_tune_keeps_its_winners_and_resume_skips_them(capsys, cache_dir,
                                                                     conv_model, monkeypatch):
    """Each winner is stored as soon as its problem is timed: a tune stopped right after
    (Ctrl-C, raised here by the store itself) keeps it, and --resume times nothing the cache
    already holds."""
    from kuiper.cli import tune
    from kuiper.opencl.device import tuning_cache as tuning

    stored, real_store = [], tuning.store

    def store_then_interrupt(device, winners, path=None):
        stored.append(dict(winners))
        real_store(device, winners, path)
        raise KeyboardInterrupt

    monkeypatch.setattr(tuning, "store", store_then_interrupt)
    with pytest.raises(KeyboardInterrupt):
        tune.run_command(tune_args(conv_model))
    monkeypatch.setattr(tuning, "store", real_store)
    assert len(stored) == 1 and (cache_dir / "tuning.json").exists()
    (key,) = stored[0]
    assert key in (cache_dir / "tuning.json").read_text()
    result = run_main(capsys, "tune", conv_model, "--runs", "1", "--resume")
    assert result.returncode == 0, result.stderr
    assert "1 of 1 problems are in the tuning cache already" in result.stderr
    assert "tuning 1/" not in result.stderr


def tune_args(model, **changes):
    import argparse

    args = dict(model=str(model), backend="opencl", device=None, input_shape=None, runs=1,
                resume=False, fresh=False, budget=None, json=False, plugin=[], param=[])
    return argparse.Namespace(**{**args, **changes})


# --- issue 31: tuple outputs, --budget, resume by default, progress -------------------------
def tuple_model(tmp_path, rng) -> str:
    """A convolution whose output goes through a ReLU and a Sigmoid into prim::TupleConstruct,
    as a YOLO head returns its outputs: `collect_problems` met the tuple's operand, which has
    no spec, with a bare KeyError."""
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    lines = ["pnnx.Input in0 0 1 0 #0=(1,3,8,8)f32",
             "nn.Conv2d conv 1 1 0 1 bias=False dilation=(1,1) groups=1 in_channels=3 "
             "kernel_size=(3,3) out_channels=4 padding=(1,1) padding_mode=zeros stride=(1,1) "
             "@weight=(4,3,3,3)f32 #0=(1,3,8,8)f32 #1=(1,4,8,8)f32",
             "nn.ReLU relu 1 1 1 2 #1=(1,4,8,8)f32 #2=(1,4,8,8)f32",
             "nn.Sigmoid sigmoid 1 1 1 3 #1=(1,4,8,8)f32 #3=(1,4,8,8)f32",
             "prim::TupleConstruct tuple 2 1 2 3 4",
             "pnnx.Output out0 1 0 4"]
    path = tmp_path / "tuple.pnnx.param"
    path.write_text(f"7767517\n{len(lines)} 5\n" + "\n".join(lines) + "\n")
    import zipfile
    with zipfile.ZipFile(tmp_path / "tuple.pnnx.bin", "w") as z:
        z.writestr("conv.weight", w.tobytes())
    return str(path)


def fake_timing(monkeypatch, clock_step: float = 0.0) -> list:
    """Time candidates without running them (the flow is under test, not the kernels): a
    candidate's time comes from its position; each one advances the tuner's clock by
    `clock_step` seconds. Returns the list of candidates timed."""
    from kuiper.opencl.execution import tuner

    timed, now = [], [0.0]

    def fake(graph, problem, candidate, runtime, runs, flush=None):
        timed.append(candidate)
        now[0] += clock_step
        return 1e-3 * (1 + problem.candidates.index(candidate))

    monkeypatch.setattr(tuner, "time_candidate", fake)
    monkeypatch.setattr(tuner, "time", SimpleNamespace(monotonic=lambda: now[0]))  # its clock
    return timed


@needs_opencl
def test_tune_a_model_whose_output_is_a_tuple(capsys, cache_dir, tmp_path, rng, monkeypatch):
    timed = fake_timing(monkeypatch)
    model = tuple_model(tmp_path, rng)
    result = run_main(capsys, "tune", model, "--runs", "1", "--json")
    assert result.returncode == 0, result.stderr
    (problem,) = json.loads(result.stdout)["problems"]
    assert problem["kind"] == "conv" and problem["layers"] == ["conv"] and timed
    assert problem["best"]["seconds"] == 1e-3 and not problem["partial"]


def empty_batch_model(tmp_path, rng) -> str:
    """A convolution and a linear layer on a batch of 0 images: nothing to compute."""
    lines = ["pnnx.Input in0 0 1 0 #0=(0,3,8,8)f32",
             "nn.Conv2d conv 1 1 0 1 bias=False dilation=(1,1) groups=1 in_channels=3 "
             "kernel_size=(3,3) out_channels=4 padding=(1,1) padding_mode=zeros stride=(1,1) "
             "@weight=(4,3,3,3)f32 #0=(0,3,8,8)f32 #1=(0,4,8,8)f32",
             "nn.Flatten flat 1 1 1 2 end_dim=-1 start_dim=1 #1=(0,4,8,8)f32 #2=(0,256)f32",
             "nn.Linear fc 1 1 2 3 bias=True in_features=256 out_features=5 "
             "@weight=(5,256)f32 @bias=(5)f32 #2=(0,256)f32 #3=(0,5)f32",
             "pnnx.Output out0 1 0 3"]
    shapes = {"conv.weight": (4, 3, 3, 3), "fc.weight": (5, 256), "fc.bias": (5,)}
    return write_param(tmp_path, lines, {name: rng.standard_normal(shape).astype(np.float32)
                                         for name, shape in shapes.items()}, name="empty")


@needs_opencl
def test_a_batch_of_zero_has_nothing_to_tune(capsys, cache_dir, tmp_path, rng):
    """Its convolution and linear layer compute no value and are never bound: the cost model
    divided by their 0 work-groups (a bare ZeroDivisionError) before they were skipped."""
    model = empty_batch_model(tmp_path, rng)
    result = run_main(capsys, "tune", model, "--runs", "1", "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["problems"] == []
    result = run_main(capsys, "tune", model, "--runs", "1")
    assert result.returncode == 0 and "nothing to tune" in result.stdout


@pytest.mark.parametrize("device", ["h100", "two_core_cpu"])
def test_the_cost_model_rates_an_empty_gemm_without_dividing_by_zero(device):
    from kuiper.layers.opencl_gemm.cost import gemm_seconds, ranked_gemm_params
    from tests.opencl import described_devices

    described = getattr(described_devices, f"fake_{device}")()
    sets = ranked_gemm_params(described, 0, 5, 256, trans_b=True)
    assert sets and all(gemm_seconds(described, p, 0, 5, 256) >= 0 for p in sets)


@needs_opencl
def test_a_tune_goes_on_where_it_stopped_and_fresh_times_again(capsys, cache_dir, tmp_path,
                                                               rng, monkeypatch):
    timed = fake_timing(monkeypatch)
    model = tuple_model(tmp_path, rng)
    assert run_main(capsys, "tune", model).returncode == 0
    first = len(timed)
    result = run_main(capsys, "tune", model)  # the default: go on, nothing left to time
    assert result.returncode == 0 and len(timed) == first
    assert "1 of 1 problems are in the tuning cache already" in result.stderr
    assert "--fresh times them again" in result.stderr
    assert run_main(capsys, "tune", model, "--fresh").returncode == 0
    assert len(timed) == 2 * first
    assert run_main(capsys, "tune", model, "--fresh", "--resume").returncode == 2  # one or other


@needs_opencl
def test_a_budget_stops_the_tune_and_keeps_what_was_measured(capsys, cache_dir, tmp_path, rng,
                                                             monkeypatch):
    timed = fake_timing(monkeypatch, clock_step=1.0)  # each candidate "takes" one second
    model = tuple_model(tmp_path, rng)
    result = run_main(capsys, "tune", model, "--budget", "2.5", "--json")
    assert result.returncode == 0, result.stderr
    (problem,) = json.loads(result.stdout)["problems"]
    assert len(timed) == 3 < len(problem["candidates"])  # started at 0, 1 and 2 s
    assert problem["partial"] and problem["best"]["seconds"] == 1e-3
    assert "the time budget of 2.5 s is spent after 3 of" in result.stderr
    (entry,) = json.loads((cache_dir / "tuning.json").read_text())["devices"].popitem()[1] \
        .values()
    assert entry["partial"] is True and entry["seconds"] == 1e-3  # kept, marked partial
    # a partial winner is no reason to skip: the next tune times the problem in full
    assert run_main(capsys, "tune", model).returncode == 0
    assert len(timed) == 3 + len(problem["candidates"])
    entry = json.loads((cache_dir / "tuning.json").read_text())["devices"].popitem()[1]
    assert "partial" not in next(iter(entry.values()))


@pytest.mark.parametrize("budget", ["0", "-1", "nan"])
def test_a_budget_must_be_positive(capsys, conv_model, budget):
    result = run_main(capsys, "tune", conv_model, "--budget", budget)
    assert result.returncode == 1 and f"--budget {float(budget)}" in result.stderr


@needs_opencl
def test_progress_is_reported_per_candidate(cache_dir, tmp_path, rng, monkeypatch):
    from kuiper.opencl.execution import tuner

    fake_timing(monkeypatch)
    graph = kuiper.load(tuple_model(tmp_path, rng), backend="opencl")
    calls = []
    (problem,) = tuner.tune_graph(graph, runs=1, on_candidate=lambda *a: calls.append(a))
    total = len(problem.candidates)
    assert calls == [(k, total) for k in range(1, total + 1)]


@needs_opencl
def test_every_candidates_parameters_survive_the_cache(cache_dir, conv_model, tmp_path, rng):
    """What `store` writes of any candidate, the cache reads back as well formed (a "local":
    None of the depthwise kernels was once dropped as malformed)."""
    from kuiper.opencl.execution import tuner

    for path in (conv_model, tuple_model(tmp_path, rng)):
        graph = kuiper.load(path, backend="opencl")
        for problem in tuner.collect_problems(graph):
            device = graph.executor.runtime.device
            for candidate in tuner.candidate_list(problem, device):
                entry = json.loads(json.dumps({"algorithm": candidate.algorithm,
                                               "params": candidate.params, "seconds": 1.0}))
                assert tuning.well_formed(entry), entry


@pytest.mark.parametrize("content", [
    "[" * 100_000 + "]" * 100_000,                                       # nested too deep
    '{"version": 1, "devices": {"d": {"conv:a": ' + "9" * 5000 + "}}}",  # a 5,000-digit int
])
def test_a_hostile_cache_is_ignored_with_a_warning(cache_dir, content):
    cache_dir.mkdir()
    (cache_dir / "tuning.json").write_text(content)
    with pytest.warns(KuiperWarning, match="tuning cache .* cannot be read .* ignored"):
        assert tuning.lookup(fake_device(), "conv:a") is None


@pytest.mark.parametrize("kind", ["fifo", "dev_zero", "huge"])
def test_a_cache_that_is_not_a_small_file_is_ignored_with_a_warning(cache_dir, kind):
    """A FIFO blocked the load forever, /dev/zero was read until memory ran out."""
    cache_dir.mkdir()
    path = cache_dir / "tuning.json"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "dev_zero":
        path.symlink_to("/dev/zero")
    else:
        with open(path, "wb") as f:  # sparse: above the bound, no disk used
            f.truncate(17 << 20)
    with pytest.warns(KuiperWarning, match="tuning cache .* cannot be read .* ignored"):
        assert tuning.lookup(fake_device(), "conv:a") is None


@pytest.mark.parametrize("entry", [
    {"algorithm": "direct", "params": {"nv": [[[1]]]}},     # nesting inside a parameter
    {"algorithm": "direct", "params": {"nv": 10 ** 40}},    # an int no parameter has
    {"algorithm": "direct", "params": {"nv": 1}, "seconds": "fast"},
    {"algorithm": ["direct"], "params": {}},
    {"algorithm": "direct", "params": [1, 2]},
])
def test_entries_of_the_wrong_types_are_ignored_with_a_warning(cache_dir, entry):
    device = fake_device()
    cache_dir.mkdir()
    (cache_dir / "tuning.json").write_text(json.dumps(
        {"version": 1, "devices": {tuning.device_key(device): {"conv:a": entry,
                                                                "conv:b": WINNER}}}))
    with pytest.warns(KuiperWarning, match="holds 1 entry that `kuiper tune` did not write"):
        assert tuning.lookup(device, "conv:a") is None
    assert tuning.lookup(device, "conv:b") == WINNER  # the good entry beside it stays


@needs_opencl
def test_a_hostile_cache_never_fails_a_load(cache_dir, conv_model):
    """The whole way: a load of a convolution reads the cache, warns, and runs on the cost
    model's choice (an OperatorError blaming the convolution, before)."""
    cache_dir.mkdir()
    (cache_dir / "tuning.json").write_text("[" * 100_000)
    with pytest.warns(KuiperWarning, match="tuning cache"):
        graph = kuiper.load(conv_model, backend="opencl")
    layer = next(op.layer for op in graph.order if op.type == "nn.Conv2d")
    assert layer.algorithm_reason == "cost model"


def test_tune_usage_errors(capsys, conv_model):
    assert run_main(capsys, "tune", conv_model, "--backend", "cpu").returncode == 2
    result = run_main(capsys, "tune", conv_model, "--runs", "0")
    assert result.returncode == 1 and "--runs 0" in result.stderr
    result = run_main(capsys, "tune", "missing.pnnx.param")
    assert result.returncode == 1 and "missing.pnnx.param" in result.stderr


@needs_opencl
@pytest.mark.slow
@pytest.mark.campaign  # every candidate of four problems built on PoCL: 2 minutes on 2 cores
def test_tune_an_exported_model(capsys, cache_dir, export_model):
    """A pnnx export with convolutions of three kinds and a linear head: every distinct
    problem is tuned once (two equal convolutions share one), and the tuned graph still
    computes what PyTorch does."""

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = torch.nn.Conv2d(3, 8, 3, padding=1)
            self.b = torch.nn.Conv2d(8, 8, 3, padding=1, groups=8)
            self.c = torch.nn.Conv2d(8, 8, 1)
            self.d = torch.nn.Conv2d(8, 8, 1)
            self.fc = torch.nn.Linear(8, 5)

        def forward(self, x):
            y = self.d(self.c(torch.relu(self.b(self.a(x)))))
            return self.fc(y.mean((2, 3)))

    torch.manual_seed(0)
    net = Net().eval()
    x = torch.randn(1, 3, 10, 12)
    path = export_model("tune_net", net, (x,))
    result = run_main(capsys, "tune", str(path), "--runs", "1")
    assert result.returncode == 0, result.stderr
    rows = [re.split(r"\s{2,}", r) for r in result.stdout.splitlines()[2:-1]]
    assert [r[1] for r in rows] == ["conv", "conv", "conv", "gemm"]
    assert rows[2][0].endswith("(+1)")       # c and d: one problem
    graph = kuiper.load(path, backend="opencl")
    reasons = {op.name: op.layer.algorithm_reason for op in graph.order
               if getattr(op.layer, "algorithm", "")}
    assert set(reasons.values()) == {"tuned"}
    with torch.no_grad():
        np.testing.assert_allclose(graph(x.numpy()), net(x).numpy(), rtol=1e-4, atol=1e-4)


@needs_opencl
def test_candidates_are_timed_with_the_models_epilogue_and_cold_caches(monkeypatch, cache_dir,
                                                                        export_model):
    """A convolution followed by SiLU and a residual add is timed storing through that fused
    epilogue (what the model runs), and on a CPU device each timed run follows a cache flush."""
    from kuiper.opencl.device.runtime import OpenCLRuntime, is_cpu
    from kuiper.opencl.execution import tuner as tune

    torch.manual_seed(0)

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = torch.nn.Conv2d(4, 4, 3, padding=1)

        def forward(self, x):
            return torch.nn.functional.silu(self.conv(x)) + x

    path = export_model("tune_silu_residual", Block().eval(), torch.randn(1, 4, 9, 11))
    graph = kuiper.load(path, backend="opencl")
    (problem,) = tune.collect_problems(graph)
    bound = []
    real_bind = type(problem.op.layer).bind

    def spy(layer, *args, **kwargs):   # the executor hands epilogue= and residual= to bind
        bound.append((kwargs.get("epilogue"), kwargs.get("residual")))
        return real_bind(layer, *args, **kwargs)

    flushes = []
    real_flush = tune.cache_flush

    def counting_flush(runtime):
        flush = real_flush(runtime)
        return None if flush is None else (lambda: (flushes.append(1), flush()))

    monkeypatch.setattr(type(problem.op.layer), "bind", spy)
    monkeypatch.setattr(tune, "cache_flush", counting_flush)
    runtime = OpenCLRuntime.shared(profiling=True)
    candidate = tune.candidate_list(problem, runtime.device)[0]
    seconds = tune.time_candidate(graph, problem, candidate, runtime, runs=3,
                                  flush=tune.cache_flush(runtime))
    assert seconds > 0
    ((epilogue, residual),) = bound
    assert epilogue is graph.plan.epilogues[problem.op.name] and epilogue.residual is not None
    assert residual is not None and residual.shape == (1, 4, 9, 11)
    assert len(flushes) == (3 if is_cpu(runtime.device) else 0)


@needs_opencl
def test_tune_skips_the_projections_a_fused_attention_absorbed(capsys, cache_dir, export_model):
    """fuse_attention absorbs BERT's Q/K/V Linear layers; they are never bound, and `kuiper
    tune` died on them (AttributeError in gemm_problem, H200, BERT-base). The tune times the
    Linear layers that run, and the tuned model still matches PyTorch."""
    from tests.models.zoo import BertLayer

    torch.manual_seed(3)
    module = BertLayer(48, 4).eval()
    x, mask = torch.randn(1, 19, 48), torch.zeros(1, 1, 1, 19)
    mask[..., -3:] = -1e4
    model = str(export_model("tune-bert-layer", module, (x, mask)))
    result = run_main(capsys, "tune", model, "--runs", "1")
    assert result.returncode == 0, result.stderr
    graph = kuiper.load(model, backend="opencl")
    absorbed = {name for name in graph.plan.absorbed if "query" in name or "value" in name}
    assert absorbed, "this test needs a model whose projections fuse_attention absorbs"
    timed = [line.split()[0] for line in result.stdout.splitlines()[2:] if " gemm " in line]
    assert timed and not absorbed & set(timed)
    with torch.no_grad():
        want = module(x, mask).numpy()
    np.testing.assert_allclose(graph(x.numpy(), mask.numpy()), want, rtol=1e-4, atol=1e-4)
