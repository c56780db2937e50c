"""One OpenCL context + queue per graph, device choice, and the program cache.

Device choice, in this order:
1. `device=` (or `--device`): "P:D" platform/device indices as in PYOPENCL_CTX, or a piece of
   the platform or device name ("pocl", "NVIDIA", "H100");
2. the PYOPENCL_CTX environment variable (pyopencl's own convention);
3. the first GPU of any platform, else a CPU device of PoCL, else any device.
Oclgrind (a simulator that checks every memory access) is never chosen unless asked for by
name: once installed it is listed first and claims every device type.

Programs are built once per (kernel file, options, device) in this process. Across processes the
compiled binaries are cached on disk, so a second run skips the compiler: by Kuiper itself on
every driver but PoCL (kuiper/opencl/device/binary_cache.py: <cache>/kernels; the drivers'
own caches come on top: NVIDIA's ~/.nv/ComputeCache, moved by CUDA_CACHE_PATH, or pyopencl's
~/.cache/pyopencl for other drivers), and by PoCL's own cache on PoCL (~/.cache/pocl/kcache,
moved by POCL_CACHE_DIR), which also holds the code PoCL generates at a kernel's first launch.
"""

from __future__ import annotations

import atexit
import os
import platform
import sys
import time
import weakref
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from kuiper.clkernels import KERNEL_DIR
from kuiper.core.errors import KernelBuildError, OpenCLUnavailableError, ResourceError
from kuiper.opencl.device import binary_cache
from kuiper.opencl.device.element_types import kernel_class


def install_hint(system: str | None = None, machine: str | None = None) -> str:
    """How to get an OpenCL device on this kind of machine (`system` as sys.platform,
    `machine` as platform.machine(); by default this machine's).

    PoCL, a CPU driver that works without any GPU, only comes from pip for Linux x86-64 (the
    `pocl` extra installs it there and nowhere else); elsewhere the driver comes from the GPU
    vendor or the operating system.
    """
    system = system or sys.platform
    machine = machine or platform.machine()
    vendor = "your GPU vendor's OpenCL driver (NVIDIA, AMD and Intel drivers include one)"
    if system.startswith("linux") and machine.lower() in ("x86_64", "amd64"):
        return ('install a CPU OpenCL driver with `pip install "kuiper-engine[pocl]"` (PoCL; '
                f'in a clone: `pip install -e ".[pocl]"`), or {vendor}')
    if system == "darwin":
        return ("macOS has Apple's OpenCL driver built in, and pyopencl (`pip install "
                "pyopencl`) uses it: no other driver is needed")
    if system.startswith("linux"):
        return (f"install {vendor}, or PoCL from your distribution (Debian/Ubuntu: "
                "`sudo apt install pocl-opencl-icd`); PoCL's pip wheel is for Linux x86-64 only")
    if system in ("win32", "cygwin"):
        return f"install {vendor}"
    return f"install {vendor}, or PoCL built for this system"


# A program build that takes longer than this compiled for real (a kcache hit on PoCL takes
# 5-50 ms, Clang on one of Kuiper's kernel files 0.2-1 s on the 2-core test machine): the cache
# is cold, and compiling the kernels in helper processes pays off (jit_helper.py). A wrong
# guess costs little: helpers started for nothing, or a cold start without them.
COLD_BUILD_SECONDS = 0.15
# what every "no OpenCL" error message ends with
INSTALL_HINT = install_hint()
# Options every kernel is built with: -I so kernels can #include shared headers, MAD
# contraction, which PoCL needs to turn a*b+c into one fused instruction, and the argument
# types, which the executor compares with the dtypes bound to them (element_types.py).
BASE_OPTIONS = ("-I", str(KERNEL_DIR), "-cl-mad-enable", "-cl-kernel-arg-info")


