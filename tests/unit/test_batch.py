"""Batch inference (kuiper/batch/, `kuiper batch`): a folder of inputs through a model in one
process and on Ray Data, with the same results as a plain loop of `graph(x)`.

The digits model that ships with Kuiper (1x1x8x8 -> 1x10) keeps these tests fast; inputs are
seeded arrays and drawn images. The Ray tests start a local Ray (two CPUs) once for the module;
without Ray installed they are skipped, and say how to install it.
"""

from __future__ import annotations

import logging

import numpy as np
import pytest

import kuiper
from kuiper.batch.local import run_local, save_outputs
from kuiper.batch.predictor import Predictor, input_files
from kuiper.testing import assert_close
from tests.unit.test_cli import assert_user_error, run_main

DIGITS = "kuiper/demo/digits.pnnx.param"
COUNT = 40


@pytest.fixture
def folder(tmp_path):
    """COUNT seeded inputs: half saved with their batch dimension of 1, half without."""
    rng = np.random.default_rng(5)
    path = tmp_path / "inputs"
    path.mkdir()
    for i in range(COUNT):
        x = rng.standard_normal((1, 1, 8, 8)).astype(np.float32)
        np.save(path / f"x{i:03d}.npy", x if i % 2 else x[0])
    return path


def plain_loop(files, backend="cpu"):
    """What a user writes without Kuiper's batch runner: one graph, one call per input."""
    with kuiper.load(DIGITS, backend=backend) as graph:
        return {f: graph(np.load(f).reshape(1, 1, 8, 8)) for f in files}


def test_kuiper_batch_gives_the_plain_loops_arrays(backend, folder, tmp_path, capsys):
    result = run_main(capsys, "batch", DIGITS, str(folder), "-o", str(tmp_path / "out"),
                      "--backend", backend, "--chunk", "7")
    assert result.returncode == 0, result.stderr
    assert f"{COUNT} input(s) in " in result.stdout and "inputs/s" in result.stdout
    files = input_files([str(folder)])
    assert len(files) == COUNT
    for path, expected in plain_loop(files, backend).items():
        saved = np.load(tmp_path / "out" / f"{path.rsplit('/', 1)[1][:-4]}.npy")
        np.testing.assert_array_equal(saved, expected[0])  # the same arrays, bit for bit


def test_model_batch_runs_several_inputs_per_call_within_rounding(folder):
    files = input_files([str(folder)])
    one = Predictor(DIGITS)({"path": np.asarray(files)})
    eight = Predictor(DIGITS, model_batch=8)({"path": np.asarray(files)})
    assert_close(eight["out0"], one["out0"])  # another summation order: float32 rounding
    assert list(one["path"]) == files and one["out0"].shape == (COUNT, 10)


def test_a_predictor_takes_arrays_too_and_says_what_a_batch_lacks():
    x = np.random.default_rng(0).standard_normal((3, 1, 8, 8)).astype(np.float32)
    predictor = Predictor(DIGITS)
    out = predictor({"input": x, "id": np.arange(3)})
    assert set(out) == {"id", "out0"} and out["out0"].shape == (3, 10)
    with kuiper.load(DIGITS) as graph:
        np.testing.assert_array_equal(out["out0"][1], graph(x[1:2])[0])
    with pytest.raises(kuiper.KuiperError, match="'path' or an 'input' column"):
        predictor({"x": x})


def test_images_need_a_task_and_then_match_kuiper_run(tmp_path, capsys):
    from PIL import Image

    from kuiper.io.inputs import load_image
    from kuiper.io.preprocess import Preprocessing

    (tmp_path / "pics").mkdir()
    for i, grey in enumerate((10, 128, 250)):
        Image.new("L", (12, 9), grey).save(tmp_path / "pics" / f"p{i}.png")
    assert_user_error(run_main(capsys, "batch", DIGITS, str(tmp_path / "pics")),
                      "images are prepared for the model's task", "--task")
    result = run_main(capsys, "batch", DIGITS, str(tmp_path / "pics"), "--task", "raw",
                      "-o", str(tmp_path / "out"))
    assert result.returncode == 0, result.stderr
    with kuiper.load(DIGITS) as graph:
        port, prep = graph.inputs[0], Preprocessing.for_task("raw", 1)
        for i in range(3):
            expected = graph(load_image(tmp_path / "pics" / f"p{i}.png", port, prep))
            np.testing.assert_array_equal(np.load(tmp_path / "out" / f"p{i}.npy"), expected[0])


