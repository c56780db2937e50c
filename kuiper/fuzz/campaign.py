"""A fuzzing campaign: many mutated models, each run in a sandbox, failures kept as a corpus.

    kuiper fuzz --cases 100000 --save fuzz-failures/   # a long campaign
    kuiper fuzz --replay tests/fuzz/corpus              # past failures again

Case `i` of seed `s` is always the same file (its random generator is seeded with "s:i"), so
any failure reproduces from its number alone, and a saved case is a folder that `kuiper info`
opens directly. The suite runs a short campaign on every run (tests/fuzz/test_fuzz.py).
"""

from __future__ import annotations

import random
import shutil
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from kuiper.fuzz import bin_mutations, param_mutations, scenarios
from kuiper.fuzz.sandbox import FAILURES, CaseLimits, Child, Outcome, prepare_parent, run_case

SEEDS = Path(__file__).resolve().parent / "seeds"
PARAM, BIN, SCENARIO = "model.pnnx.param", "model.pnnx.bin", "SCENARIO"


@dataclass
class Case:
    name: str
    param: bytes
    weights: bytes | None
    backend: str
    scenario: str = ""  # a scenario of scenarios.py run from this seed model ("": the file)
    number: str = ""    # the scenario case's number, from which it is made again

    def write(self, folder: Path) -> Path:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / PARAM).write_bytes(self.param)
        if self.weights is not None:
            (folder / BIN).write_bytes(self.weights)
        (folder / "BACKEND").write_text(self.backend + "\n")
        if self.scenario:
            (folder / SCENARIO).write_text(f"{self.scenario} {self.number}\n")
        return folder / PARAM

    def target(self):
        """What the sandboxed child runs: the model file, or the scenario."""
        return run_case if not self.scenario else scenarios.target(self.scenario, self.number)


@dataclass
class Report:
    counts: Counter = field(default_factory=Counter)
    failures: dict[str, tuple[Outcome, Case]] = field(default_factory=dict)  # one per signature
    seconds: float = 0.0

    @property
    def failed(self) -> int:
        return sum(n for kind, n in self.counts.items() if kind in FAILURES)

    def as_json(self) -> dict:
        return {"counts": dict(self.counts), "failed": self.failed, "seconds": self.seconds,
                "signatures": {sig: {"case": case.name, "backend": case.backend,
                                     "failed": outcome.failed, "message": outcome.message}
                               for sig, (outcome, case) in self.failures.items()}}

    def lines(self) -> list[str]:
        total = sum(self.counts.values())
        out = [f"{total} cases in {self.seconds:.0f} s: " + ", ".join(
            f"{kind} {n}" for kind, n in sorted(self.counts.items()))]
        for signature, (outcome, case) in sorted(self.failures.items()):
            out.append(f"  {signature}: {case.name} ({case.backend}): {outcome.message}")
        return out


def seed_models() -> list[tuple[str, bytes, bytes | None]]:
    seeds = []
    for param in sorted(SEEDS.glob("*.pnnx.param")):
        weights = param.with_name(param.name.replace(".param", ".bin"))
        seeds.append((param.name.split(".")[0], param.read_bytes(),
                      weights.read_bytes() if weights.exists() else None))
    return seeds


def known_types() -> list[str]:
    from kuiper.core import registry

    return sorted(registry.supported("cpu"))


def generate(seed: int, n: int, backends: list[str], opencl_share: float = 0.25
             ) -> Iterator[Case]:
    """Case i of `seed`: a seed model with its .param, expressions or .bin mutated."""
    seeds, types = seed_models(), known_types()
    for i in range(n):
        rng = random.Random(f"{seed}:{i}")
        name, param, weights = rng.choice(seeds)
        backend = "opencl" if "opencl" in backends and (
            backends == ["opencl"] or rng.random() < opencl_share) else "cpu"
        roll = rng.random()
        text = param.decode()
        if weights is not None and roll < 0.3:
            weights = bin_mutations.mutate(rng, weights)
        elif roll < 0.5:
            text = param_mutations.expr(rng, text.rstrip("\n").split("\n"))
            text = "\n".join(text) + "\n"
        else:
            text = param_mutations.mutate(rng, text, types)
        yield Case(f"{seed}-{i}-{name}", text.encode("utf-8", "surrogateescape"), weights,
                   backend)


def generate_scenarios(seed: int, n: int, backends: list[str],
                       names: list[str] | None = None) -> Iterator[Case]:
    """Scenario case i of `seed` (scenarios.py): a scenario and a seed model, both drawn."""
    seeds = seed_models()
    names = [name for name in (names or list(scenarios.SCENARIOS))
             if "opencl" in backends or name not in scenarios.NEEDS_OPENCL]
    for i in range(n if names else 0):
        rng = random.Random(f"scenario:{seed}:{i}")
        name = rng.choice(names)
        model, param, weights = rng.choice(seeds)
        yield Case(f"{seed}-s{i}-{name}-{model}", param, weights, rng.choice(backends),
                   scenario=name, number=f"{seed}:{i}")


def corpus(folder: Path) -> Iterator[Case]:
    """The saved cases of `folder` (each a subfolder with model.pnnx.param), on their backend."""
    for case_dir in sorted(p for p in Path(folder).iterdir() if (p / PARAM).exists()):
        weights = case_dir / BIN
        backend_file = case_dir / "BACKEND"
        backends = backend_file.read_text().split() if backend_file.exists() else ["cpu"]
        scenario = (case_dir / SCENARIO).read_text().split() if (case_dir / SCENARIO).exists() \
            else ["", ""]
        for backend in backends:
            yield Case(case_dir.name, (case_dir / PARAM).read_bytes(),
                       weights.read_bytes() if weights.exists() else None, backend, *scenario)


def run(cases: Iterable[Case], limits: CaseLimits, backends: list[str], jobs: int = 2,
        save: Path | None = None, progress: Callable[[Report], None] | None = None,
        budget_seconds: float | None = None) -> Report:
    """Run every case in a sandbox, `jobs` at a time; keep one failing case per signature.

    `cases` may be a generator: a long campaign never holds more than `jobs` cases at once."""
    prepare_parent(backends)
    report, started = Report(), time.monotonic()
    work = Path(tempfile.mkdtemp(prefix="kuiper-fuzz-"))
    running: list[tuple[Child, Case, Path]] = []
    pending = iter(cases)
    try:
        while True:
            out_of_time = budget_seconds is not None and \
                time.monotonic() - started > budget_seconds
            while len(running) < jobs and not out_of_time:
                case = next(pending, None)
                if case is None:
                    break
                folder = work / case.name / case.backend
                running.append((Child(str(case.write(folder)), case.backend, limits,
                                      case.target()), case, folder))
            if not running:
                break
            still = []
            for child, case, folder in running:
                outcome = child.poll()
                if outcome is None:
                    still.append((child, case, folder))
                    continue
                report.counts[outcome.kind] += 1
                if (outcome.failed or outcome.kind == "netted") and \
                        outcome.signature not in report.failures:
                    report.failures[outcome.signature] = (outcome, case)
                    if save is not None:
                        case.write(Path(save) / f"{case.name}-{case.backend}")
                shutil.rmtree(folder, ignore_errors=True)
                if progress is not None:
                    progress(report)
            running = still
            time.sleep(0.002)
    finally:
        for child, _, _ in running:  # interrupted: leave no orphans behind
            child.kill()
        shutil.rmtree(work, ignore_errors=True)
    report.seconds = time.monotonic() - started
    return report
