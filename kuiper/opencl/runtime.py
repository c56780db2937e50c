"""One OpenCL context + queue per graph, device choice, and the program cache.

Device choice, in this order:
1. `device=` (or `--device`): "P:D" platform/device indices as in PYOPENCL_CTX, or a piece of
   the platform or device name ("pocl", "NVIDIA", "H100");
2. the PYOPENCL_CTX environment variable (pyopencl's own convention);
3. the first GPU of any platform, else a CPU device of PoCL, else any device.
Oclgrind (a simulator that checks every memory access) is never chosen unless asked for by
name: once installed it is listed first and claims every device type.

Programs are built once per (kernel file, options, device) in this process, and pyopencl caches
the compiled binaries on disk, so a second run skips the compiler entirely.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np

from kuiper.clkernels import KERNEL_DIR
from kuiper.errors import KernelBuildError, OpenCLUnavailableError

INSTALL_HINT = ("install a CPU OpenCL driver with `pip install pocl-binary-distribution` "
                "(or `pip install 'pyopencl[pocl]'`), or a GPU vendor's OpenCL driver")
# Options every kernel is built with: -I so kernels can #include shared headers, and MAD
# contraction, which PoCL needs to turn a*b+c into one fused instruction.
BASE_OPTIONS = ("-I", str(KERNEL_DIR), "-cl-mad-enable")


def _cl():
    try:
        import pyopencl as cl
    except ImportError as e:
        raise OpenCLUnavailableError(f"pyopencl is not importable ({e}): {INSTALL_HINT}") from None
    return cl


def list_devices() -> list[tuple[str, str, object]]:
    """[("P:D", "platform / device (type)", device)] for every device of every platform."""
    cl = _cl()
    try:
        platforms = cl.get_platforms()
    except cl.Error:
        platforms = []
    rows = []
    for p, platform in enumerate(platforms):
        for d, device in enumerate(platform.get_devices()):
            kind = cl.device_type.to_string(device.type)
            rows.append((f"{p}:{d}", f"{platform.name} / {device.name.strip()} ({kind})", device))
    return rows


def choose_device(device: str | None = None):
    cl = _cl()
    rows = list_devices()
    if not rows:
        raise OpenCLUnavailableError(f"no OpenCL platform found: {INSTALL_HINT}")
    wanted = device if device is not None else os.environ.get("PYOPENCL_CTX")
    if wanted:
        for index, _label, dev in rows:
            if wanted == index or (":" not in wanted and wanted.isdigit()
                                   and index.startswith(wanted + ":")):
                return dev
        for _index, label, dev in rows:
            if wanted.lower() in label.lower():
                return dev
        listing = "\n  ".join(f"{i}  {label}" for i, label, _ in rows)
        raise OpenCLUnavailableError(f"no OpenCL device matches '{wanted}'. Devices:\n  {listing}")
    usable = [r for r in rows if "oclgrind" not in r[1].lower()]
    for _, _, dev in usable:
        if dev.type & cl.device_type.GPU:
            return dev
    for _, label, dev in usable:
        if "portable computing language" in label.lower():
            return dev
    if usable:
        return usable[0][2]
    raise OpenCLUnavailableError("only the Oclgrind simulator is installed; choose it "
                                 f"explicitly with device='oclgrind', or {INSTALL_HINT}")


class OpenCLRuntime:
    _shared: dict[tuple, OpenCLRuntime] = {}

    @classmethod
    def shared(cls, device: str | None = None, out_of_order: bool = False,
               profiling: bool = False) -> OpenCLRuntime:
        """One runtime per (device, queue kind) per process, reused by every graph.

        Building a program is the slow part of starting a graph (NVIDIA's compiler takes a good
        fraction of a second per program); sharing the context lets the second graph that needs
        `conv2d.cl` with the same options reuse the built program instead of rebuilding it.
        """
        key = (device or os.environ.get("PYOPENCL_CTX"), out_of_order, profiling)
        runtime = cls._shared.get(key)
        if runtime is None:
            runtime = cls._shared[key] = cls(device, out_of_order, profiling)
        return runtime

    def __init__(self, device: str | None = None, out_of_order: bool = False,
                 profiling: bool = False):
        cl = _cl()
        self.cl = cl
        self.device = choose_device(device)
        self.context = cl.Context([self.device])
        props = 0
        if out_of_order:
            props |= cl.command_queue_properties.OUT_OF_ORDER_EXEC_MODE_ENABLE
        if profiling:
            props |= cl.command_queue_properties.PROFILING_ENABLE
        try:
            self.queue = cl.CommandQueue(self.context, properties=props)
        except cl.Error as e:
            raise OpenCLUnavailableError(f"{self.device.name}: cannot create a command queue "
                                         f"with out_of_order={out_of_order}, profiling="
                                         f"{profiling}: {e}") from None
        self.out_of_order, self.profiling = out_of_order, profiling
        self._programs: dict[tuple[str, tuple[str, ...]], object] = {}

    @property
    def name(self) -> str:
        return f"{self.device.platform.name} / {self.device.name.strip()}"

    def program(self, stem: str, options: Sequence[str] = ()):
        """The built program of `clkernels/<stem>.cl` (once per stem and options)."""
        key = (stem, tuple(options))
        program = self._programs.get(key)
        if program is None:
            path = KERNEL_DIR / f"{stem}.cl"
            try:
                source = path.read_text()
            except FileNotFoundError:
                raise KernelBuildError(str(path), list(options), "kernel file not found") from None
            program = self.build_source(source, list(options), str(path))
            self._programs[key] = program
        return program

    def build_source(self, source: str, options: list[str], label: str):
        cl = self.cl
        all_options = list(BASE_OPTIONS) + options
        try:
            return cl.Program(self.context, source).build(options=all_options)
        except cl.Error as e:
            raise KernelBuildError(label, all_options, _build_log(e, self.device)) from None

    def kernel(self, stem: str, name: str, options: Sequence[str] = ()):
        """A fresh cl.Kernel: each layer binds its own arguments once, so it needs its own."""
        return self.cl.Kernel(self.program(stem, options), name)

    # --- arrays ---------------------------------------------------------------------------------
    def empty(self, shape, dtype=np.float32):
        import pyopencl.array as cla
        return cla.empty(self.queue, tuple(shape), np.dtype(dtype))

    def to_device(self, host: np.ndarray):
        import pyopencl.array as cla
        return cla.to_device(self.queue, np.ascontiguousarray(host))


def _build_log(error, device) -> str:
    text = str(error)
    try:
        program = error.program  # type: ignore[attr-defined]
        log = program.get_build_info(device, program._cl.program_build_info.LOG)
        return log or text
    except Exception:  # noqa: BLE001 - the exception text already carries pyopencl's log
        return text
