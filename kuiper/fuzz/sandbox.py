"""Run one fuzz case in its own process, with a time and a memory limit, and say what happened.

A case that crashes the interpreter (a segfault in a kernel), hangs, or allocates without bound
must not take the campaign down with it, so every case runs in a child process. Starting a fresh
Python per case costs ~0.5 s (importing NumPy and Kuiper); instead the campaign imports
everything once and *forks* a child per case (~5 ms), which inherits the imports. OpenCL is
never initialised in the parent: a forked child cannot use its parent's OpenCL context, so each
child makes its own.

The child:
- caps its address space (RLIMIT_AS: 3 GiB on top of what it inherits from its parent) and
  arms an alarm whose default action kills it;
- sets Kuiper's own budgets (KUIPER_MAX_*_BYTES) well below that cap, so an allocation the
  budgets should have refused shows up as a MemoryError or a kill, never as a passing case;
- loads the model, prints its summary (what `kuiper info` does), feeds inputs of the declared
  shapes, and writes one JSON line with the outcome to a pipe.

Outcomes:
- "ok": it loaded and ran;
- "refused": a KuiperError, the promised behaviour for a bad file;
- "netted": a KuiperError made by the safety net around the layers from a bare exception (clear
  for the user, but a layer that could check its inputs more precisely); not a failure;
- the failures: "bare" (any other exception), "memory" (MemoryError: an allocation past the
  cap), "crash" (killed by a signal), "hang" (past the time limit), "wrong" (a scenario of
  kuiper/fuzz/scenarios.py found a silently different value).
"""

from __future__ import annotations

import json
import logging
import os
import resource
import select
import signal
import time
import traceback
import warnings
from collections.abc import Callable
from dataclasses import dataclass

FAILURES = ("bare", "memory", "crash", "hang", "wrong")


@dataclass
class Outcome:
    kind: str               # ok, refused, netted, bare, memory, crash, hang, wrong
    error: str = ""         # exception type (or signal name)
    message: str = ""       # first line of the message
    where: str = ""         # innermost Kuiper frame "file:line" of a bare exception

    @property
    def failed(self) -> bool:
        return self.kind in FAILURES

    @property
    def signature(self) -> str:
        """What makes two failures the same bug: the kind, the exception and where."""
        return f"{self.kind}:{self.error}@{self.where}"


def _innermost_kuiper_frame(tb) -> str:
    frames = [f for f in traceback.extract_tb(tb) if "kuiper" in f.filename
              or "/layers/" in f.filename or "/parser/" in f.filename]
    if not frames:
        return ""
    f = frames[-1]
    return f"{'/'.join(f.filename.split('/')[-2:])}:{f.lineno}"


def _random_input(port, rng):

    shape = tuple(d if isinstance(d, int) and d >= 0 else 1 for d in port.shape)
    if port.dtype.kind == "f":
        return rng.standard_normal(shape).astype(port.dtype)
    if port.dtype.kind == "c":
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(port.dtype)
    if port.dtype.kind == "b":
        return rng.random(shape) < 0.5
    return rng.integers(0, 5, shape).astype(port.dtype)


def random_inputs(graph, seed: int = 0) -> list:
    """One input per port of `graph`, of its declared shape (unknown sizes: 1) and dtype."""
    import numpy as np

    rng = np.random.default_rng(seed)
    return [_random_input(p, rng) for p in graph.inputs]


def run_case(param_path: str, backend: str) -> Outcome:
    """Load, summarise and run one model in *this* process; classify how it ended."""
    from kuiper.graph.load import load

    def case() -> None:
        graph = load(param_path, backend=backend)
        graph.summary()
        graph.forward(*random_inputs(graph))

    return classify(case)


def classify(case: Callable[[], Outcome | None]) -> Outcome:
    """Run `case` and say how it ended: what it returned (None: "ok"), or what it raised."""
    from kuiper.core.errors import KuiperError

    try:
        return case() or Outcome("ok")
    except KuiperError as e:
        cause = e.__cause__
        if isinstance(cause, Exception) and not isinstance(cause, KuiperError):
            # refused, but only by the safety net around the layers (kuiper.core.errors.MALFORMED):
            # not a failure, and worth a look; where the layer could say something precise
            return Outcome("netted", type(cause).__name__, str(cause).split("\n")[0][:300],
                           _innermost_kuiper_frame(cause.__traceback__))
        return Outcome("refused", type(e).__name__, str(e).split("\n")[0][:300])
    except MemoryError as e:
        return Outcome("memory", type(e).__name__, str(e)[:300],
                       _innermost_kuiper_frame(e.__traceback__))
    except Exception as e:  # noqa: BLE001 - the very thing a fuzzer looks for
        return Outcome("bare", type(e).__name__, str(e).split("\n")[0][:300],
                       _innermost_kuiper_frame(e.__traceback__))


