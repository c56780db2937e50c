"""Shared fixtures.

`backend`: every layer and model test body runs once per backend ("cpu", "opencl").
`rng`: a seeded NumPy generator, so every failure reproduces.
`export_model`: export a PyTorch module with pnnx once per test session (cached by name).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

BACKENDS = ["cpu", "opencl"]


def opencl_unavailable_reason() -> str | None:
    """None when Kuiper finds an OpenCL device that builds kernels, else why not (no driver, or
    PoCL that cannot compile for this CPU: kuiper/opencl/device/runtime.py)."""
    try:
        from kuiper.opencl.device.runtime import choose_device
        choose_device()
        return None
    except Exception as e:  # noqa: BLE001 - any failure means "no device"
        return str(e) or type(e).__name__


def opencl_available() -> bool:
    return opencl_unavailable_reason() is None


def skip_without_opencl(what: str = "") -> None:
    """Skip the calling test where Kuiper has no OpenCL device, saying why (`what`: what the
    test needs it for)."""
    why = opencl_unavailable_reason()
    if why is not None:
        pytest.skip(f"{what + ': ' if what else ''}no OpenCL device ({why})")


@pytest.fixture(params=BACKENDS)
def backend(request) -> str:
    if request.param == "opencl":
        skip_without_opencl()
    return request.param


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(1234)


@pytest.fixture(scope="session", autouse=True)
def conversion_cache(tmp_path_factory) -> None:
    """Models that tests convert with pnnx (kuiper/graph/convert.py) go to a temporary cache, not
    the user's ~/.cache/kuiper (children started by tests inherit the variable)."""
    os.environ.setdefault("KUIPER_CACHE_DIR", str(tmp_path_factory.mktemp("kuiper-cache")))


@pytest.fixture(scope="session")
def export_dir(tmp_path_factory) -> Path:
    """Where exports go: a fresh temporary folder, or $KUIPER_EXPORTS when set.

    KUIPER_EXPORTS keeps exports between runs and lets a machine without pnnx (the GPU machine)
    run the model tests on models exported elsewhere and carried along.
    """
    fixed = os.environ.get("KUIPER_EXPORTS")
    if fixed:
        Path(fixed).mkdir(parents=True, exist_ok=True)
        return Path(fixed)
    return tmp_path_factory.mktemp("pnnx-exports")


@pytest.fixture(scope="session")
def export_model(export_dir):
    """export_model(name, module, example_inputs) -> path of <name>.pnnx.param (cached)."""
    cache: dict[str, Path] = {}

    def export(name: str, module, inputs, **kwargs) -> Path:
        if name not in cache:
            ready = export_dir / name / "model.pnnx.param"
            if os.environ.get("KUIPER_EXPORTS") and ready.exists():
                cache[name] = ready  # exported by an earlier run with the same KUIPER_EXPORTS
            else:
                from tests.models.export import export_with_pnnx
                cache[name] = export_with_pnnx(export_dir / name, module, inputs, **kwargs)
        return cache[name]

    return export


def pytest_configure(config):
    os.environ.setdefault("PYOPENCL_NO_CACHE", "0")
    # No JIT helper processes (kuiper/opencl/device/jit_helper.py) on a cold PoCL cache: the
    # test run's workers (pytest-xdist, README) already keep the cores busy, and helpers only
    # competed with them. tests/opencl/test_jit_helpers.py turns them on where it tests them.
    os.environ.setdefault("KUIPER_JIT_HELPERS", "0")


def pytest_addoption(parser):
    parser.addoption(
        "--sample-per-test", type=int, default=0, metavar="N",
        help="keep at most N cases of each test function, spread evenly over its parameters "
             "(the normal run's Oclgrind pass over the layer tests; 0: every case)")
    parser.addoption(
        "--sample-functions", type=int, default=1, metavar="N",
        help="keep every N-th test function only, in collection order (with --sample-per-test: "
             "the normal run's short Oclgrind pass)")
    parser.addoption(
        "--full-sweeps", action="store_true",
        help="run every case of the sweeps (tests marked `sweep`, cases marked `full_sweep`); "
             "the normal run keeps a few of each")


def spread(cases: list, count: int) -> list:
    """At most `count` of `cases`: the first, then every len/count-th (all the parameters'
    values still show up, in fewer combinations)."""
    step = len(cases) / count
    return [cases[int(i * step)] for i in range(min(count, len(cases)))]


@pytest.hookimpl(trylast=True)  # after -k and -m have deselected theirs
def pytest_collection_modifyitems(config, items):
    """Fewer cases of some test functions (their parametrizations, in collection order): a
    case marked `full_sweep` is left out and `@pytest.mark.sweep(keep=N)` keeps N of a sweep,
    unless --full-sweeps asks for all; --sample-per-test N keeps N cases of every function,
    and --sample-functions N every N-th function only."""
    per_test = config.getoption("--sample-per-test")
    every = max(1, config.getoption("--sample-functions"))
    full = config.getoption("--full-sweeps")
    functions: dict[str, list] = {}
    for item in items:
        functions.setdefault(item.nodeid.split("[")[0], []).append(item)
    kept = set()
    for index, group in enumerate(functions.values()):
        if index % every:
            continue
        if not full:
            group = [item for item in group if item.get_closest_marker("full_sweep") is None]
        if not group:
            continue
        sweep = group[0].get_closest_marker("sweep")
        keep = sweep.kwargs.get("keep", 4) if sweep is not None and not full else len(group)
        if per_test > 0:
            keep = min(keep, per_test)
        kept.update(id(item) for item in spread(group, keep))
    deselected = [item for item in items if id(item) not in kept]
    if deselected:
        items[:] = [item for item in items if id(item) in kept]
        config.hook.pytest_deselected(items=deselected)
    if getattr(config.option, "dist", "no") != "no" or hasattr(config, "workerinput"):
        long_files_first(items)


def long_files_first(items: list) -> None:
    """Under pytest-xdist (the README's `-n 2 --dist loadfile`), the files holding `slow`
    tests go first, each file's tests in their order. A worker takes the next file when it
    finishes one, in collection order: a long file collected last (tests/opencl/test_oclgrind.py
    sorts late) kept one worker busy for minutes while the other had nothing left to take. Longest
    jobs first leaves short files to fill the end. Every worker sorts the same way, as xdist
    requires."""
    slow = {item.nodeid.split("::")[0] for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.nodeid.split("::")[0] not in slow)   # stable
