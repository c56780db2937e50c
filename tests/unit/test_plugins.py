"""Plugins: layers from outside Kuiper, found by path, module name or entry point.

Most tests write a tiny plugin of their own into a temporary folder (a layer that doubles its
input, `mytest.Double`) and a one-operator model using it. The example plugin of the repository
(tests/plugins/kuiper-swish, a real PyTorch module exported with pnnx's moduleop) is tested end
to end in tests/models/test_plugin_model.py.

Registering is global, so every test here runs against a copy of the registry and of the
plugin bookkeeping, restored afterwards.
"""

from __future__ import annotations

import copy
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import kuiper
from kuiper.core import plugins, registry
from tests.conftest import opencl_available

MODEL = """7767517
3 2
pnnx.Input pnnx_input_0 0 1 0 #0=(2,3)f32
{type} op 1 1 0 1 #0=(2,3)f32 #1=(2,3)f32
pnnx.Output pnnx_output_0 1 0 1
"""

DOUBLE = """
import numpy as np
import kuiper

@kuiper.register("mytest.Double")
class Double(kuiper.ElementwiseLayer):
    @classmethod
    def from_operator(cls, op):
        layer = cls(op)
        layer.factor = op.float_param("factor", 2.0)
        return layer

    def forward(self, inputs):
        return [(inputs[0] * self.factor).astype(np.float32)]
"""

TWIN = """

@kuiper.register(backend="opencl")
class DoubleOpenCL(kuiper.OpenCLLayer, Double):
    kernel_path = "double.cl"

    def bind(self, inputs, outputs, in_specs, out_specs):
        n = out_specs[0].numel
        kernel = self.kernel("double_it")
        kernel.set_args(inputs[0].data, outputs[0].data, np.float32(self.factor), np.int32(n))
        self.launches = [kuiper.Launch(kernel, (kuiper.round_up(n, 64),))]
"""

KERNEL = """
__kernel void double_it(__global const float *x, __global float *y, const float factor,
                        const int n) {
    const int i = get_global_id(0);
    if (i < n) y[i] = factor * x[i];
}
"""

ROOT = Path(__file__).resolve().parents[2]
X = np.array([[1, -2, 3], [0.5, 0, -1]], np.float32)


@pytest.fixture(autouse=True)
def own_registry(monkeypatch):
    """A copy of the registry and of the plugin bookkeeping for each test."""
    registry.load_layers("cpu")
    registry.load_layers("opencl")
    monkeypatch.setattr(registry, "_REGISTRY", copy.deepcopy(registry._REGISTRY))
    monkeypatch.setattr(registry, "_ORIGINS", dict(registry._ORIGINS))
    monkeypatch.setattr(plugins, "_loaded", dict(plugins._loaded))
    monkeypatch.setattr(plugins, "_entry_points_loaded", True)  # tested apart, in subprocesses
    yield
    for name in [m for m in sys.modules if m.startswith(("kuiper_plugin_", "mytest_"))]:
        del sys.modules[name]


def write_plugin(folder, source=DOUBLE, name="double_plugin.py", kernel=None):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(textwrap.dedent(source))
    if kernel is not None:
        (folder / "double.cl").write_text(kernel)
    return folder / name


def write_model(folder, op_type="mytest.Double"):
    path = folder / "m.pnnx.param"
    path.write_text(MODEL.format(type=op_type))
    return path


# --- finding plugins --------------------------------------------------------------------------
def test_a_plugin_by_file_path_runs_on_the_cpu(tmp_path):
    plugin = write_plugin(tmp_path / "plug")
    graph = kuiper.load(write_model(tmp_path), plugins=[plugin])
    np.testing.assert_array_equal(graph(X), 2 * X)
    cls = registry.lookup("mytest.Double")
    assert registry.origin(cls) == f"plugin {plugin}"


def test_a_plugin_by_module_name(tmp_path, monkeypatch):
    write_plugin(tmp_path / "site", name="mytest_layers.py")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    graph = kuiper.load(write_model(tmp_path), plugins="mytest_layers")  # one name, no list
    np.testing.assert_array_equal(graph(X), 2 * X)
    assert registry.origin(registry.lookup("mytest.Double")) == "plugin mytest_layers"


def test_loading_a_plugin_twice_registers_it_once(tmp_path):
    plugin = write_plugin(tmp_path / "plug")
    model = write_model(tmp_path)
    first = kuiper.load(model, plugins=[plugin])
    second = kuiper.load(model, plugins=[str(plugin)])
    assert type(first.operators[1].layer) is type(second.operators[1].layer)


