"""register(): an OpenCL twin takes its PNNX types from the CPU layer it subclasses."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from kuiper.core import registry


@pytest.fixture
def empty_registry(monkeypatch):
    """A registry of its own, so the classes made here never reach the real one."""
    monkeypatch.setattr(registry, "_REGISTRY", {b: {} for b in registry.BACKENDS})
    monkeypatch.setattr(registry, "_LOADED", set(registry.BACKENDS))  # Kuiper's stay out
    return registry._REGISTRY


def cpu_layer():
    @registry.register("x.Foo", "F.foo", backend="cpu")
    class Foo:
        pass

    return Foo


def test_twin_without_types_registers_those_of_its_cpu_layer(empty_registry):
    foo = cpu_layer()

    class Mixin:  # an OpenCLLayer-like base before the CPU layer in the MRO
        pass

    @registry.register(backend="opencl")
    class FooTwin(Mixin, foo):
        pass

    assert FooTwin.op_types == ("x.Foo", "F.foo")
    assert FooTwin.backend == "opencl" and foo.backend == "cpu"
    assert empty_registry["opencl"] == {"x.Foo": FooTwin, "F.foo": FooTwin}


def test_the_nearest_registered_cpu_layer_in_the_mro_counts(empty_registry):
    foo = cpu_layer()

    @registry.register("x.Bar", backend="cpu")
    class Bar(foo):  # a CPU layer built on another: its own types only
        pass

    class Helper(Bar):  # not registered: skipped
        pass

    @registry.register(backend="opencl")
    class BarTwin(Helper):
        pass

    assert BarTwin.op_types == ("x.Bar",)
    assert empty_registry["opencl"] == {"x.Bar": BarTwin}


def test_explicit_types_still_register_a_subset(empty_registry):
    foo = cpu_layer()

    @registry.register("F.foo", backend="opencl")
    class FunctionalOnly(foo):
        pass

    assert FunctionalOnly.op_types == ("F.foo",)
    assert empty_registry["opencl"] == {"F.foo": FunctionalOnly}


@pytest.mark.parametrize("bases", ["none", "kuiper's bases only"])
def test_opencl_class_without_a_cpu_layer_is_an_error(empty_registry, bases):
    from kuiper.layers.base import ElementwiseLayer
    from kuiper.layers.opencl_base import OpenCLLayer

    # Layer itself says backend = "cpu", but it is no CPU layer: it registers no types.
    parents = (OpenCLLayer, ElementwiseLayer) if bases != "none" else ()
    lonely = type("Lonely", parents, {})
    with pytest.raises(ValueError, match="Lonely subclasses no registered CPU layer"):
        registry.register(backend="opencl")(lonely)
    assert empty_registry["opencl"] == {}


def test_override_before_kuipers_own_layers_are_loaded():
    """A script replacing nn.ReLU before any lookup: Kuiper's layers load first, then the
    replacement wins (and Kuiper's own registration does not clash with it later). A fresh
    process, so that nothing has loaded Kuiper's layers yet."""
    code = textwrap.dedent("""
        import kuiper
        from kuiper.core import registry

        @kuiper.register("nn.ReLU", override=True)
        class MyReLU(kuiper.ElementwiseLayer):
            pass

        assert registry.lookup("nn.ReLU") is MyReLU
        assert registry.lookup("nn.Conv2d").__module__ == "kuiper.layers.cpu.conv2d"
        print(len(registry.supported("cpu")))
    """)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=120, cwd=Path(__file__).resolve().parents[2])
    assert result.returncode == 0, result.stderr
    assert int(result.stdout) > 200


def test_cpu_layer_must_name_its_types():
    with pytest.raises(ValueError, match="at least one PNNX operator type"):
        registry.register(backend="cpu")


# --- the fallback rule and the executors: what the backend-neutral graph asks the registry ------
def test_an_opencl_graph_falls_back_to_the_cpu_layer(empty_registry, monkeypatch):
    monkeypatch.setattr(registry, "_LOADED", set(registry.BACKENDS))  # nothing to import
    foo = cpu_layer()
    assert registry.layer_for("x.Foo", "cpu") is foo
    assert registry.layer_for("x.Foo", "opencl") is foo  # no twin: the CPU layer stands in

    @registry.register(backend="opencl")
    class FooTwin(foo):
        pass

    assert registry.layer_for("x.Foo", "opencl") is FooTwin


def test_a_type_no_backend_knows_names_itself(empty_registry, monkeypatch):
    monkeypatch.setattr(registry, "_LOADED", set(registry.BACKENDS))
    cpu_layer()
    with pytest.raises(registry.UnsupportedOperatorError, match=r"'x\.Fo0'.*Did you mean x\.Foo"):
        registry.layer_for("x.Fo0", "opencl")


def test_each_backend_has_an_executor():
    from kuiper.cpu.executor import CPUExecutor
    from kuiper.graph.backends import executor_class
    from kuiper.opencl.execution.executor import OpenCLExecutor

    assert executor_class("cpu") is CPUExecutor
    assert executor_class("opencl") is OpenCLExecutor
    with pytest.raises(ValueError, match="unknown backend 'cuda'"):
        executor_class("cuda")
