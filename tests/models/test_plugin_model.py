"""The example plugin (tests/plugins/kuiper-swish) end to end, as a user would use it.

A PyTorch model uses the plugin's module `kuiper_swish.modules.Swish2`; pnnx keeps that module
as one operator (`moduleop`); Kuiper runs it through the plugin's layers on both backends and
agrees with PyTorch. Installed with pip, the plugin is found through its entry point, and
`kuiper run` and `kuiper compare --against torch` work on both backends without any change to
Kuiper itself.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import kuiper
from kuiper.core import registry
from kuiper.testing import assert_close
from tests.conftest import opencl_available
from tests.models.common import image, torch_outputs

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
PLUGIN = ROOT / "tests" / "plugins" / "kuiper-swish"
TYPE = "kuiper_swish.modules.Swish2"
BETA = 1.5  # not the module's default: pnnx does not write it, so the tests pass params=
PARAMS = {TYPE: {"beta": BETA}}


@pytest.fixture(scope="module")
def plugin_on_path():
    sys.path.insert(0, str(PLUGIN))
    try:
        yield
    finally:
        sys.path.remove(str(PLUGIN))


def swish_net():
    from kuiper_swish.modules import Swish2

    class SwishNet(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = torch.nn.Conv2d(3, 8, 3, padding=1)
            self.act1 = Swish2(8, beta=BETA)
            self.conv2 = torch.nn.Conv2d(8, 5, 3, stride=2)
            self.act2 = Swish2(5, beta=BETA)

        def forward(self, x):
            return self.act2(self.conv2(self.act1(self.conv1(x))))

    torch.manual_seed(0)
    net = SwishNet().eval()
    with torch.no_grad():
        for act in (net.act1, net.act2):
            act.alpha.normal_()
    return net


@pytest.fixture(scope="module")
def swishnet(plugin_on_path, export_model):
    net = swish_net()
    example = torch.rand(1, 3, 17, 13, generator=torch.Generator().manual_seed(0))
    return net, export_model("swishnet", net, example, moduleop=[TYPE])


def test_pnnx_keeps_the_module_as_one_operator(swishnet):
    text = swishnet[1].read_text()
    assert f"{TYPE} " in text and "@alpha=(1,8,1,1)f32" in text and "@alpha=(1,5,1,1)f32" in text
    assert "beta" not in text  # a plain attribute: the reason for params=


@pytest.mark.parametrize("shape", [(1, 3, 17, 13), (3, 3, 20, 31)], ids=["export", "resized"])
def test_the_plugin_runs_the_model_like_pytorch(swishnet, backend, rng, shape):
    net, param = swishnet
    x = image(rng, *shape)
    graph = kuiper.load(param, backend=backend, plugins=["kuiper_swish"], params=PARAMS)
    assert graph.fallbacks == []  # the plugin has an OpenCL twin
    (expected,) = torch_outputs(net, [x])
    assert_close(graph(x), expected, what=f"SwishNet on {backend}")
    cls = registry.lookup(TYPE, backend)
    assert registry.origin(cls) == "plugin kuiper_swish"


def test_without_params_the_module_default_is_used(swishnet, rng):
    """What the docs warn about: pnnx did not write beta, so without params= the layer uses
    the module's default (1.0), and the output differs from the model's by that factor."""
    net, param = swishnet
    x = image(rng, 1, 3, 17, 13)
    graph = kuiper.load(param, plugins=["kuiper_swish"])
    (expected,) = torch_outputs(net, [x])
    assert not np.allclose(graph(x), expected, atol=1e-3)


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """The example plugin installed with pip into a folder of its own (no network needed)."""
    # Built offline (--no-build-isolation), with this environment's setuptools: it builds
    # wheels by itself from 70.1 on, older ones need the `wheel` package beside them.
    setuptools = pytest.importorskip("setuptools", reason="building the plugin needs setuptools")
    if (tuple(int(p) for p in setuptools.__version__.split(".")[:2]) < (70, 1)
            and importlib.util.find_spec("wheel") is None):
        pytest.skip(f"setuptools {setuptools.__version__} without the wheel package cannot build "
                    "the example plugin offline (pip install 'setuptools>=70.1')")
    work = tmp_path_factory.mktemp("plugin")
    source = shutil.copytree(PLUGIN, work / "kuiper-swish")  # builds write into the source
    target = work / "site"
    result = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
                             "--no-build-isolation", "--no-index", "--target", str(target),
                             str(source)], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    return target


def cli(installed_site, *args, cwd):
    path = [str(installed_site), str(ROOT), os.environ.get("PYTHONPATH", "")]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in path if p)}
    return subprocess.run([sys.executable, "-m", "kuiper", *args], capture_output=True,
                          text=True, timeout=300, env=env, cwd=cwd)


def test_the_installed_plugin_is_found_by_its_entry_point(installed, tmp_path):
    ops = cli(installed, "ops", cwd=tmp_path)
    assert ops.returncode == 0, ops.stderr
    rows = [line for line in ops.stdout.splitlines() if line.startswith(TYPE)]
    assert len(rows) == 1 and rows[0].split()[1:3] == ["yes", "yes"], rows
    assert rows[0].endswith("plugin swish = kuiper_swish (entry point)"), rows[0]


@pytest.mark.parametrize("backend_name", ["cpu", "opencl"])
def test_run_and_compare_from_the_command_line(installed, swishnet, tmp_path, rng, backend_name):
    if backend_name == "opencl" and not opencl_available():
        pytest.skip("no OpenCL device")
    net, param = swishnet
    x = image(rng, 2, 3, 17, 13)
    np.save(tmp_path / "x.npy", x)
    run = cli(installed, "run", str(param), "--backend", backend_name, "--input", "x.npy",
              "--output", "y.npy", "--param", f"{TYPE}:beta={BETA}", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    (expected,) = torch_outputs(net, [x])
    assert_close(np.load(tmp_path / "y.npy"), expected, what=f"kuiper run on {backend_name}")
    compare = cli(installed, "compare", str(param), "--against", "torch", "--backends",
                  f"cpu,{backend_name}" if backend_name != "cpu" else "cpu", "--param",
                  f"{TYPE}:beta={BETA}", cwd=tmp_path)
    assert compare.returncode == 0, compare.stdout + compare.stderr
    assert "torch vs cpu" in compare.stdout and "MISMATCH" not in compare.stdout


def test_the_testing_recipe_of_plugins_md_runs(plugin_on_path):
    """kuiper/PLUGINS.md shows a plugin author testing a layer with kuiper.testing: run it."""
    from tests.conftest import opencl_available

    if not opencl_available():
        pytest.skip("the recipe runs both backends: no OpenCL device here")
    text = (ROOT / "kuiper" / "PLUGINS.md").read_text()
    section = text.split("### Your plugin's own tests", 1)[1]
    code = section.split("```python", 1)[1].split("```", 1)[0]
    namespace: dict = {}
    exec(compile(code, "kuiper/PLUGINS.md", "exec"), namespace)  # noqa: S102 - our own docs
    namespace["test_swish2_on_both_backends"]()