# PoCL's worker threads float between the cores unless POCL_AFFINITY pins worker i to core i.
# Unpinned, about half of the processes on the 2-core machine ran every kernel at one core's
# speed (ResNet-18's pool: 0.61 ms against 0.32, in 4 of 8 processes; pinned, 8 of 8 fast).
# Set before PoCL starts (it reads its environment once), only where the user has not chosen
# (POCL_AFFINITY=0 turns it off), and only where this process may run on every core: PoCL pins
# to core numbers without asking which cores are allowed, and under taskset, a container's
# cpuset or a batch scheduler's binding, newer PoCLs abort when that fails.
PIN_POCL_THREADS = ("POCL_AFFINITY", "1")


def pin_pocl_threads() -> bool:
    """Set POCL_AFFINITY=1 where the user has not set it and every core is ours; True when
    PoCL's threads will be pinned."""
    if "POCL_AFFINITY" not in os.environ:
        allowed = getattr(os, "sched_getaffinity", None)
        if allowed is not None and allowed(0) == set(range(os.cpu_count() or 0)):
            os.environ[PIN_POCL_THREADS[0]] = PIN_POCL_THREADS[1]
    return os.environ.get("POCL_AFFINITY") == "1"


def _cl():
    pin_pocl_threads()
    try:
        import pyopencl as cl
    except ImportError as e:
        raise OpenCLUnavailableError(f"pyopencl is not importable ({e}): reinstall it with "
                                     f"`pip install pyopencl`; for a device, {INSTALL_HINT}"
                                     ) from None
    return cl


def is_cpu(device) -> bool:
    """Whether a pyopencl Device is a CPU (PoCL): the kernels, tile sizes and memory plan that
    suit it are not a GPU's."""
    return bool(device.type & _cl().device_type.CPU)


def compiles_to_native_cpu(device) -> bool:
    """Whether kernels for `device` become native CPU code through Clang (PoCL's CPU devices),
    so that Clang builtins such as __builtin_prefetch work. Oclgrind also says it is a CPU, but
    it interprets the code and stops at such a builtin."""
    from kuiper.opencl.device.vector_width import pocl_cpu

    return pocl_cpu(device)


def list_devices() -> list[tuple[str, str, object]]:
    """[("P:D", "platform / device (type)", device)] for every device of every platform."""
    cl = _cl()
    try:
        platforms = cl.get_platforms()
    except cl.Error:
        platforms = []
    rows = []
    for p, cl_platform in enumerate(platforms):
        for d, device in enumerate(cl_platform.get_devices()):
            kind = cl.device_type.to_string(device.type)
            label = f"{cl_platform.name} / {device.name.strip()} ({kind})"
            rows.append((f"{p}:{d}", label, device))
    return rows


def _pick(items: list, answer: str, name_of, last: bool = False):
    """One of `items` by an answer as pyopencl reads it: empty = the first; an index in range;
    else a case-insensitive piece of the name (of the last such item when `last`, which is what
    pyopencl does for platforms, of the first for devices). None if nothing fits."""
    if not answer:
        return items[0] if items else None
    try:
        index = int(answer)
    except ValueError:
        pass
    else:
        if 0 <= index < len(items):
            return items[index]
    found = [item for item in items if answer.lower() in name_of(item).lower()]
    if not found:
        return None
    return found[-1] if last else found[0]


def match_device_spec(spec: str, rows: list[tuple[str, str, object]]):
    """The device `spec` names, read as pyopencl reads PYOPENCL_CTX; None if it names none.

    pyopencl splits the value at ':' into answers to its two questions, "which platform?" and
    "which device(s)?": `1:0`, `1` (its first device), `:` and `:0` (the first platform),
    `portable:0` and `1:pthread` (pieces of names), `0:0,1` (several devices: Kuiper uses one,
    the first). Kuiper also takes a piece of a device's (or platform's) name alone, `H100`, that
    pyopencl would read as a platform name only.
    """
    platforms: dict[str, list] = {}  # "P" -> the devices of platform P, in order
    for index, _label, dev in rows:
        platforms.setdefault(index.split(":")[0], []).append(dev)
    groups = list(platforms.values())
    answers = spec.split(":")
    if len(answers) <= 2:
        devices = _pick(groups, answers[0], lambda devs: devs[0].platform.name, last=True)
        if devices is not None and len(answers) == 1:
            return devices[0]
        if devices is not None:
            chosen = [_pick(devices, a, lambda d: d.name) for a in answers[1].split(",")]
            if all(d is not None for d in chosen):
                return chosen[0]
    if ":" not in spec:
        for _index, label, dev in rows:
            vendor = getattr(dev.platform, "vendor", "")
            if spec.lower() in f"{label} {vendor}".lower():
                return dev
    return None


