"""Resource budgets: how big a tensor, and how much memory in all, a model may ask for.

A `.pnnx.param` of a few hundred bytes can declare a 100,000 x 100,000 x 100,000 input, or an
upsample by 1e8. Nothing is wrong with the *file*; running it would take petabytes. Kuiper checks
every size against a budget *before* allocating anything, and refuses with a `ResourceError` that
names the operator, the shape and the limit, instead of letting NumPy or the OpenCL driver fail
deep inside (or the kernel's OOM killer end the process).

Two limits, both in bytes:
- `max_tensor_bytes`: one tensor (default 4 GiB; `KUIPER_MAX_TENSOR_BYTES`);
- `max_total_bytes`: all activations the graph plans for one inference (default: three quarters
  of the machine's memory; `KUIPER_MAX_TOTAL_BYTES`): the most bytes alive at once when values
  are freed after their last use (the CPU backend) or share memory by a plan (OpenCL,
  kuiper/memory/), the sum over every operand when each keeps its own (OpenCL, memory="naive").

Change them for one process with the environment variables, or for one graph with
`kuiper.load(..., limits=Limits(max_tensor_bytes=...))`.
"""

from __future__ import annotations

import contextlib
import contextvars
import math
import os
from collections.abc import Iterator
from dataclasses import dataclass

from kuiper.core.errors import ArgumentError, ResourceError

GIB = 1 << 30
DEFAULT_MAX_TENSOR_BYTES = 4 * GIB


def physical_memory() -> int:
    """Bytes of RAM of this machine (16 GiB if the OS will not say)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # not POSIX
        return 16 * GIB


def _from_env(name: str, default: int) -> int:
    text = os.environ.get(name)
    if not text:
        return default
    try:
        value = int(float(text))  # "1e9" is a fine way to write a byte count
    except ValueError:  # "abc", and "nan"
        raise ResourceError(f"{name}={text!r} is not a number of bytes") from None
    except OverflowError:  # "inf", "1e999"
        raise ResourceError(f"{name}={text!r} is not a finite number of bytes (for no limit, "
                            "give a large one, e.g. 1e15)") from None
    if value <= 0:
        raise ResourceError(f"{name}={text!r} must be a positive number of bytes")
    return value


def format_bytes(n: int) -> str:
    """'3.9 KiB (4,000 bytes)': readable, and exact where two sizes round alike."""
    for unit, size in (("PiB", 1 << 50), ("TiB", 1 << 40), ("GiB", GIB), ("MiB", 1 << 20),
                       ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit} ({n:,} bytes)"
    return f"{n:,} bytes"


def tensor_bytes(shape, dtype_size: int) -> int:
    """Exact (Python int, no int64 overflow) byte size of a tensor of `shape`."""
    return math.prod(int(d) for d in shape) * dtype_size


@dataclass(frozen=True)
class Limits:
    max_tensor_bytes: int
    max_total_bytes: int

    def __post_init__(self) -> None:
        # Checked here, once: a None or a float would otherwise fail in the first comparison
        # of a size, deep inside a build, as a bare TypeError.
        for name in ("max_tensor_bytes", "max_total_bytes"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ArgumentError(f"Limits.{name}", f"got {value!r}, expected a positive "
                                                      "whole number of bytes")

    @staticmethod
    def from_environment() -> Limits:
        return Limits(_from_env("KUIPER_MAX_TENSOR_BYTES", DEFAULT_MAX_TENSOR_BYTES),
                      _from_env("KUIPER_MAX_TOTAL_BYTES", physical_memory() * 3 // 4))

    def check_tensor(self, shape, itemsize: int, what: str) -> None:
        """Refuse one tensor of `shape` above the budget; `what` says whose it is."""
        if any(int(d) < 0 for d in shape):
            raise ResourceError(f"{what}: negative dimension in shape {tuple(shape)}")
        size = tensor_bytes(shape, itemsize)
        if size > self.max_tensor_bytes:
            raise ResourceError(
                f"{what}: a tensor of shape {tuple(shape)} needs {format_bytes(size)}, above the "
                f"limit of {format_bytes(self.max_tensor_bytes)} per tensor (raise it with "
                "KUIPER_MAX_TENSOR_BYTES or kuiper.load(..., limits=...))")

    def check_total(self, total: int, what: str) -> None:
        if total > self.max_total_bytes:
            raise ResourceError(
                f"{what}: one inference needs {format_bytes(total)} of activations, above the "
                f"limit of {format_bytes(self.max_total_bytes)} (raise it with "
                "KUIPER_MAX_TOTAL_BYTES or kuiper.load(..., limits=...))")


def planned_bytes(order, specs, outputs, frees_after_last_use: bool) -> int:
    """Activation bytes of one inference: the sum over every operand, or, when values are freed
    after their last use, the peak of what is alive at once (walking the execution order)."""
    def size(name: str) -> int:
        spec = specs.get(name)
        return 0 if spec is None or spec.known else tensor_bytes(spec.shape, spec.dtype.itemsize)

    if not frees_after_last_use:
        return sum(size(name) for name in specs)
    last_use = {o.name: len(order) for o in outputs}  # outputs live to the end
    for step, op in enumerate(order):
        for operand in op.inputs:
            last_use[operand.name] = max(last_use.get(operand.name, 0), step)
    alive = peak = 0
    for step, op in enumerate(order):
        alive += sum(size(o.name) for o in op.outputs)
        peak = max(peak, alive)
        alive -= sum(size(name) for name in {o.name for o in op.inputs}
                     if last_use.get(name) == step)
    return peak


# The limits of the graph being built. Layers whose shape inference allocates (Upsample's index
# tables) check against them; a context variable keeps two graphs built by two threads apart.
_ACTIVE: contextvars.ContextVar[Limits | None] = contextvars.ContextVar("kuiper_limits",
                                                                        default=None)


def current() -> Limits:
    """The limits of the graph being built, else those of the environment (read each time)."""
    return _ACTIVE.get() or Limits.from_environment()


@contextlib.contextmanager
def using(limits: Limits) -> Iterator[Limits]:
    token = _ACTIVE.set(limits)
    try:
        yield limits
    finally:
        _ACTIVE.reset(token)
