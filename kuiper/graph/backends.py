"""What the graph needs to know of each backend: where its layers are, and its executor.

The graph is backend-neutral: it names its backend ("cpu" or "opencl"), and this module turns the
name into the two things a backend brings. Both are imported only when first needed (importing
Kuiper does not import 130 layer modules, nor pyopencl):

- its layers: every module of `layers/<backend>/`, whose `@register` decorators fill the
  registry. The registry (kuiper/core/registry.py) sits below the layers and never imports them;
  this module, above them, hands it `import_layers` when the graph package is imported.
- its executor, which carries a built graph's plan out: `CPUExecutor` (kuiper/cpu/executor.py)
  or `OpenCLExecutor` (kuiper/opencl/execution/executor.py).

A new backend is one more branch in each function below, a `layers/<name>/` folder of twins,
and an executor.
"""

from __future__ import annotations

import importlib
import pkgutil

from kuiper.core import registry


def import_layers(backend: str) -> None:
    """Import every module of Kuiper's own `layers/<backend>/` (their decorators register them)."""
    if backend == "cpu":
        import kuiper.layers.cpu as package
    elif backend == "opencl":
        import kuiper.layers.opencl as package
    else:
        raise ValueError(f"unknown backend '{backend}', expected one of "
                         f"{', '.join(registry.BACKENDS)}")
    for module in pkgutil.iter_modules(package.__path__):
        importlib.import_module(f"{package.__name__}.{module.name}")


def executor_class(backend: str) -> type:
    """The executor class that runs a built graph on `backend`."""
    if backend == "cpu":
        from kuiper.cpu.executor import CPUExecutor

        return CPUExecutor
    if backend == "opencl":
        from kuiper.opencl.execution.executor import OpenCLExecutor

        return OpenCLExecutor
    raise ValueError(f"unknown backend '{backend}', expected one of "
                     f"{', '.join(registry.BACKENDS)}")


registry.set_layer_loader(import_layers)
