"""Whether a CPU device's compiler builds 16-wide vectors (float16, int16), found by trying.

Kuiper's CPU kernels (direct convolution, gemm_blocked's 8x16 and 8x32 blocks, Winograd's and
implicit GEMM's wide blocks) keep 16 floats per vector: one AVX-512 register. Some PoCL builds
cannot compile them. PoCL 3.0 (LLVM 14) on an AMD Zen 4 CPU is one: it links the kernel
library built for AVX-512, since the CPU has it, but compiles for "znver3", which LLVM 14 takes
Zen 4 for and which has no AVX-512, and LLVM then aborts the whole process ("Do not know how to
scalarize this operator's operand") or compiles for minutes. An abort cannot be caught, so the
question is asked once in a child process: build and run a small kernel of 16-wide vectors and
check its result. Where that fails, the selector and the parameter sets use 8-wide vectors only
(`wide_vectors(device)` is False), which every x86-64 PoCL builds.

The answer is kept three ways, so that it is asked once per machine: in this process, in
Kuiper's cache folder (probe_cache.py; keyed by device and driver), and in the environment
variable KUIPER_POCL_VECTOR_WIDTH, which child processes inherit. Setting that variable
yourself (16 or 8) skips the question. Only PoCL's CPU devices are asked: GPUs and Oclgrind
build float16.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading
from typing import Any

from kuiper.core.log import warn
from kuiper.opencl.device import probe_cache

logger = logging.getLogger(__name__)

ENV = "KUIPER_POCL_VECTOR_WIDTH"
FILE_NAME = "vector_width.json"
PROBE_TIMEOUT = 60   # seconds: a broken compiler may also run for minutes instead of aborting

# Three kernels, run in this order: each is the kind of code a failing compiler trips on
# (a builtin on int16, vector loads, a builtin on float16 and a select with an int16 mask).
PROBE_SCRIPT = r"""
import sys
import numpy as np
import pyopencl as cl

platform_name, device_name = sys.argv[1], sys.argv[2]
device = next(d for p in cl.get_platforms() if p.name == platform_name
              for d in p.get_devices() if d.name == device_name)
context = cl.Context([device])
queue = cl.CommandQueue(context)
source = '''
__kernel void clamp16(__global int *n) {
    vstore16(clamp(vload16(0, n), (int16)(0), (int16)(7)), 0, n);
}
__kernel void add16(__global float *x) { vstore16(vload16(0, x) * 2.0f + 1.0f, 0, x); }
__kernel void select16(__global float *x) {
    const float16 v = vload16(0, x);
    vstore16(select(fmax(v, 0.0f), exp(v), v < 0.0f), 0, x);
}
'''
program = cl.Program(context, source).build()
mf = cl.mem_flags
n = np.arange(-4, 12, dtype=np.int32)
x = np.linspace(-2, 2, 16, dtype=np.float32)
n_buf = cl.Buffer(context, mf.READ_WRITE | mf.COPY_HOST_PTR, hostbuf=n)
x_buf = cl.Buffer(context, mf.READ_WRITE | mf.COPY_HOST_PTR, hostbuf=x)
for name, buf in (("clamp16", n_buf), ("add16", x_buf), ("select16", x_buf)):
    kernel = getattr(program, name)
    kernel.set_args(buf)
    cl.enqueue_nd_range_kernel(queue, kernel, (1,), (1,)).wait()