@dataclass
class CaseLimits:
    seconds: float = 10.0
    memory_bytes: int = 3 << 30        # the child's address space, beyond what it inherits
    budget_tensor: int = 64 << 20      # KUIPER_MAX_TENSOR_BYTES inside the child
    budget_total: int = 256 << 20      # KUIPER_MAX_TOTAL_BYTES inside the child


def inherited_address_space() -> int:
    """Bytes of address space this process maps now (0 where /proc/self/statm is missing)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError):
        return 0


class Child:
    """One forked child running one case; `poll()` returns its Outcome once it has ended."""

    def __init__(self, param_path: str, backend: str, limits: CaseLimits,
                 target: Callable[[str, str], Outcome] = run_case):
        self.started = time.monotonic()
        self.limits = limits
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: never returns
            os.close(read)
            self._child(target, param_path, backend, limits, write)
        os.close(write)
        self.pid, self.pipe, self.output = pid, read, b""

    @staticmethod
    def _child(target, param_path: str, backend: str, limits: CaseLimits, write: int) -> None:
        try:
            os.environ["KUIPER_MAX_TENSOR_BYTES"] = str(limits.budget_tensor)
            os.environ["KUIPER_MAX_TOTAL_BYTES"] = str(limits.budget_total)
            # a forked child starts with all of its parent's address space (a test process
            # that has run thousands of tests maps gigabytes): the cap is on top of that
            cap = inherited_address_space() + limits.memory_bytes
            resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
            warnings.simplefilter("ignore")  # NumPy's overflow warnings are not findings
            logging.getLogger("kuiper").setLevel(logging.ERROR)  # no progress line per case
            signal.signal(signal.SIGALRM, signal.SIG_DFL)  # the alarm kills: a hang, not a catch
            signal.alarm(max(1, int(limits.seconds + 0.999)))
            outcome = target(param_path, backend)
            os.write(write, json.dumps(outcome.__dict__).encode()[:60000])
        except BaseException:  # noqa: BLE001 - anything escaping is reported by the exit code
            os._exit(3)
        os._exit(0)

    def kill(self) -> None:
        try:
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
        except (ProcessLookupError, ChildProcessError):  # already gone
            pass
        os.close(self.pipe)

    def poll(self) -> Outcome | None:
        while select.select([self.pipe], [], [], 0)[0]:
            chunk = os.read(self.pipe, 65536)
            if not chunk:
                break
            self.output += chunk
        pid, status = os.waitpid(self.pid, os.WNOHANG)
        if pid == 0:
            if time.monotonic() - self.started > self.limits.seconds + 5:
                os.kill(self.pid, signal.SIGKILL)  # the alarm did not fire: stuck in C code
            return None
        while chunk := os.read(self.pipe, 65536):
            self.output += chunk
        os.close(self.pipe)
        if os.WIFSIGNALED(status):
            sig = os.WTERMSIG(status)
            if sig in (signal.SIGALRM, signal.SIGKILL) and \
                    time.monotonic() - self.started >= self.limits.seconds:
                return Outcome("hang", "timeout", f"over {self.limits.seconds:g} s")
            return Outcome("crash", signal.Signals(sig).name, "killed by a signal")
        if self.output:
            return Outcome(**json.loads(self.output))
        return Outcome("crash", f"exit {os.WEXITSTATUS(status)}", "the child died without a report")


def prepare_parent(backends: list[str]) -> None:
    """Import what every child needs, once, before forking (never an OpenCL context)."""
    import kuiper.cpu.executor  # noqa: F401 - imported lazily by the graph: once, here
    import kuiper.graph.load  # noqa: F401
    from kuiper.core import registry

    for backend in backends:
        registry.load_layers("cpu")
        if backend == "opencl":
            import pyopencl  # noqa: F401

            import kuiper.opencl.execution.executor  # noqa: F401
            registry.load_layers("opencl")