def test_bad_inputs_and_options_are_kuiper_errors(folder, tmp_path, capsys):
    np.save(folder / "x001.png.npy", np.zeros((2, 1, 8, 8), np.float32))  # two inputs in one
    result = run_main(capsys, "batch", DIGITS, str(folder / "x001.png.npy"))
    assert result.returncode == 1 and "Traceback" not in result.stderr  # found when read
    assert "x001.png.npy: holds an array of shape (2, 1, 8, 8); each file is one input" \
        in result.stderr
    (folder / "x001.png.npy").unlink()
    np.save(tmp_path / "x001.npy", np.zeros((1, 1, 8, 8), np.float32))
    assert_user_error(run_main(capsys, "batch", DIGITS, str(folder), str(tmp_path / "x001.npy"),
                               "-o", str(tmp_path / "out")), "would both save")
    assert_user_error(run_main(capsys, "batch", DIGITS, str(tmp_path / "empty")),
                      "no such file or folder")
    assert run_main(capsys, "batch", DIGITS, str(folder), "--chunk", "0").returncode == 1


def test_progress_is_one_log_line_off_a_terminal(folder, caplog):
    caplog.set_level(logging.INFO, logger="kuiper")
    files = input_files([str(folder)])
    saved = []
    report = run_local(Predictor(DIGITS), files, saved.append, chunk=16)
    assert [len(b["path"]) for b in saved] == [16, 16, 8] and report.count == COUNT
    messages = [r.getMessage() for r in caplog.records]
    assert messages == [f"{COUNT} input(s) through digits.pnnx.param on cpu..."]  # one line
    caplog.clear()
    caplog.set_level(logging.DEBUG, logger="kuiper")  # -v: how long it took, too
    run_local(Predictor(DIGITS), files, chunk=16)
    assert caplog.records[-1].getMessage().startswith(
        f"{COUNT} input(s) through digits.pnnx.param on cpu: {COUNT} inputs in ")


def test_progress_is_a_bar_on_a_terminal(monkeypatch, caplog):
    import io
    import sys

    from kuiper.core.progress import progress

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    screen = Terminal()
    monkeypatch.setattr(sys, "stderr", screen)
    caplog.set_level(logging.INFO, logger="kuiper")
    with progress("crunching", 4, unit="items") as advance:
        for _ in range(4):
            advance()
    drawn = screen.getvalue()
    assert "crunching" in drawn and "4/4" in drawn  # rich's bar, drawn on the terminal
    assert caplog.records == []  # and no "crunching..." line beside it


# --- Ray --------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def ray_cluster():
    ray = pytest.importorskip("ray", reason='Ray is an extra: pip install "kuiper-engine[ray]"')
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


@pytest.mark.slow
def test_the_same_job_on_ray_gives_the_plain_loops_arrays(ray_cluster, folder, tmp_path):
    """Ray Data's map_batches with Kuiper's Predictor, two workers each loading the model once,
    on both backends: the same arrays as the plain loop."""
    from kuiper.batch.ray_job import collect, ray_dataset

    files = input_files([str(folder)])
    backends = ["cpu"] + (["opencl"] if opencl_device() else [])
    for backend in backends:
        dataset = ray_dataset(DIGITS, files, backend=backend, workers=2, batch_size=6)
        got = collect(dataset, files)
        assert list(got["path"]) == files
        expected = plain_loop(files, backend)
        for path, out in zip(files, got["out0"]):
            np.testing.assert_array_equal(out, expected[path][0])
    # the command line's --ray writes what the local run writes
    from kuiper.batch.ray_job import run_on_ray

    assert run_on_ray(DIGITS, files, save_outputs(tmp_path / "ray"), workers=2) == COUNT
    run_local(Predictor(DIGITS), files, save_outputs(tmp_path / "local"))
    for path in sorted((tmp_path / "local").iterdir()):
        np.testing.assert_array_equal(np.load(path), np.load(tmp_path / "ray" / path.name))


def opencl_device() -> bool:
    from tests.conftest import opencl_available

    return opencl_available()