def test_a_plugin_by_entry_point(tmp_path):
    """An installed package declares the "kuiper.layers" group: Kuiper imports it by itself."""
    site = tmp_path / "site"
    write_plugin(site, name="mytest_installed.py")
    info = site / "mytest_installed-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: mytest-installed\n"
                                   "Version: 1.0\n")
    (info / "entry_points.txt").write_text("[kuiper.layers]\ndouble = mytest_installed\n")
    model = write_model(tmp_path)
    code = ("import numpy as np, kuiper; from kuiper.core import registry; "
            f"g = kuiper.load({str(model)!r}); "
            "print(g(np.ones((2, 3), np.float32)).sum(), "
            "registry.origin(registry.lookup('mytest.Double')))")
    path = [str(site), str(ROOT), os.environ.get("PYTHONPATH", "")]  # this checkout's Kuiper
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in path if p)}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            env=env, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split(maxsplit=1) == [
        "12.0", "plugin double = mytest_installed (entry point)\n"]
    # ... and not when autoloading is switched off
    env["KUIPER_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            env=env, timeout=120)
    assert result.returncode == 1 and "UnsupportedOperatorError" in result.stderr


@pytest.mark.parametrize("spec, expected", [
    ("no_such_plugin_module", "no module of that name can be imported"),
    ("missing/plugin.py", "does not exist"),
    ("/", "is not a .py file or a package folder"),
    # fuzz seed 8675309, scenario 1928: importlib's 'Empty module name' read as the plugin's
    # own code failing; and these are no module names either
    ("", "neither a module name"), (".relative", "neither a module name"),
    ("a..b", "neither a module name"), ("x.", "neither a module name"),
])
def test_a_plugin_that_cannot_be_found_is_a_clear_error(tmp_path, spec, expected):
    with pytest.raises(kuiper.PluginError, match=f"plugin '{spec}': .*{expected}"):
        kuiper.load(write_model(tmp_path), plugins=[spec])


def test_a_plugin_that_fails_to_import_is_named(tmp_path):
    plugin = write_plugin(tmp_path / "plug", source="import numpy\nraise RuntimeError('oops')\n")
    with pytest.raises(kuiper.PluginError, match=rf"plugin '{plugin}' failed to import: "
                       rf"RuntimeError: oops \({plugin}, line 2\)"):
        kuiper.load(write_model(tmp_path), plugins=[plugin])


def test_a_plugin_by_name_then_by_its_folder_is_the_same_plugin(tmp_path, monkeypatch):
    package = tmp_path / "site" / "mytest_pkg"
    write_plugin(package, name="__init__.py")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    model = write_model(tmp_path)
    kuiper.load(model, plugins=["mytest_pkg"])
    graph = kuiper.load(model, plugins=[package])  # no second registration, no clash
    np.testing.assert_array_equal(graph(X), 2 * X)


def test_a_plugin_folder_may_not_shadow_an_imported_module(tmp_path):
    folder = tmp_path / "json"
    write_plugin(folder, name="__init__.py")
    with pytest.raises(kuiper.PluginError, match="a different module named 'json' is already "
                       "imported"):
        kuiper.load(write_model(tmp_path), plugins=[folder])
    import json

    assert json.dumps([1]) == "[1]"  # the real one is still there


def test_a_plugin_that_failed_leaves_nothing_registered(tmp_path):
    source = DOUBLE + "\nraise RuntimeError('after registering')\n"
    plugin = write_plugin(tmp_path / "plug", source=source)
    for _ in range(2):  # the second try says the same, not "registered twice"
        with pytest.raises(kuiper.PluginError, match="RuntimeError: after registering"):
            kuiper.load(write_model(tmp_path), plugins=[plugin])
        assert registry.find("mytest.Double", "cpu") is None


def test_a_plugin_whose_own_import_is_missing_says_so(tmp_path, monkeypatch):
    # mytest_needs imports mytest (missing): the plugin exists, its dependency does not
    write_plugin(tmp_path / "site", source="import mytest\n", name="mytest_needs.py")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    with pytest.raises(kuiper.PluginError, match=r"plugin 'mytest_needs' failed to import: "
                       r"ModuleNotFoundError: No module named 'mytest'"):
        kuiper.load(write_model(tmp_path), plugins=["mytest_needs"])


# --- clashes ----------------------------------------------------------------------------------
def test_a_plugin_may_not_silently_replace_a_layer(tmp_path):
    plugin = write_plugin(tmp_path / "plug", source=DOUBLE.replace('"mytest.Double"',
                                                                    '"nn.ReLU"'))
    with pytest.raises(kuiper.RegistrationError, match=r"'nn.ReLU' on cpu is already the layer "
                       r"kuiper\.layers\.cpu\.relu\.ReLU \(kuiper\).*override=True"):
        kuiper.load(write_model(tmp_path, "nn.ReLU"), plugins=[plugin])


def test_a_plugin_replaces_a_layer_when_it_says_so(tmp_path):
    source = DOUBLE.replace('"mytest.Double"', '"nn.ReLU", override=True')
    plugin = write_plugin(tmp_path / "plug", source=source)
    graph = kuiper.load(write_model(tmp_path, "nn.ReLU"), plugins=[plugin])
    np.testing.assert_array_equal(graph(X), 2 * X)  # the plugin's layer, not a ReLU


# --- unknown types ----------------------------------------------------------------------------
def test_a_kept_module_without_its_plugin_says_what_is_needed(tmp_path):
    model = write_model(tmp_path)
    with pytest.raises(kuiper.UnsupportedOperatorError) as info:
        kuiper.load(model)
    message = str(info.value)
    assert message.startswith(f"{model}, line 4: operator 'op': no cpu layer for operator type "
                              "'mytest.Double'")
    for part in ("moduleop", "plugins=", "--plugin", '"kuiper.layers" entry point',
                 "kuiper/PLUGINS.md"):
        assert part in message, message


# --- parameters pnnx does not write -----------------------------------------------------------
def test_params_fill_in_what_the_file_does_not_carry(tmp_path):
    plugin = write_plugin(tmp_path / "plug")
    model = write_model(tmp_path)
    graph = kuiper.load(model, plugins=[plugin], params={"mytest.Double": {"factor": 3.0}})
    np.testing.assert_array_equal(graph(X), 3 * X)
    # the file's own value wins over params=
    model.write_text(MODEL.format(type="mytest.Double").replace(" #0=(2,3)f32 #1", " factor=5.0"
                                                                  " #0=(2,3)f32 #1"))
    graph = kuiper.load(model, plugins=[plugin], params={"mytest.Double": {"factor": 3.0}})
    np.testing.assert_array_equal(graph(X), 5 * X)


def test_params_for_a_type_the_model_lacks_are_a_typo(tmp_path):
    plugin = write_plugin(tmp_path / "plug")
    with pytest.raises(kuiper.KuiperError, match=r"params for 'mytest.Dubble': .* has no "
                       r"operator of that type; did you mean mytest\.Double\?"):
        kuiper.load(write_model(tmp_path), plugins=[plugin], params={"mytest.Dubble": {}})


@pytest.mark.parametrize("params", [{"mytest.Double": 3}, ["factor"], {1: {}}])
def test_params_of_the_wrong_shape_are_refused(tmp_path, params):
    with pytest.raises(kuiper.ArgumentError, match="params: got .* expected a PNNX type mapped"):
        kuiper.load(write_model(tmp_path), params=params)


# --- errors inside a plugin's layer -----------------------------------------------------------
@pytest.mark.parametrize("method, body", [
    ("from_operator", "        raise KeyError('weight')"),
    ("infer", "        raise op.error('needs a 4-D input')".replace("op.", "self.op.")),
    ("forward", "        return [np.reshape(inputs[0], (7,))]"),
])
def test_errors_inside_a_plugin_name_the_plugin(tmp_path, method, body):
    signature = {"from_operator": "    @classmethod\n    def from_operator(cls, op):",
                 "infer": "    def infer(self, inputs):",
                 "forward": "    def forward(self, inputs):"}[method]
    source = DOUBLE.split("    @classmethod")[0] + f"{signature}\n{body}\n"
    if method != "from_operator":
        source += "\n    factor = 2.0\n"
    plugin = write_plugin(tmp_path / "plug", source=source)
    graph_or_error = pytest.raises(kuiper.PluginError)
    with graph_or_error as info:
        kuiper.load(write_model(tmp_path), plugins=[plugin])(X)
    message = str(info.value)
    assert message.startswith("operator 'op' (mytest.Double), line 4: "), message
    assert f"{method} of" in message and f"from plugin {plugin}" in message, message


# --- OpenCL -----------------------------------------------------------------------------------
needs_opencl = pytest.mark.skipif(not opencl_available(), reason="no OpenCL device")


@needs_opencl
def test_a_plugin_kernel_from_its_own_file_runs_on_opencl(tmp_path):
    plugin = write_plugin(tmp_path / "plug", source=DOUBLE + TWIN, kernel=KERNEL)
    graph = kuiper.load(write_model(tmp_path), backend="opencl", plugins=[plugin])
    np.testing.assert_array_equal(graph(X), 2 * X)
    assert graph.fallbacks == []
    cls = registry.lookup("mytest.Double", "opencl")
    assert cls.__name__ == "DoubleOpenCL" and registry.origin(cls) == f"plugin {plugin}"


@needs_opencl
def test_a_broken_plugin_kernel_names_its_file(tmp_path):
    plugin = write_plugin(tmp_path / "plug", source=DOUBLE + TWIN,
                          kernel=KERNEL.replace("factor * x[i]", "factor * x[i] +"))
    with pytest.raises(kuiper.KernelBuildError) as info:
        kuiper.load(write_model(tmp_path), backend="opencl", plugins=[plugin])
    assert str(info.value).startswith(f"OpenCL build of {tmp_path / 'plug' / 'double.cl'} "
                                      "failed")


@needs_opencl
def test_a_missing_kernel_name_names_the_file(tmp_path):
    plugin = write_plugin(tmp_path / "plug", source=DOUBLE + TWIN,
                          kernel=KERNEL.replace("double_it", "double_that"))
    with pytest.raises(kuiper.KernelBuildError, match=r"(?s)double\.cl.*no kernel named "
                       r"'double_it' in it \(it has: double_that\)"):
        kuiper.load(write_model(tmp_path), backend="opencl", plugins=[plugin])


@needs_opencl
def test_a_plugin_kernel_needs_a_path_or_source(tmp_path):
    source = DOUBLE + TWIN.replace('    kernel_path = "double.cl"\n', "")
    plugin = write_plugin(tmp_path / "plug", source=source)
    with pytest.raises(kuiper.KernelBuildError, match="needs kernel_path .* or kernel_code"):
        kuiper.load(write_model(tmp_path), backend="opencl", plugins=[plugin])


@needs_opencl
def test_a_plugin_kernel_from_source_text(tmp_path):
    source = DOUBLE + TWIN.replace('kernel_path = "double.cl"', f"kernel_code = {KERNEL!r}")
    plugin = write_plugin(tmp_path / "plug", source=source)
    graph = kuiper.load(write_model(tmp_path), backend="opencl", plugins=[plugin])
    np.testing.assert_array_equal(graph(X), 2 * X)


@needs_opencl
def test_a_cpu_only_plugin_runs_in_an_opencl_graph_as_a_fallback(tmp_path):
    plugin = write_plugin(tmp_path / "plug")
    graph = kuiper.load(write_model(tmp_path), backend="opencl", plugins=[plugin])
    np.testing.assert_array_equal(graph(X), 2 * X)
    assert [op.name for op in graph.fallbacks] == ["op"]
    assert "* no OpenCL layer, runs on the CPU: op (mytest.Double)" in graph.summary()


# --- the command line -------------------------------------------------------------------------
@pytest.mark.parametrize("text, expected", [
    ("mymods.Swish2:beta=1.5", ("mymods.Swish2", "beta", 1.5)),
    ("prim::Foo:mode=a:b", ("prim::Foo", "mode", "a:b")),
    ("x.Y:shape=(1,2)", ("x.Y", "shape", [1, 2])),
])
def test_param_option_reads_type_key_and_value(text, expected):
    from kuiper.cli.options import type_param

    assert type_param(text) == expected


@pytest.mark.parametrize("text", ["beta=1.5", "mymods.Swish2:beta", ":beta=1", "x.Y:=1"])
def test_param_option_refuses_what_it_cannot_read(text):
    import argparse

    from kuiper.cli.options import type_param

    with pytest.raises(argparse.ArgumentTypeError, match="expected TYPE:KEY=VALUE"):
        type_param(text)


def test_kuiper_ops_and_run_take_plugins(tmp_path):
    plugin = write_plugin(tmp_path / "plug")
    model = write_model(tmp_path)
    np.save(tmp_path / "x.npy", X)

    def cli(*args):
        path = [str(ROOT), os.environ.get("PYTHONPATH", "")]  # this checkout's Kuiper
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in path if p)}
        return subprocess.run([sys.executable, "-m", "kuiper", *args], capture_output=True,
                              text=True, timeout=120, cwd=tmp_path, env=env)

    ops = cli("ops", "--plugin", str(plugin))
    assert ops.returncode == 0, ops.stderr
    row = next(line for line in ops.stdout.splitlines() if line.startswith("mytest.Double"))
    assert row.split()[1:3] == ["yes", "cpu"] and row.endswith(f"plugin {plugin}"), row
    run = cli("run", str(model), "--input", "x.npy", "--output", "y.npy", "--plugin",
              str(plugin))
    assert run.returncode == 0, run.stderr
    np.testing.assert_array_equal(np.load(tmp_path / "y.npy"), 2 * X)
    missing = cli("info", str(model))
    assert missing.returncode == 1 and missing.stderr.startswith("kuiper: error: ")
    assert "Traceback" not in missing.stderr and "--plugin" in missing.stderr


