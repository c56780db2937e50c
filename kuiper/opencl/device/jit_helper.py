"""Compiling PoCL's kernels in parallel: helper processes that launch them once, on zeros.

PoCL compiles a kernel at its first launch with a given work-group size (LLVM's optimiser and
code generator: 0.2 to 5 s per kernel, most of a cold first run) and files the result in its
cache folder (kcache), where any other process with the same program finds it. Within one
process PoCL compiles one kernel at a time (and two threads building programs at once crash
it: "corrupted size vs. prev_size"), so a model's kernels compile one after the other, on one
core. Helpers are other processes: each builds the same program (its Clang step is then a
kcache hit: the executor has built it already), launches the kernel once, with the same sizes,
on zero-filled buffers of the same sizes, and so leaves the compiled kernel in kcache. The
executor's warm-up run (kuiper/opencl/execution/executor.py) then finds it there instead of
compiling it.

    helpers = JitHelpers.start(runtime)          # usable cores - 1 of them, at most 4
    helpers.offer(launch)                        # as each layer binds
    helpers.claim(launch)                        # the warm-up is about to launch it itself

Jobs are taken newest first: while the executor binds the model front to back, the helpers
compile what it bound last, and when its warm-up runs the model front to back, the helpers work
from the back; `claim` takes a job back (or waits for a helper that already started it), so no
kernel is compiled twice. A helper that crashes (a kernel reading zeros it divides by) only
stops helping: the warm-up compiles what is left. KUIPER_JIT_HELPERS=0 turns them off, a number
sets how many. Only PoCL's CPU devices use them: other drivers compile when they build.
"""

from __future__ import annotations

import logging
import os
import pickle
import struct
import subprocess
import sys
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

logger = logging.getLogger(__name__)

ENV = "KUIPER_JIT_HELPERS"
MAX_HELPERS = 4
# A job's buffers are allocated (and zeroed) in the helper: above this many bytes of them the
# executor compiles the kernel itself rather than double the memory a large layer needs.
MAX_JOB_BYTES = 256 << 20


def helper_count() -> int:
    """How many helpers to start: KUIPER_JIT_HELPERS, else the usable cores minus one."""
    setting = os.environ.get(ENV, "").strip()
    if setting.isdigit():
        return min(int(setting), MAX_HELPERS)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (
        os.cpu_count() or 1)
    return max(0, min(cores - 1, MAX_HELPERS))


def describe(launch: Any, sources: dict) -> tuple | None:
    """(key, job) of a Launch whose kernel a helper can compile, or None: its program's source
    and options (`sources`: the runtime's record, by program handle), the kernel's name, its
    sizes, and each argument as ("buffer", bytes), ("scalar", value), ("local", bytes) or
    ("null",)."""
    kernel = launch.kernel
    bound = getattr(kernel, "bound", None)
    program = sources.get(kernel.program.int_ptr) if bound is not None else None
    if program is None or len(bound) != kernel.num_args:
        return None
    args, total = [], 0
    for index in range(kernel.num_args):
        value = bound[index]
        if value is None:
            args.append(("null",))
        elif isinstance(value, np.generic):
            args.append(("scalar", value))
        elif hasattr(value, "size") and hasattr(value, "int_ptr"):  # a Buffer
            args.append(("buffer", int(value.size)))
            total += int(value.size)
        elif type(value).__name__ == "LocalMemory":
            args.append(("local", int(value.size)))
        else:
            return None
    if total > MAX_JOB_BYTES:
        return None
    local = tuple(launch.local_size) if launch.local_size else None
    key = (kernel.program.int_ptr, kernel.function_name, local, tuple(launch.global_size))
    source, options = program
    return key, (source, tuple(options), kernel.function_name, tuple(launch.global_size),
                 local, tuple(args))


