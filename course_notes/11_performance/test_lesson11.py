"""Lesson 11: profiles from the observer hook and from OpenCL profiling events."""

import statistics
from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np
import pytest

import kuiper
from kuiper.tools.bench import PROFILE_RUNS
from kuiper.tools.course import implementation, require_opencl
from kuiper.tools.demo import DIGITS_PARAM

REFERENCE = {
    "cpu_profile": "kuiper.tools.bench:cpu_profile",
    "opencl_profile": "kuiper.tools.bench:opencl_profile",
}
ex = implementation(__file__, REFERENCE)

# Made-up timings: run r of operator k takes TIMES[k][r] seconds. Medians differ from means
# and from any single run, so only a real median over PROFILE_RUNS runs gets them right.
OPS = [SimpleNamespace(name=n) for n in ("conv", "relu", "pool")]
TIMES = {"conv": [5.0, 1.0, 3.0, 100.0, 2.0, 7.0, 9.0],
         "relu": [0.1, 0.3, 0.2, 0.2, 9.0, 0.1, 0.1],
         "pool": [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]}
EXPECTED = {name: statistics.median(t[:PROFILE_RUNS]) for name, t in TIMES.items()}


class FakeCPUGraph:
    def __init__(self):
        self.runs = 0

    def forward(self, *inputs, observer=None):
        assert observer is not None, "pass observer=... to forward()"
        for op in OPS:
            observer(op, [], TIMES[op.name][self.runs])
        self.runs += 1
        return []


@dataclass
class FakeEvent:
    profile: SimpleNamespace


class FakeOpenCLGraph:
    def __init__(self):
        self.runs = 0
        self.executor = self

    def forward(self, *inputs):
        self.runs += 1
        return []

    def operator_events(self):
        r = self.runs - 1
        events = []
        for op in OPS:  # each operator's time split over two kernel launches
            ns = int(TIMES[op.name][r] * 1e9)
            events.append((op, [FakeEvent(SimpleNamespace(start=1000, end=1000 + ns // 3)),
                                FakeEvent(SimpleNamespace(start=5000, end=5000 + ns - ns // 3))
                                ]))
        return events


def test_cpu_profile_takes_the_median_of_every_operator():
    graph = FakeCPUGraph()
    profile = ex.cpu_profile(graph, [np.zeros(1)])
    assert graph.runs == PROFILE_RUNS, f"ran {graph.runs} times, expected {PROFILE_RUNS}"
    assert profile == pytest.approx(EXPECTED)


def test_opencl_profile_adds_up_each_operators_events():
    graph = FakeOpenCLGraph()
    profile = ex.opencl_profile(graph, [np.zeros(1)])
    assert graph.runs == PROFILE_RUNS, f"ran {graph.runs} times, expected {PROFILE_RUNS}"
    assert profile == pytest.approx(EXPECTED, rel=1e-6)


def test_cpu_profile_of_the_demo_model():
    graph = kuiper.load(DIGITS_PARAM)
    x = np.random.default_rng(11).random((1, 1, 8, 8), dtype=np.float32)
    profile = ex.cpu_profile(graph, [x])
    assert set(profile) == {op.name for op in graph.order if op.layer is not None}
    assert all(s > 0 for s in profile.values())


def test_opencl_profile_of_the_demo_model():
    require_opencl()
    graph = kuiper.load(DIGITS_PARAM, backend="opencl", profiling=True)
    x = np.random.default_rng(11).random((1, 1, 8, 8), dtype=np.float32)
    profile = ex.opencl_profile(graph, [x])
    assert set(profile) == {op.name for op, _ in graph.executor.steps}
    assert all(s >= 0 for s in profile.values()) and sum(profile.values()) > 0