# --- issue 31: a failing plugin takes back only its own layers; a forward returning None ------
CLASHING = """
import kuiper

@kuiper.register("mytest.Fine")
class Fine(kuiper.ElementwiseLayer):
    def forward(self, inputs):
        return [inputs[0]]

@kuiper.register("nn.ReLU")  # Kuiper's own type, without override=True: a RegistrationError
class MyReLU(kuiper.ElementwiseLayer):
    def forward(self, inputs):
        return [inputs[0]]
"""


def test_a_failing_plugin_takes_back_only_what_it_registered(tmp_path):
    """In a fresh process the plugin is the first to touch the registry: its first register()
    loads Kuiper's own layers, inside the plugin's import. Rolling the whole table back to
    before the import emptied it of them, and every later load in the process, plugins or
    none, failed with "N operators have no cpu layer"."""
    plugin = write_plugin(tmp_path / "plug", CLASHING, name="clashing.py")
    relu = write_model(tmp_path, "nn.ReLU")
    code = textwrap.dedent(f"""
        import numpy as np, kuiper
        from kuiper.core import registry
        try:
            kuiper.load({str(relu)!r}, plugins=[{str(plugin)!r}])
        except kuiper.RegistrationError as e:  # naming the plugin and the layer it clashes with
            print("refused:", "already the layer" in str(e) and {str(plugin)!r} in str(e))
        print("own layers kept:", registry.find("nn.ReLU", "cpu").__module__)
        print("plugin's taken back:", registry.find("mytest.Fine", "cpu"))
        print(kuiper.load({str(relu)!r})(np.array([[-1, 2, -3], [4, -5, 6]], np.float32)).sum())
        """)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p),
        "KUIPER_DISABLE_PLUGIN_AUTOLOAD": "1"}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            env=env, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["refused: True",
                                          "own layers kept: kuiper.layers.cpu.relu",
                                          "plugin's taken back: None", "12.0"]