# PoCL compiles for the CPU that LLVM names for it. PoCL 3.0's LLVM 14 does not know CPUs newer
# than itself (an AMD Zen 5 comes back as 'generic', which it then refuses as a target: "unknown
# target CPU 'generic'"), so on such a machine every kernel's build fails. A one-line kernel is
# built once per process and device to find out: such a device is not chosen by default, and
# asking for it says why, instead of a failed build in the middle of a model.
_BUILD_PROBES: dict[int, str | None] = {}
PROBE_SOURCE = "__kernel void kuiper_probe(__global float *x) { x[get_global_id(0)] *= 2.0f; }"


def why_it_cannot_build(device) -> str | None:
    """None when `device` compiles OpenCL C, else its compiler's complaint. Only PoCL's CPU
    devices are probed (the one known failure, above; a GPU's build costs more to probe)."""
    if not compiles_to_native_cpu(device):
        return None
    key = device.int_ptr
    if key not in _BUILD_PROBES:
        cl = _cl()
        try:
            context = cl.Context([device])
        except cl.Error as e:
            _BUILD_PROBES[key] = f"no context could be made for it: {str(e).strip()}"
            return _BUILD_PROBES[key]
        try:
            cl.Program(context, PROBE_SOURCE).build()
            _BUILD_PROBES[key] = None
        except cl.Error as e:
            log = _build_log(e, device).strip().splitlines()
            reason = next((line for line in log if "error" in line.lower()), str(e).strip())
            _BUILD_PROBES[key] = reason
    return _BUILD_PROBES[key]


def unbuildable_error(device, reason: str) -> OpenCLUnavailableError:
    if "unknown target CPU" in reason:
        why = "its LLVM does not know this CPU"
    elif reason.startswith("no context"):
        why = "the driver refuses it"
    else:
        why = "its compiler fails on a one-line kernel"
    return OpenCLUnavailableError(
        f"{device.platform.name} / {device.name.strip()} cannot compile OpenCL C on this "
        f"machine ({reason}): {why}. Run the NumPy backend "
        "(backend='cpu', `--backend cpu`), the Oclgrind simulator where it is installed "
        "(device='oclgrind': every kernel runs, slowly), or another OpenCL driver for this CPU")


