"""The fuzzer in the suite: a short campaign on every run, and the corpus of past failures.

Every case runs in a forked child with a time and a memory limit (kuiper/fuzz/sandbox.py),
and must end as "ok" or "refused" (a KuiperError); a bare exception, a crash, a hang or an
allocation past the limit fails the test, which lists one case per distinct failure.
The campaigns run as `python -m kuiper fuzz` in a fresh process: the sandbox forks, and a
process that has used OpenCL (as this test session has) cannot fork a child that uses it again.
KUIPER_FUZZ_SEED picks other cases (the default keeps CI repeatable); a long campaign is
`kuiper fuzz --cases 100000 --backends cpu,opencl --save DIR`.
"""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from kuiper.fuzz import campaign
from kuiper.fuzz.sandbox import CaseLimits, Child, Outcome, run_case
from tests.conftest import opencl_available

CORPUS = Path(__file__).resolve().parent / "corpus"
SEED = int(os.environ.get("KUIPER_FUZZ_SEED", "0"))
# cases per backend in the suite's short campaign (about 50 s in all on two cores; longer
# campaigns: `kuiper fuzz --cases N`)
SHORT = {"cpu": 800, "opencl": 170}   # 70-80 s each on 2 cores at three times these


def fuzz(tmp_path, *args) -> dict:
    """Run `kuiper fuzz ARGS` in a fresh process; its JSON report."""
    report = tmp_path / "report.json"
    proc = subprocess.run([sys.executable, "-m", "kuiper", "fuzz", "--time-limit", "20",
                           "--save", str(tmp_path / "failures"), "--report", str(report),
                           *args], capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, f"failures (saved under {tmp_path}):\n{proc.stdout}\n" \
                                 f"{proc.stderr[-3000:]}"
    return json.loads(report.read_text())


@pytest.mark.parametrize("seed", sorted(p.name.split(".")[0]
                                        for p in campaign.SEEDS.glob("*.param")))
def test_every_seed_model_runs(backend, seed):
    # mutations start from working models: a seed that is refused would test nothing
    outcome = run_case(str(campaign.SEEDS / f"{seed}.pnnx.param"), backend)
    assert outcome.kind == "ok", outcome


def test_corpus_of_past_failures_replays_cleanly(tmp_path, backend):
    cases = [c for c in campaign.corpus(CORPUS) if c.backend == backend]
    assert len(cases) >= 30
    only = tmp_path / "corpus"
    for case in cases:
        case.write(only / case.name)
    report = fuzz(tmp_path, "--replay", str(only))
    assert sum(report["counts"].values()) == len(cases)


def test_short_campaign(tmp_path, backend):
    report = fuzz(tmp_path, "--cases", str(SHORT[backend]), "--seed", str(SEED),
                  "--backends", backend, "--scenarios", "0")  # (tested on their own below)
    # the mutants must reach past the parser: a good share still loads and runs
    assert report["counts"].get("ok", 0) > SHORT[backend] // 10, report


def _abort(path, backend):
    os.abort()


def _hang(path, backend):
    time.sleep(60)


def _allocate(path, backend):
    import numpy as np

    try:
        np.ones(10**10)  # 80 GB, past the child's cap
    except MemoryError as e:
        return Outcome("memory", type(e).__name__, str(e))
    return Outcome("ok")


def _escape(path, backend):
    raise ValueError("an exception that escapes the case")


@pytest.mark.parametrize("target, kind, error", [
    (_abort, "crash", signal.Signals.SIGABRT.name),
    (_hang, "hang", "timeout"),
    (_allocate, "memory", "MemoryError"),
    (_escape, "crash", "exit 3"),
])
def test_sandbox_tells_failures_apart(tmp_path, target, kind, error):
    child = Child(str(tmp_path / "none.param"), "cpu", CaseLimits(seconds=1.0), target)
    while (outcome := child.poll()) is None:
        time.sleep(0.01)
    assert (outcome.kind, outcome.error) == (kind, error)
    assert outcome.failed


def test_run_case_tells_ok_refused_netted_and_bare_apart(tmp_path, monkeypatch):
    path = tmp_path / "model.pnnx.param"
    path.write_text("7767517\n2 1\npnnx.Input in0 0 1 0 #0=(1,2)f32\npnnx.Output out 1 0 0\n")
    assert run_case(str(path), "cpu").kind == "ok"
    path.write_text("7767517\n1 1\nnot a model\n")
    assert run_case(str(path), "cpu").kind == "refused"

    import kuiper

    def netted_load(*args, **kwargs):
        raise kuiper.KuiperError("refused by the net") from IndexError("deep inside")

    monkeypatch.setattr("kuiper.graph.load.load", netted_load)
    outcome = run_case(str(path), "cpu")
    assert (outcome.kind, outcome.error, outcome.failed) == ("netted", "IndexError", False)

    def broken_load(*args, **kwargs):
        raise IndexError("list index out of range")

    monkeypatch.setattr("kuiper.graph.load.load", broken_load)
    outcome = run_case(str(path), "cpu")
    assert (outcome.kind, outcome.error, outcome.failed) == ("bare", "IndexError", True)


# --- the scenarios around a model (kuiper/fuzz/scenarios.py, issue 31) ---------------------------
SHORT_SCENARIOS = {"cpu": 40, "opencl": 30}


def test_the_scenarios_are_the_ones_the_command_offers():
    from kuiper.cli.fuzz import SCENARIO_NAMES
    from kuiper.fuzz import scenarios

    assert SCENARIO_NAMES == tuple(scenarios.SCENARIOS)


def test_short_scenario_campaign(tmp_path, backend):
    """Files changed after a load, hostile cache files, failing plugins, wrong API arguments
    and (with OpenCL) edge values, CPU against OpenCL: each "ok" or "refused"."""
    count = SHORT_SCENARIOS[backend]
    report = fuzz(tmp_path, "--cases", "0", "--scenarios", str(count), "--seed", str(SEED),
                  "--backends", backend)
    assert sum(report["counts"].values()) == count and report["failed"] == 0, report
    assert report["counts"].get("ok", 0) > count // 4, report  # most get through the load


def outcome_of(name: str, number: str, seed: str = "small_cnn", backend: str = "cpu"):
    """One scenario case in a sandboxed child (a crash must not take pytest down)."""
    from kuiper.fuzz import scenarios

    child = Child(str(campaign.SEEDS / f"{seed}.pnnx.param"), backend,
                  CaseLimits(seconds=30.0), scenarios.target(name, number))
    while (outcome := child.poll()) is None:
        time.sleep(0.01)
    return outcome


def test_changed_files_catches_weights_that_follow_the_file(monkeypatch):
    """With the zero-copy weights of before issue 31 (views of a map of the .bin), rewriting
    the file changes the outputs ("wrong") and truncating it kills the run (SIGBUS: "crash")."""
    import mmap

    import numpy as np

    from kuiper.parser.binfile import WeightArchive

    real_read = WeightArchive.read

    def mapped(self, entry, shape, dtype):
        owned = real_read(self, entry, shape, dtype)  # all the checks, then the old views
        data = self._file.seek(0) or self._file.read()
        where = data.index(owned.tobytes()) if owned.nbytes else 0
        view = np.frombuffer(mmap.mmap(self._file.fileno(), 0, access=mmap.ACCESS_READ),
                             owned.dtype, owned.size, where)
        return view.reshape(owned.shape)

    monkeypatch.setattr(WeightArchive, "read", mapped)
    outcomes = [outcome_of("changed_files", f"0:{i}") for i in range(12)]
    assert {o.kind for o in outcomes} & {"wrong", "crash"}, outcomes
    monkeypatch.undo()
    assert {o.kind for o in [outcome_of("changed_files", f"0:{i}") for i in range(12)]} == \
        {"ok"}


@pytest.mark.skipif(not opencl_available(), reason="no OpenCL device")
def test_edges_catches_a_backend_that_disagrees():
    """sign() spelled with OpenCL's builtin, as before issue 31: sign(-0.0) is -0.0 there.
    (In a fresh process: this one has used OpenCL, and a forked child could not.)"""
    numbers = [n for n in range(200) if _draws_sign(n)][:3]
    assert numbers, "no edges case of seed 0 draws sign()"
    code = textwrap.dedent(f"""
        from kuiper.fuzz import campaign, scenarios
        from kuiper.layers.opencl_helpers import expression_codegen
        expression_codegen.FLOAT_C["sign"] = "sign({{a}})"
        seed = str(campaign.SEEDS / "small_cnn.pnnx.param")
        for n in {numbers}:
            outcome = scenarios.run("edges", f"0:{{n}}", seed, "opencl")
            print(outcome.kind, outcome.message[:60])
        """)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            env=env, timeout=300)
    assert result.returncode == 0, result.stderr
    assert any(line.startswith("wrong sign(") for line in result.stdout.splitlines()), \
        result.stdout


def _draws_sign(n: int) -> bool:
    import random

    from kuiper.parser.expression import FUNCTIONS

    names = [name for name, f in FUNCTIONS.items() if f.kind not in ("size", "bitwise", "shift")]
    return random.Random(f"edges:0:{n}").choice(names) == "sign"