class JitHelpers:
    """The helper processes of one runtime and their stack of jobs (module docstring)."""

    def __init__(self, processes: list[subprocess.Popen], sources: dict):
        self.sources = sources
        self._lock = threading.Condition()
        self._stack: list[tuple] = []          # (key, job), newest last
        self._seen: set = set()                # every key offered
        self._running: dict[Any, int] = {}     # key -> helpers compiling it now
        self._threads = [threading.Thread(target=self._feed, args=(p,), daemon=True,
                                          name="kuiper-jit-helper") for p in processes]
        self._processes = processes
        self.answers: dict[str, int] = {}      # "done" / "failed ..." -> how many (-v shows)
        for thread in self._threads:
            thread.start()

    @classmethod
    def start(cls, runtime) -> JitHelpers | None:
        """Helpers for `runtime`'s device (PoCL's: the runtime asks only for one of those), or
        None (no spare core, or they would not start)."""
        count = helper_count()
        if count == 0:
            return None
        # run as a script: `-m kuiper...` would import all of Kuiper first, for nothing
        command = [sys.executable, os.path.abspath(__file__), runtime.device.platform.name,
                   runtime.device.name]
        try:
            processes = [subprocess.Popen(command, stdin=subprocess.PIPE,
                                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
                         for _ in range(count)]
        except OSError as e:
            logger.debug("no JIT helpers: %s", e)
            return None
        logger.debug("%d JIT helper process(es) started", count)
        return cls(processes, runtime.program_sources)

    def offer(self, launches: Sequence[Any]) -> None:
        """Jobs for the kernels of `launches` that are new."""
        with self._lock:
            for launch in launches:
                described = describe(launch, self.sources)
                if described is not None and described[0] not in self._seen:
                    self._seen.add(described[0])
                    self._stack.append(described)
            self._lock.notify_all()

    def claim(self, launches: Sequence[Any]) -> None:
        """The caller is about to launch these: take their jobs back, and wait for those a
        helper has started (its compiled kernel is then in PoCL's cache)."""
        keys = set()
        for launch in launches:
            described = describe(launch, self.sources)
            if described is not None:
                keys.add(described[0])
        with self._lock:
            self._stack = [job for job in self._stack if job[0] not in keys]
            while any(self._running.get(key) for key in keys) and self._alive():
                self._lock.wait(timeout=1.0)

    def _alive(self) -> bool:
        return any(p.poll() is None for p in self._processes)

    def _feed(self, process: subprocess.Popen) -> None:
        """One thread per helper: hand it the newest job, wait for its answer, repeat."""
        while True:
            with self._lock:
                while not self._stack:
                    if process.poll() is not None:
                        return
                    self._lock.wait()
                key, job = self._stack.pop()
                self._running[key] = self._running.get(key, 0) + 1
            try:
                data = pickle.dumps(job)
                process.stdin.write(struct.pack("<Q", len(data)) + data)
                process.stdin.flush()
                answer = process.stdout.readline()
            except (OSError, ValueError):
                answer = b""
            with self._lock:
                self._running[key] -= 1
                word = answer.decode(errors="replace").strip() or "stopped"
                self.answers[word] = self.answers.get(word, 0) + 1
                self._lock.notify_all()
            if not answer:  # the helper died (or was stopped): the warm-up does the rest
                logger.debug("a JIT helper stopped (exit status %s)", process.poll())
                return

    def stop(self) -> None:
        for process in self._processes:
            if process.poll() is None:
                process.kill()
                process.wait()
        with self._lock:
            self._lock.notify_all()


# --- the helper process -----------------------------------------------------------------------
def _device(platform_name: str, device_name: str):
    import pyopencl as cl

    return next(d for p in cl.get_platforms() if p.name == platform_name
                for d in p.get_devices() if d.name == device_name)


def _run(job, context, queue, programs: dict) -> None:
    import pyopencl as cl

    source, options, name, global_size, local_size, args = job
    program = programs.get((source, options))
    if program is None:
        program = programs[(source, options)] = cl.Program(context, source).build(
            options=list(options))
    kernel = cl.Kernel(program, name)
    buffers = []
    for index, arg in enumerate(args):
        if arg[0] == "buffer":
            buffer = cl.Buffer(context, cl.mem_flags.READ_WRITE, max(arg[1], 1))
            cl.enqueue_fill_buffer(queue, buffer, np.uint8(0), 0, max(arg[1], 1))
            buffers.append(buffer)
            kernel.set_arg(index, buffer)
        elif arg[0] == "scalar":
            kernel.set_arg(index, arg[1])
        elif arg[0] == "local":
            kernel.set_arg(index, cl.LocalMemory(arg[1]))
        else:
            kernel.set_arg(index, None)
    cl.enqueue_nd_range_kernel(queue, kernel, global_size, local_size)
    queue.finish()


def main(argv: Sequence[str]) -> int:
    """The helper: jobs (length-prefixed pickles) on stdin, one answer line each on stdout."""
    import warnings

    import pyopencl as cl

    warnings.simplefilter("ignore")  # pyopencl's CompilerWarnings: nobody reads them here
    context = cl.Context([_device(argv[0], argv[1])])
    queue = cl.CommandQueue(context)
    programs: dict = {}
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    while True:
        header = stdin.read(8)
        if len(header) < 8:
            return 0
        job = pickle.loads(stdin.read(struct.unpack("<Q", header)[0]))
        try:
            _run(job, context, queue, programs)
            stdout.write(b"done\n")
        except Exception as e:  # noqa: BLE001 - a job that fails is the warm-up's to do
            stdout.write(f"failed {type(e).__name__}\n".encode())
        stdout.flush()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
