"""Which tensor-core precisions ("tf32", "fp16") a device runs, found by trying.

clkernels/gemm_mma.h reaches NVIDIA's tensor cores through inline PTX (`mma.sync`), which only
NVIDIA's OpenCL compiler understands, and which a driver could one day refuse or miscompile. So
before the selector may offer its parameter sets (layers/opencl_gemm/parameter_sets.py), the
question is asked once per device and driver, in a child process (a compiler that crashes on the
assembly must not take the caller down): build gemm_mma for each precision, run it on a small
product with every edge (M, N, K not multiples of its tiles, a bias, a group of batches) of
small integers, which TF32 and half hold exactly and whose sums float holds exactly, and
compare with NumPy bit for bit. A wrong fragment layout, a missing instruction or a bad
rounding all fail that comparison. TF32 is also run the way its parameter sets run it
(gemm_mma.h, point 8: slabs copied by cp.async, which needs the same Ampere-or-later GPU as the
TF32 mma, each value rounded only as its fragment leaves local memory), on the same integers
times 1 + 2^-13: a fragment that reached the tensor cores unrounded would not give the
integers' sums.

Only NVIDIA devices are asked: every other device (PoCL, Oclgrind, AMD, Intel...) answers "none"
at once, without a child process. The answer is kept three ways, as the vector-width probe's
(vector_width.py): in this process, in Kuiper's cache folder (probe_cache.py; keyed by device,
driver and the kernel's source: an edited gemm_mma.h is probed again), and in the environment
variable KUIPER_TENSOR_CORES ("tf32,fp16", "tf32", "none"), which child processes inherit.
Setting that variable yourself skips the question ("none" turns the tensor cores off).
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from typing import Any

from kuiper.opencl.device import probe_cache

logger = logging.getLogger(__name__)

ENV = "KUIPER_TENSOR_CORES"
FILE_NAME = "tensor_cores.json"
PRECISIONS = ("tf32", "fp16")
PROBE_TIMEOUT = 120   # seconds: five small programs through NVIDIA's compiler, with room to spare

# The child: build gemm_mma (linear.cl's layout: B stored N x K, a bias per column) for each
# precision with small tiles, its fragments loaded one word at a time and by ldmatrix (the
# parameter sets use both), and for TF32 also with its slabs copied by cp.async, run each
# on 37 x 29 x 45 products, 2 groups x 2 images, and print one line per precision: "tf32 ok",
# "tf32 wrong <max error>" or "tf32 error <message>".
PROBE_SCRIPT = r"""
import sys
import numpy as np
import pyopencl as cl

platform_name, device_name, kernel_dir = sys.argv[1], sys.argv[2], sys.argv[3]
extra = sys.argv[4:]   # ["-DMMA_EMULATED=1"]: the tests run this script where there is no PTX
device = next(d for p in cl.get_platforms() if p.name == platform_name
              for d in p.get_devices() if d.name == device_name)
context = cl.Context([device])
queue = cl.CommandQueue(context)
rng = np.random.default_rng(0)
m, n, k, groups, batch = 37, 29, 45, 2, 2
z = groups * batch
a = rng.integers(-3, 4, (groups, m, k)).astype(np.float32)
b = rng.integers(-3, 4, (z, n, k)).astype(np.float32)
bias = rng.integers(-3, 4, n).astype(np.float32)
want = np.stack([a[i % groups] @ b[i].T for i in range(z)]) + bias
mf = cl.mem_flags
buffers = [cl.Buffer(context, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=v) for v in (a, b, bias)]
# the same integers with bits below tf32's precision: x (1 + 2^-13) is exact in float32
noisy = [cl.Buffer(context, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=v * np.float32(1 + 2**-13))
         for v in (a, b)]
