"""register(): an OpenCL twin takes its PNNX types from the CPU layer it subclasses."""

from __future__ import annotations

import pytest

from kuiper import registry


@pytest.fixture
def empty_registry(monkeypatch):
    """A registry of its own, so the classes made here never reach the real one."""
    monkeypatch.setattr(registry, "_REGISTRY", {b: {} for b in registry.BACKENDS})
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


def test_opencl_class_without_a_cpu_layer_is_an_error(empty_registry):
    class Lonely:
        pass

    with pytest.raises(ValueError, match="Lonely subclasses no registered CPU layer"):
        registry.register(backend="opencl")(Lonely)
    assert empty_registry["opencl"] == {}


def test_cpu_layer_must_name_its_types():
    with pytest.raises(ValueError, match="at least one PNNX operator type"):
        registry.register(backend="cpu")


def test_every_cpu_type_but_pnnx_attribute_has_an_opencl_layer():
    cpu, opencl = ({t: c for t, c in registry.supported(b).items()
                    if registry.origin(c) == "kuiper"} for b in ("cpu", "opencl"))
    # (Kuiper's own layers only: a test may have loaded a plugin.)
    # pnnx.Attribute is folded at build time on every backend, so it never runs on a device.
    assert set(opencl) == set(cpu) - {"pnnx.Attribute"}
    for op_type, cls in opencl.items():
        assert op_type in cls.op_types and cls.backend == "opencl"


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
    from kuiper.cpu_executor import CPUExecutor
    from kuiper.opencl.executor import OpenCLExecutor

    assert registry.executor_class("cpu") is CPUExecutor
    assert registry.executor_class("opencl") is OpenCLExecutor
    with pytest.raises(ValueError, match="unknown backend 'cuda'"):
        registry.executor_class("cuda")
