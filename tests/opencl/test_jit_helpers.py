"""JIT helpers (kuiper/opencl/device/jit_helper.py): other processes compile PoCL's kernels, by
launching them once on zeros, into the kcache this process then reads.

Each case runs in a child process with a kcache folder of its own (PoCL reads POCL_CACHE_DIR
once, when it starts).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from tests.conftest import ROOT, opencl_available

pytestmark = pytest.mark.skipif(not opencl_available(), reason="no OpenCL device: install "
                                "PoCL with `pip install -e \".[pocl]\"`")

SCRIPT = textwrap.dedent('''
    import pathlib, sys, time
    import numpy as np
    from kuiper.layers.opencl_base import Launch
    from kuiper.opencl.device.runtime import OpenCLRuntime, compiles_to_native_cpu

    runtime = OpenCLRuntime()
    if not compiles_to_native_cpu(runtime.device):
        print("skip not a device that compiles at first launch"); sys.exit()
    source = """
    __kernel void scale(__global float *x, const float by, const int n) {
        const int i = get_global_id(0);
        if (i < n) x[i] = x[i] * by + 1.0f;
    }
    __kernel void divide(__global int *x, const int n) {  /* on zeros: 0 / 0 */
        const int i = get_global_id(0);
        if (i < n) x[i] = 100 / x[i];
    }"""
    program = runtime.program_from_source(source, [], "test kernels")
    runtime.cold_builds = 1  # as after a cold build: the helpers start
    x = runtime.to_device(np.arange(64, dtype=np.float32))
    launches = []
    for name, args in (("scale", (x.data, np.float32(2), np.int32(64))),
                       ("divide", (x.data, np.int32(64)))):
        kernel = runtime.kernel_of(program, name, name)
        kernel.set_args(*args)
        launches.append(Launch(kernel, (64,), (16,)))
    helpers = runtime.jit_helpers()
    kcache = pathlib.Path(sys.argv[1])

    def compiled(name):
        return sorted(kcache.rglob(name + "/16-1-1-goffs0*"))

    helpers.offer(launches)
    helpers.offer(launches)  # offered twice: one job each
    deadline = time.time() + 120
    while sum(helpers.answers.values()) < 2 and time.time() < deadline:
        time.sleep(0.05)
    print(sorted(helpers.answers.items()), bool(compiled("scale")))
    helpers.claim(launches)  # nothing left to wait for
    import pyopencl as cl
    cl.enqueue_nd_range_kernel(runtime.queue, launches[0].kernel, (64,), (16,))
    print(x.get()[:3].tolist(), len(compiled("scale")))
    helpers.stop()
''')


def test_helpers_compile_into_pocls_cache_and_survive_a_crash(tmp_path):
    kcache = tmp_path / "kcache"
    env = dict(os.environ, POCL_CACHE_DIR=str(kcache), KUIPER_JIT_HELPERS="1",
               KUIPER_CACHE_DIR=str(tmp_path / "kuiper"), PYTHONPATH=os.pathsep.join(
                   p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p))
    result = subprocess.run([sys.executable, "-c", SCRIPT, str(kcache)], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=600, check=False)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    if lines[0].startswith("skip"):
        pytest.skip(lines[0])
    # jobs are taken newest first: `divide` divides by zero and kills its helper (SIGFPE), or
    # leaves garbage; either way `scale` was compiled first, into PoCL's cache
    answers, scale_compiled = lines[0].rsplit(" ", 1)
    assert scale_compiled == "True", lines
    assert "done" in answers
    # this process's own launch then uses the helper's compiled kernel: the same folder, and
    # the right values (the helper ran on zeros of its own, not on this process's buffer)
    values, folders = lines[1].rsplit(" ", 1)
    assert values == "[1.0, 3.0, 5.0]" and folders == "1"


def test_no_helpers_where_they_would_not_help(monkeypatch):
    from kuiper.opencl.device import jit_helper
    from kuiper.opencl.device.runtime import OpenCLRuntime

    monkeypatch.setenv("KUIPER_JIT_HELPERS", "0")
    assert jit_helper.helper_count() == 0
    runtime = OpenCLRuntime()
    runtime.cold_builds = 1
    assert runtime.jit_helpers() is None
    monkeypatch.setenv("KUIPER_JIT_HELPERS", "99")
    assert jit_helper.helper_count() == jit_helper.MAX_HELPERS
    monkeypatch.setenv("KUIPER_JIT_HELPERS", "1")
    warm = OpenCLRuntime()  # a warm cache: no program compiled for real, no helper started
    assert warm.cold_builds == 0 and warm.jit_helpers() is None