c = np.empty((z, m, n), np.float32)
c_buf = cl.Buffer(context, mf.READ_WRITE, c.nbytes)
ASYNC = ["-DMMA_ASYNC=1", "-DMMA_STAGES=2"]
for precision, f16 in (("tf32", 0), ("fp16", 1)):
    try:
        error = 0.0
        for ldmatrix, way in ((0, []), (1, []), (1, ASYNC)):
            if way and f16:
                continue
            options = ["-I", kernel_dir, "-DGEMM_MMA=1", "-DTRANS_B=1", f"-DMMA_F16={f16}",
                       "-DMMA_TILE_M=32", "-DMMA_TILE_N=32", "-DMMA_TILE_K=32",
                       "-DMMA_WARPS_M=1", "-DMMA_WARPS_N=2", "-DMMA_VEC=4",
                       f"-DMMA_LDMATRIX={ldmatrix}", *way, *extra]
            program = cl.Program(context, '#include "gemm.h"\n').build(options=options)
            kernel = program.gemm_mma
            i32 = np.int32
            a_buf, b_buf = noisy if way else buffers[:2]
            kernel.set_args(i32(m), i32(n), i32(k), a_buf, i32(m * k), b_buf,
                            i32(n * k), c_buf, i32(m * n), buffers[2], i32(2), i32(groups), None)
            tiles = ((n + 31) // 32 * 64, (m + 31) // 32, z)
            # NaN first: a kernel that wrote nothing must not pass on the last run's C
            cl.enqueue_fill_buffer(queue, c_buf, np.float32(np.nan), 0, c.nbytes)
            cl.enqueue_nd_range_kernel(queue, kernel, tiles, (64, 1, 1)).wait()
            cl.enqueue_copy(queue, c, c_buf)
            error = max(error, float(np.nan_to_num(np.abs(c - want), nan=np.inf).max()))
        print(f"{precision} ok" if error == 0 else f"{precision} wrong {error:g}", flush=True)
    except Exception as e:
        print(f"{precision} error {' '.join(str(e).split())[:300]}", flush=True)
"""

_known: dict[str, frozenset[str]] = {}


def tensor_cores(device: Any) -> frozenset[str]:
    """The precisions ("tf32", "fp16") whose gemm_mma kernels `device` builds and runs right.

    A stand-in device without a platform (the cost model's tests describe an H100 so) answers
    its own `tensor_cores` attribute."""
    platform = getattr(device, "platform", None)
    if platform is None:
        return frozenset(getattr(device, "tensor_cores", ()))
    if "nvidia" not in platform.name.lower():
        return frozenset()   # PTX is NVIDIA's: nothing to ask
    if os.environ.get(ENV) is not None:
        return parse(os.environ[ENV])
    key = probe_key(device)
    if key not in _known:
        stored = _load().get(key)
        _known[key] = (frozenset(p for p in stored if p in PRECISIONS)
                       if isinstance(stored, list) else _probe(device, key))
    os.environ[ENV] = text(_known[key])   # child processes need not ask again
    return _known[key]


def probe_key(device: Any) -> str:
    """What an answer is valid for: the device and driver (tuning_cache.device_key) and the
    kernel's source, so that a changed gemm_mma.h is asked about again."""
    import hashlib

    from kuiper.clkernels import KERNEL_DIR
    from kuiper.opencl.device.tuning_cache import device_key

    digest = hashlib.sha256()
    for name in ("gemm.h", "gemm_mma.h"):
        digest.update((KERNEL_DIR / name).read_bytes())
    return f"{device_key(device)} | gemm_mma {digest.hexdigest()[:12]}"


def parse(value: str) -> frozenset[str]:
    """KUIPER_TENSOR_CORES's value as a set of precisions ("none" and "" are none)."""
    return frozenset(p.strip() for p in value.split(",") if p.strip() in PRECISIONS)


def text(precisions: frozenset[str]) -> str:
    return ",".join(p for p in PRECISIONS if p in precisions) or "none"


def _probe(device: Any, key: str, emulated: bool = False) -> frozenset[str]:
    """Run PROBE_SCRIPT for `device`; `emulated`: with -DMMA_EMULATED=1 (the tests check the
    script itself so on devices without PTX; the answer is then not kept)."""
    from kuiper.clkernels import KERNEL_DIR

    lines: list[str] = []
    try:
        result = subprocess.run([sys.executable, "-c", PROBE_SCRIPT, device.platform.name,
                                 device.name, str(KERNEL_DIR)]
                                + (["-DMMA_EMULATED=1"] if emulated else []),
                                capture_output=True, text=True, timeout=PROBE_TIMEOUT)
        lines = result.stdout.strip().splitlines()
        if result.returncode != 0:
            last = (result.stderr.strip().splitlines() or ["no message"])[-1]
            lines.append(f"probe exit status {result.returncode}: {last}")
    except subprocess.TimeoutExpired:
        lines = [f"probe gave no answer in {PROBE_TIMEOUT} s"]
    found = frozenset(line.split()[0] for line in lines
                      if line.endswith(" ok") and line.split()[0] in PRECISIONS)
    for line in lines:
        if not line.endswith(" ok"):
            logger.warning("%s: tensor cores not used for %s (see "
                           "kuiper/opencl/device/tensor_cores.py)", key, line[:300])
    if not emulated:
        _save(key, found)
    return found


def _load() -> dict:
    return probe_cache.load(FILE_NAME)[0]   # a file that cannot be used: no answers


def _save(key: str, precisions: frozenset[str]) -> None:
    probe_cache.save(FILE_NAME, {**_load(), key: sorted(precisions)})