cl.enqueue_copy(queue, n, n_buf)
cl.enqueue_copy(queue, x, x_buf)
want = np.linspace(-2, 2, 16, dtype=np.float32) * 2 + 1
want = np.where(want < 0, np.exp(want), want)
ok = np.array_equal(n, np.clip(np.arange(-4, 12), 0, 7)) and np.allclose(x, want, rtol=1e-5)
print("ok" if ok else "wrong")
"""

_known: dict[str, bool] = {}
_asking = threading.Lock()


CL_DEVICE_TYPE_CPU = 2   # the OpenCL constant (pyopencl's device_type.CPU)


def pocl_cpu(device: Any) -> bool:
    """Whether `device` is one of PoCL's CPU devices (None, or a stand-in without a platform
    as the cost model's tests use, is not): the one test, which the runtime's
    `compiles_to_native_cpu` asks too (this module does not import the runtime back)."""
    platform = getattr(device, "platform", None)
    return (platform is not None and bool(int(device.type) & CL_DEVICE_TYPE_CPU)
            and "portable computing language" in platform.name.lower())


def wide_vectors(device: Any) -> bool:
    """Whether kernels for `device` may use 16-wide vectors (see the module docstring)."""
    if not pocl_cpu(device):
        return True
    if os.environ.get(ENV) in ("8", "16"):
        return os.environ[ENV] == "16"
    from kuiper.opencl.device.tuning_cache import device_key

    key = device_key(device)
    with _asking:  # one question at a time: a second caller waits for the first's answer
        if key not in _known:
            stored = _load(warn_if_broken=True).get(key)
            _known[key] = stored if isinstance(stored, bool) else _probe(device, key)
    os.environ[ENV] = "16" if _known[key] else "8"   # child processes need not ask again
    return _known[key]


def ask_early(device: Any) -> None:
    """Start finding the answer for `device` in a background thread: the probe is a child
    process of a second or two on a machine's first run, which the runtime starts as it
    creates its context, so that it overlaps the model's parsing and weight uploads instead
    of delaying the first kernel build."""
    if pocl_cpu(device) and os.environ.get(ENV) not in ("8", "16"):
        threading.Thread(target=wide_vectors, args=(device,), daemon=True,
                         name="kuiper-vector-width").start()


def narrow_registers(device: Any) -> bool:
    """Whether `device` is a CPU whose vector registers hold 8 floats (AVX2: sixteen of them,
    half of AVX-512's 32), as its preferred float vector width says. A block of results sized
    for AVX-512, 32 floats by 8 (16 of its registers), needs 32 of these and spills: the direct
    convolution and Winograd's products take smaller ones there (layers/opencl_conv/)."""
    return (device is not None and bool(int(device.type) & CL_DEVICE_TYPE_CPU)
            and int(getattr(device, "preferred_vector_width_float", 16) or 16) <= 8)


def width(device: Any) -> int:
    """The widest vector, in floats, the CPU kernels use on `device`: 16 or 8."""
    return 16 if wide_vectors(device) else 8


def _probe(device: Any, key: str) -> bool:
    try:
        result = subprocess.run([sys.executable, "-c", PROBE_SCRIPT, device.platform.name,
                                 device.name], capture_output=True, text=True,
                                timeout=PROBE_TIMEOUT)
        ok = result.returncode == 0 and result.stdout.strip().endswith("ok")
        why = (result.stderr.strip().splitlines() or [f"exit status {result.returncode}"])[-1]
    except subprocess.TimeoutExpired:
        ok, why = False, f"no answer in {PROBE_TIMEOUT} s"
    if not ok:
        logger.warning("%s cannot build 16-wide vectors (%s): Kuiper's CPU kernels use 8-wide "
                       "ones on it (slower; see kuiper/opencl/device/vector_width.py)", key,
                       why[:200])
    _save(key, ok)
    return ok


def _load(warn_if_broken: bool = False) -> dict:
    """The stored answers {device key: bool}. A cache file that cannot be used
    (probe_cache.load), or answers that are not True or False, are ignored, with a warning
    when `warn_if_broken`: the question is asked again, and the answer written over them."""
    data, why = probe_cache.load(FILE_NAME)
    answers = {k: v for k, v in data.items() if isinstance(v, bool)}
    if why is None and len(answers) < len(data):
        why = f"{len(data) - len(answers)} answer(s) neither true nor false"
    if why is not None and warn_if_broken:
        warn(f"the vector-width cache {probe_cache.path(FILE_NAME)} cannot be used ({why}): "
             "it is ignored, the device is asked again")
    return answers


def _save(key: str, ok: bool) -> None:
    probe_cache.save(FILE_NAME, {**_load(), key: ok})