def test_a_failing_plugin_leaves_an_earlier_plugins_layers(tmp_path):
    first = write_plugin(tmp_path / "one", name="first.py")
    kuiper.load(write_model(tmp_path), plugins=[first])
    second = write_plugin(tmp_path / "two", CLASHING, name="second.py")
    with pytest.raises(kuiper.RegistrationError, match="already the layer"):
        kuiper.load(write_model(tmp_path, "nn.ReLU"), plugins=[second])
    assert registry.find("mytest.Fine", "cpu") is None
    assert registry.origin(registry.lookup("mytest.Double")) == f"plugin {first}"
    np.testing.assert_array_equal(kuiper.load(write_model(tmp_path), plugins=[first])(X), 2 * X)


NOTHING = DOUBLE.replace("return [(inputs[0] * self.factor).astype(np.float32)]", "return None")


@pytest.mark.parametrize("backend_name", ["cpu", "opencl"])
def test_a_forward_returning_none_names_the_plugin(tmp_path, backend_name):
    if backend_name == "opencl" and not opencl_available():
        pytest.skip("no OpenCL device")
    plugin = write_plugin(tmp_path / "plug", NOTHING, name="nothing.py")
    graph = kuiper.load(write_model(tmp_path), plugins=[plugin], backend=backend_name)
    with pytest.raises(kuiper.PluginError, match=rf"operator 'op' \(mytest.Double\).*forward of "
                       rf".*Double, from plugin {plugin}.*forward returned None, expected a list "
                       r"of 1 output value"):
        graph(X)


def test_an_infer_returning_none_names_the_plugin(tmp_path):
    # found by the fuzzer's plugin scenario (tests/fuzz/corpus/scenario-plugin-infer-returns-none)
    source = DOUBLE + "\nDouble.infer = lambda self, inputs: None\n"
    plugin = write_plugin(tmp_path / "plug", source, name="no_specs.py")
    with pytest.raises(kuiper.PluginError, match=rf"operator 'op' \(mytest.Double\).*infer of "
                       rf".*Double, from plugin {plugin}.*infer returned None, expected a list "
                       r"of 1 kuiper.TensorSpec"):
        kuiper.load(write_model(tmp_path), plugins=[plugin])