def choose_device(device: str | None = None):
    cl = _cl()
    rows = list_devices()
    if not rows:
        raise OpenCLUnavailableError(f"no OpenCL platform found: {INSTALL_HINT}")
    source = "device" if device is not None else "PYOPENCL_CTX"
    wanted = str(device) if device is not None else os.environ.get("PYOPENCL_CTX")
    if wanted:  # an empty PYOPENCL_CTX counts as unset: Kuiper's own choice below
        dev = match_device_spec(wanted, rows)
        if dev is not None:
            reason = why_it_cannot_build(dev)
            if reason is not None:
                raise unbuildable_error(dev, reason)
            return dev
        # "P:D  platform / device", without the type flags (pyopencl may list them all)
        listing = "\n  ".join(f"{i}  {label.rsplit(' (', 1)[0]}" for i, label, _ in rows)
        raise OpenCLUnavailableError(
            f"no OpenCL device matches {source}={wanted!r}. Give 'P:D' (platform and device "
            "index, or a piece of each name, as in PYOPENCL_CTX: '1:0', '1', 'portable:0', "
            "'1:pthread', ':'), or a piece of a device name. The devices (`kuiper devices`):"
            f"\n  {listing}")
    usable = [r for r in rows if "oclgrind" not in r[1].lower()]

    def preference(row) -> int:   # a GPU, then PoCL, then anything else
        _, label, dev = row
        if dev.type & cl.device_type.GPU:
            return 0
        return 1 if "portable computing language" in label.lower() else 2

    # probed in that order, only until one builds: a GPU machine's process never builds on PoCL
    broken = []
    for _, _, dev in sorted(usable, key=preference):
        reason = why_it_cannot_build(dev)
        if reason is None:
            return dev
        broken.append((dev, reason))
    if broken:
        raise unbuildable_error(*broken[0])
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
        from kuiper.opencl.device.vector_width import ask_early

        ask_early(self.device)  # a machine's first run: asked while the model loads
        # Built programs, of kernel files and of generated sources alike (see `_cached`).
        self._programs: dict[tuple[str, str, tuple[str, ...]], object] = {}
        self.cached_builds = 0  # programs loaded from Kuiper's kernel cache (binary_cache.py)
        # (source, options) of every program built from source, by its handle: what a JIT
        # helper needs to build it again (jit_helper.py); and how many compiled for real
        self.program_sources: dict[int, tuple[str, list[str]]] = {}
        self.cold_builds = 0
        self._jit_helpers = None
        self.allocated_bytes = self.peak_bytes = 0  # device memory held, see `buffer`
        self._pool = None  # pyopencl MemoryPool for the arrays graphs return (see `pool`)

    @property
    def name(self) -> str:
        return f"{self.device.platform.name} / {self.device.name.strip()}"

    @property
    def device_options(self) -> list[str]:
        """Build options every program gets on this device: KUIPER_NARROW_VECTORS where its
        compiler cannot build float16 (epilogue.h then leaves out its 16-wide function),
        KUIPER_CPU_DEVICE on CPU devices (gemm_blocked.h reads a partial block's B as vectors
        there, which NVIDIA's compiler got wrong when tests forced that kernel on a GPU), and
        on PoCL's CPU devices -w (no warnings) unless KUIPER_KERNEL_WARNINGS=1: on a CPU
        without AVX-512, Clang notes at every helper taking a float16 that "AVX vector
        argument ... changes the ABI", a note about linking objects built with other flags,
        which one OpenCL program never does, and PoCL printed "10 warnings generated." on the
        user's terminal for each program (PoCL accepts no -Wno-... option to silence just that
        one). Plugin authors turn the warnings back on while writing a kernel."""
        from kuiper.opencl.device.vector_width import wide_vectors

        options = [] if wide_vectors(self.device) else ["-DKUIPER_NARROW_VECTORS=1"]
        if is_cpu(self.device):
            options.append("-DKUIPER_CPU_DEVICE=1")
        if (compiles_to_native_cpu(self.device)
                and os.environ.get("KUIPER_KERNEL_WARNINGS", "0") != "1"):
            options.append("-w")
        return options

    def program(self, stem: str, options: Sequence[str] = ()):
        """The built program of `clkernels/<stem>.cl` (once per stem and options)."""
        return self._file_program(("file", stem, tuple(options)), KERNEL_DIR / f"{stem}.cl",
                                  options, include=())

    def program_from_source(self, source: str, options: Sequence[str] = (),
                            label: str = "generated source"):
        """The built program of a generated `source` (once per source text and options).

        Keyed by the text itself: the generator bakes everything the kernel depends on into it
        (pnnx.Expression: shapes, dtypes, constants), so equal text means an equal program, and
        a model that repeats an expression compiles it once. `label` names it in build errors.
        """
        return self._cached(("source", source, tuple(options)),
                            lambda: self.build_source(source, list(options), label))

    def program_from_path(self, path: Path, options: Sequence[str] = ()):
        """The built program of a `.cl` file outside clkernels/ (a plugin's), once per options.

        The file's own folder is on the include path, so it can #include its own headers (and
        Kuiper's, which are always there). Errors name the file: its author must find it.
        """
        path = Path(path).resolve()
        return self._file_program(("path", str(path), tuple(options)), path, options,
                                  include=[path.parent])

    def _file_program(self, key, path: Path, options: Sequence[str], include: Sequence[Path]):
        """Read the kernel file at `path` and build it, once per `key` (see `_cached`)."""
        def build():
            try:
                source = path.read_text()
            except OSError as e:
                why = ("kernel file not found" if isinstance(e, FileNotFoundError)
                       else f"cannot read the kernel file: {e.strerror}")
                raise KernelBuildError(str(path), list(options), why) from None
            return self.build_source(source, list(options), str(path), include)

        return self._cached(key, build)

    def _cached(self, key: tuple[str, str, tuple[str, ...]], build):
        """The program stored under `key`, built by `build()` the first time.

        One cache for every program: the first item of the key says what the second is, a
        clkernels/ stem ("file"), a plugin's file path ("path") or a whole source text ("source").
        """
        program = self._programs.get(key)
        if program is None:
            program = self._programs[key] = build()
        return program

    def build_source(self, source: str, options: list[str], label: str,
                     include: Sequence[Path] = ()):
        """Build `source` now (`program` and `program_from_source` keep the result for this
        process); a compile error raises KernelBuildError with `label` and the compiler's log.
        The `include` folders are searched before Kuiper's clkernels/ (a plugin's own gemm.h
        wins). Across processes, the binary comes from Kuiper's kernel cache when it holds
        one for this device, driver, source, headers and options (binary_cache.py)."""
        all_options = [o for folder in include for o in ("-I", str(folder))]
        all_options += list(BASE_OPTIONS) + self.device_options + options
        if not binary_cache.enabled(self.device):  # PoCL: its own cache does it (binary_cache)
            return self._build_from_source(source, all_options, label)
        cache_key = binary_cache.key(self.device, source, all_options, [*include, KERNEL_DIR])
        binary = binary_cache.load(cache_key)
        if binary is not None:
            program = self._build_from_binary(binary, all_options)
            if program is not None:
                self.cached_builds += 1
                return program
        program = self._build_from_source(source, all_options, label)
        binary_cache.store(cache_key, program.get_info(self.cl.program_info.BINARIES)[0])
        return program

    def _build_from_source(self, source: str, all_options: list[str], label: str):
        cl = self.cl
        start = time.perf_counter()
        try:
            program = cl.Program(self.context, source).build(options=all_options)
        except cl.Error as e:
            raise KernelBuildError(label, all_options, _build_log(e, self.device)) from None
        self.program_sources[program.int_ptr] = (source, all_options)
        if time.perf_counter() - start > COLD_BUILD_SECONDS:
            self.cold_builds += 1
        return program

    def jit_helpers(self):
        """The helper processes that compile PoCL's kernels in parallel (jit_helper.py),
        started on the first call after a program really compiled (a cold cache: with a warm
        one PoCL finds every kernel compiled, and helpers would only cost their start-up);
        None where they do not apply or would not start."""
        if self._jit_helpers is None and self.cold_builds and compiles_to_native_cpu(
                self.device):
            from kuiper.opencl.device.jit_helper import JitHelpers

            self._jit_helpers = JitHelpers.start(self) or False
            if self._jit_helpers:
                atexit.register(self._jit_helpers.stop)
        return self._jit_helpers or None

    def _build_from_binary(self, binary: bytes, all_options: list[str]):
        """The program of a stored binary, or None when the driver refuses it (then it is
        built from source and the binary replaced)."""
        try:
            return self.cl.Program(self.context, [self.device], [binary]).build(
                options=all_options)
        except self.cl.Error as e:
            binary_cache.logger.debug("a cached binary was refused (%s): building from source",
                                      e)
            return None

    def kernel(self, stem: str, name: str, options: Sequence[str] = ()):
        """A fresh cl.Kernel: each layer binds its own arguments once, so it needs its own."""
        return self.kernel_of(self.program(stem, options), name, f"clkernels/{stem}.cl")

    def kernel_of(self, program, name: str, label: str):
        """A fresh cl.Kernel `name` of a built `program`; a missing name is a KernelBuildError."""
        try:
            return kernel_class(self.cl)(program, name)  # remembers its arguments
        except self.cl.Error as e:
            names = program.get_info(self.cl.program_info.KERNEL_NAMES)
            raise KernelBuildError(label, [], f"no kernel named '{name}' in it (it has: "
                                   f"{names or 'none'}): {e}") from None

    # --- arrays ---------------------------------------------------------------------------------
    # Every buffer Kuiper allocates goes through `buffer`, which counts the bytes held on the
    # device now (`allocated_bytes`) and the most held at once (`peak_bytes`): what `kuiper
    # bench` reports, and how the memory planner's savings are measured rather than computed.
    def buffer(self, nbytes: int):
        """A fresh read-write device buffer of `nbytes`, counted until it is freed; a
        ResourceError (not pyopencl's bare INVALID_BUFFER_SIZE) above the device's largest
        allocation."""
        largest = int(self.device.max_mem_alloc_size)
        if nbytes > largest:
            raise ResourceError(f"a buffer of {int(nbytes)} bytes is more than the largest "
                                    f"one {self.device.name.strip()} allocates ({largest} "
                                    "bytes): use a smaller input, or the cpu backend")
        buffer = _CountedBuffer(self.context, self.cl.mem_flags.READ_WRITE, max(int(nbytes), 1))
        self._count(buffer.size)
        weakref.finalize(buffer, self._count, -buffer.size)
        return buffer

    def _count(self, nbytes: int) -> None:
        self.allocated_bytes += nbytes
        self.peak_bytes = max(self.peak_bytes, self.allocated_bytes)

    def reset_peak(self) -> int:
        """Start a new peak from what is allocated now (returns that): `peak_bytes - returned`
        is then what one graph's build and runs added on top."""
        self.peak_bytes = self.allocated_bytes
        return self.allocated_bytes

    @property
    def base_alignment(self) -> int:
        """CL_DEVICE_MEM_BASE_ADDR_ALIGN in bytes (the device reports bits): a sub-buffer's
        origin must be a multiple of it."""
        return max(int(self.device.mem_base_addr_align) // 8, 1)

    def empty(self, shape, dtype=np.float32, pooled: bool = False):
        """A device array; `pooled`: from the runtime's memory pool (what a graph returns with
        device_outputs: one allocation per run, recycled once the caller drops the array)."""
        import pyopencl.array as cla
        allocator = self.pool if pooled else self.buffer
        return cla.empty(self.queue, tuple(shape), np.dtype(dtype), allocator=allocator)

    def to_device(self, host: np.ndarray, pooled: bool = False):
        import pyopencl.array as cla
        allocator = self.pool if pooled else self.buffer
        return cla.to_device(self.queue, np.ascontiguousarray(host), allocator=allocator)

    @property
    def pool(self):
        """pyopencl's memory pool on this queue, made on first use."""
        if self._pool is None:
            from pyopencl.tools import ImmediateAllocator, MemoryPool

            self._pool = MemoryPool(ImmediateAllocator(self.queue))
        return self._pool


def _counted_buffer_class():
    """cl.Buffer, subclassed so that a weakref.finalize can see it freed (pyopencl's own class
    takes no weak references)."""
    cl = _cl()

    class CountedBuffer(cl.Buffer):
        pass

    return CountedBuffer


class _LazyBuffer:
    """Makes the subclass on first use: importing this module must not need pyopencl."""

    cls = None

    def __call__(self, *args):
        if _LazyBuffer.cls is None:
            _LazyBuffer.cls = _counted_buffer_class()
        return _LazyBuffer.cls(*args)


_CountedBuffer = _LazyBuffer()


def _build_log(error, device) -> str:
    text = str(error)
    try:
        program = error.program  # type: ignore[attr-defined]
        log = program.get_build_info(device, program._cl.program_build_info.LOG)
        return log or text
    except Exception:  # noqa: BLE001 - the exception text already carries pyopencl's log
        return text
