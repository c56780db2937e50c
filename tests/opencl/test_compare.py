"""`kuiper compare`: per-operator differences, the first operator over tolerance, exit codes."""

import subprocess
import sys

import numpy as np


def run_compare(path, *extra):
    return subprocess.run([sys.executable, "-m", "kuiper", "compare", str(path), *extra],
                          capture_output=True, text=True, timeout=300)


def test_backends_and_torch_agree(two_branch_model, tmp_path):
    path, inputs, _ = two_branch_model
    files = []
    for i, x in enumerate(inputs):
        files += ["--input", str(tmp_path / f"x{i}.npy")]
        np.save(tmp_path / f"x{i}.npy", x)
    result = run_compare(path, "--backends", "cpu,opencl", "--against", "torch", *files)
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    for name in ("stem.2", "right.0", "head"):  # operators appear with their rows
        assert name in out
    assert "output 0: opencl vs cpu" in out and "output 1: torch vs cpu" in out
    assert "MISMATCH" not in out and "first operator over tolerance" not in out


def test_a_zero_tolerance_marks_the_first_operator_and_fails(two_branch_model, tmp_path):
    from kuiper.bench.compare import trace_backend

    path, inputs, _ = two_branch_model
    files = []
    for i, x in enumerate(inputs):
        np.save(tmp_path / f"x{i}.npy", x)
        files += ["--input", str(tmp_path / f"x{i}.npy")]
    result = run_compare(path, "--backends", "cpu,opencl", "--rtol", "0", *files)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "MISMATCH" in result.stdout
    reported = result.stdout.split("first operator over tolerance: ")[1].split()[0]
    # Which operator rounds differently first depends on the device (a GPU's first conv may
    # match NumPy bit for bit); the report must name the first one in execution order.
    (cpu, graph), (ocl, _) = (trace_backend(str(path), b, inputs) for b in ("cpu", "opencl"))
    differing = [op.name for op in graph.order if op.name in cpu.outputs and any(
        not np.array_equal(a, b) for a, b in zip(cpu.outputs[op.name], ocl.outputs[op.name]))]
    assert differing and reported == differing[0]


def test_unknown_reference_is_a_usage_error(two_branch_model):
    path, _, _ = two_branch_model
    result = run_compare(path, "--against", "tensorflow")
    assert result.returncode == 2
    assert "unknown reference tensorflow" in result.stderr
