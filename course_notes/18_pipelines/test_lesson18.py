"""Lesson 18: two (and three) models chained on the device equal the host chain, and their
intermediates never visit the host; a Ray job's rows are gathered in the order of the inputs."""

import numpy as np
import pytest
import torch

from kuiper.course.lessons import check_array, implementation, quiet_output, require_opencl

REFERENCE = {
    "run_on_device": "kuiper.batch.pipeline:run_on_device",
    "collect": "kuiper.batch.ray_job:collect",
}
CHECK_TIME = "about half a minute (Ray starts a local cluster)"
ex = implementation(__file__, REFERENCE)
SHAPE = (1, 3, 37, 23)   # awkward on purpose: odd sizes, a stride-2 convolution


class Backbone(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.conv2 = torch.nn.Conv2d(8, 12, 3, stride=2, padding=1)

    def forward(self, x):
        return torch.relu(self.conv2(torch.relu(self.conv1(x))))


class Head(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(12, 4, 1)
        self.fc = torch.nn.Linear(4 * 19 * 12, 7)

    def forward(self, x):
        return self.fc(torch.flatten(self.conv(x), 1))


class Split(torch.nn.Module):   # one input, two outputs
    def forward(self, x):
        return torch.sigmoid(x), x * 0.5 - 1.0


class Join(torch.nn.Module):    # two inputs, one output
    def forward(self, a, b):
        return a * b + a


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """The four tiny models (seeded weights), exported with pnnx and loaded on OpenCL, and
    the PyTorch modules they came from."""
    require_opencl()
    import kuiper
    from kuiper.io.export import export  # the engine's (a course clone has no tests/)

    torch.manual_seed(18)
    folder = tmp_path_factory.mktemp("lesson18")
    features = torch.rand(1, 12, 19, 12)
    modules = {"backbone": (Backbone(), (torch.rand(SHAPE),)), "head": (Head(), (features,)),
               "split": (Split(), (features,)), "join": (Join(), (features, features))}
    graphs = {}
    with quiet_output():
        for name, (module, example) in modules.items():
            param = export(module.eval(), example, folder / name / "model")
            graphs[name] = kuiper.load(param, backend="opencl")
    yield graphs, {name: module for name, (module, _) in modules.items()}
    for graph in graphs.values():
        graph.close()


def inputs(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(SHAPE).astype(np.float32)


def test_two_models_on_the_device_equal_the_host_chain(models):
    graphs, modules = models
    backbone, head = graphs["backbone"], graphs["head"]
    for seed in range(3):
        x = inputs(seed)
        got = ex.run_on_device([backbone, head], x)
        assert isinstance(got, np.ndarray), (
            f"run_on_device([backbone, head], x) should return the head's output as a NumPy "
            f"array, got {type(got).__name__} (only device_outputs=True keeps it on the device)")
        check_array(got, head(backbone(x)), f"backbone then head on the device (seed {seed}) "
                    "against head(backbone(x)) through the host", exact=True)
        with torch.no_grad():
            want = modules["head"](modules["backbone"](torch.from_numpy(x))).numpy()
        check_array(got, want, f"the device chain against PyTorch (seed {seed})", rtol=1e-4)


def test_the_intermediate_never_visits_the_host(models, monkeypatch):
    """Spies on every way a device value reaches the host: the executor's download of an
    output, and pyopencl's `Array.get`. Only the head's final output may come down."""
    import pyopencl.array as cla

    from kuiper.opencl.execution.executor import OpenCLExecutor

    graphs, _ = models
    backbone, head = graphs["backbone"], graphs["head"]
    downloads, gets, calls = [], [], []
    download, get = OpenCLExecutor._download, cla.Array.get

    def spy_download(self, name, wait_for):
        downloads.append("backbone" if self is backbone.executor else "head")
        return download(self, name, wait_for)

    def spy_get(self, *args, **kwargs):
        gets.append(self.shape)
        return get(self, *args, **kwargs)

    def spy_run(name, executor):
        run = executor.run

        def spied(inputs, *args, **kwargs):
            calls.append((name, [type(x).__name__ for x in inputs], kwargs.get("device_outputs")))
            return run(inputs, *args, **kwargs)
        return spied

    x = inputs(7)
    want = head(backbone(x))
    monkeypatch.setattr(OpenCLExecutor, "_download", spy_download)
    monkeypatch.setattr(cla.Array, "get", spy_get)
    monkeypatch.setattr(backbone.executor, "run", spy_run("backbone", backbone.executor))
    monkeypatch.setattr(head.executor, "run", spy_run("head", head.executor))
    got = ex.run_on_device([backbone, head], x)
    assert [c[0] for c in calls] == ["backbone", "head"], (
        f"each graph should run once, backbone first; the graphs ran {[c[0] for c in calls]}")
    assert calls[0][2] is True, (
        "the backbone should be called with device_outputs=True (so that its output stays on "
        f"the device); it was called with device_outputs={calls[0][2]!r}")
    assert calls[1][1] == ["Array"], (
        f"the head should get the backbone's pyopencl Array; it got {calls[1][1]}")
    assert "backbone" not in downloads and not gets, (
        f"the backbone's output went to the host ({downloads.count('backbone')} download(s) "
        f"by the backbone's executor, .get() of device arrays of shapes {gets}): pass its "
        "device array to the head as it is")
    check_array(got, want, "the head's output", exact=True)


def test_device_outputs_keeps_the_last_result_on_the_device(models):
    import pyopencl.array as cla

    graphs, _ = models
    x = inputs(11)
    got = ex.run_on_device([graphs["backbone"], graphs["head"]], x, device_outputs=True)
    assert isinstance(got, cla.Array), (
        f"with device_outputs=True the head's output should stay a pyopencl Array, got "
        f"{type(got).__name__}")
    check_array(got.get(), graphs["head"](graphs["backbone"](x)), "the head's output, "
                "downloaded after the chain", exact=True)


def test_a_device_array_goes_in_and_several_outputs_feed_several_inputs(models):
    """Three stages: backbone -> split (two outputs) -> join (two inputs), fed a pyopencl
    array that is already on the device."""
    import pyopencl.array as cla

    graphs, _ = models
    backbone, split, join = graphs["backbone"], graphs["split"], graphs["join"]
    x = inputs(13)
    on_device = cla.to_device(backbone.executor.runtime.queue, x)
    got = ex.run_on_device([backbone, split, join], on_device)
    check_array(got, join(*split(backbone(x))), "backbone -> split -> join on the device "
                "against the same chain through the host (split returns a tuple: pass both "
                "items to join)", exact=True)


# --- collect ----------------------------------------------------------------------------------

class ShuffledRows:
    """What collect needs of a Ray dataset: take_all(), here in an order of Ray's choosing."""

    def __init__(self, rows, seed):
        order = np.random.default_rng(seed).permutation(len(rows))
        self.rows = [rows[i] for i in order]

    def take_all(self):
        return list(self.rows)


def result_rows(files, seed):
    rng = np.random.default_rng(seed)
    return [{"path": np.str_(f), "out0": rng.standard_normal((1, 5)).astype(np.float32),
             "out1": rng.integers(0, 9, (3,))} for f in files]


def test_collect_puts_the_rows_back_in_the_order_of_the_files():
    files = [f"in/x{i:03d}.npy" for i in range(23)]
    rows = result_rows(files, 18)
    got = ex.collect(ShuffledRows(rows, 1), files)
    assert sorted(got) == ["out0", "out1", "path"], f"columns: {sorted(got)}"
    check_array(got["path"], np.asarray(files), "the path column (in the order of files)",
                exact=True)
    check_array(got["out0"], np.stack([r["out0"] for r in rows]), "out0, stacked in the "
                "order of files", exact=True)
    check_array(got["out1"], np.stack([r["out1"] for r in rows]), "out1 (integers)", exact=True)


def test_collect_sorts_by_position_not_by_name():
    files = ["b.npy", "c.npy", "a.npy"]   # the order the job was given, not alphabetical
    got = ex.collect(ShuffledRows(result_rows(files, 3), 2), files)
    check_array(got["path"], np.asarray(files), "the path column", exact=True)


def test_collect_of_no_rows_is_empty():
    got = ex.collect(ShuffledRows([], 0), [])
    assert got == {}, f"no rows should give an empty dict, got {got!r}"


def test_collect_on_a_real_ray_job(tmp_path):
    """Kuiper's digits model on a local Ray, two workers: the rows, gathered by your collect,
    are the arrays of a plain loop, in the order of the files."""
    ray = pytest.importorskip("ray", reason='Ray is an extra: pip install "kuiper-engine[ray]"')
    import kuiper
    from kuiper.batch.ray_job import ray_dataset
    from kuiper.demo import DIGITS_PARAM

    digits = str(DIGITS_PARAM)
    rng = np.random.default_rng(18)
    files = []
    for i in range(12):
        files.append(str(tmp_path / f"x{11 - i:02d}.npy"))   # not in sorted order
        np.save(files[-1], rng.standard_normal((1, 1, 8, 8)).astype(np.float32))
    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        got = ex.collect(ray_dataset(digits, files, workers=2, batch_size=5), files)
    finally:
        if started:
            ray.shutdown()
    check_array(got["path"], np.asarray(files), "the path column", exact=True)
    with kuiper.load(digits) as graph:
        want = np.stack([graph(np.load(f))[0] for f in files])   # a row: one input's output
    check_array(got["out0"], want, "out0 against a plain loop of graph(x)", exact=True)
