"""Lesson 11: profiles from the observer hook and from OpenCL profiling events.

Every time here is measured, on real runs of real models: the profiles must be the medians of
what the graph itself observed, and the model's heavy operator must come out heavier than its
light one. Times are compared with each other (ratios), never with a number of seconds: they
depend on the machine.
"""

import statistics

import numpy as np
import pytest

import kuiper
from kuiper.bench.timing import PROFILE_RUNS
from kuiper.course.lessons import implementation, require_opencl
from kuiper.demo import DIGITS_PARAM

REFERENCE = {
    "cpu_profile": "kuiper.bench.columns:cpu_profile",
    "opencl_profile": "kuiper.bench.columns:opencl_profile",
}
ex = implementation(__file__, REFERENCE)


class CPUSpy:
    """The real graph, recording every time its observer hook reports (per operator, per run)."""

    def __init__(self, graph):
        self.graph, self.runs, self.seen = graph, 0, {}

    def forward(self, *inputs, observer=None):
        assert observer is not None, "pass observer=... to forward()"

        def record(op, outputs, seconds):
            self.seen.setdefault(op.name, []).append(seconds)
            observer(op, outputs, seconds)

        self.runs += 1
        return self.graph.forward(*inputs, observer=record)


class OpenCLSpy:
    """The real OpenCL graph, recording each operator's event times (ns) of every run."""

    def __init__(self, graph):
        self.graph, self.runs, self.seen = graph, 0, {}
        self.executor = self

    def forward(self, *inputs):
        self.runs += 1
        return self.graph.forward(*inputs)

    def operator_events(self):
        pairs = self.graph.executor.operator_events()
        for op, events in pairs:
            ns = sum(e.profile.end - e.profile.start for e in events)
            self.seen.setdefault(op.name, []).append(ns * 1e-9)
        return pairs


def medians(seen):
    return {name: statistics.median(times) for name, times in seen.items()}


# A batch of 256 digits: the second convolution (8 -> 16 channels, 3x3, about 19M
# multiply-adds) is the heavy operator, the last Linear (64 -> 10, about 0.16M) a light one.
BATCH = 256
HEAVY, LIGHT = "features.2", "classifier.3"


def batch():
    return np.random.default_rng(11).random((BATCH, 1, 8, 8), dtype=np.float32)


def test_cpu_profile_is_the_median_of_the_observed_times():
    spy = CPUSpy(kuiper.load(DIGITS_PARAM))
    x = np.random.default_rng(11).random((1, 1, 8, 8), dtype=np.float32)
    profile = ex.cpu_profile(spy, [x])
    assert spy.runs == PROFILE_RUNS, f"ran {spy.runs} times, expected {PROFILE_RUNS}"
    assert all(len(t) == PROFILE_RUNS for t in spy.seen.values())
    assert profile == pytest.approx(medians(spy.seen), rel=1e-12)


def test_cpu_profile_puts_the_heavy_operator_first():
    graph = kuiper.load(DIGITS_PARAM, input_shapes=[(BATCH, 1, 8, 8)])
    profile = ex.cpu_profile(graph, [batch()])
    heavy, light = profile[HEAVY], profile[LIGHT]
    assert heavy > 2 * light, f"{HEAVY} ({heavy:.3g} s) should take far longer than " \
        f"{LIGHT} ({light:.3g} s)"


def test_opencl_profile_is_the_median_of_the_event_times():
    require_opencl()
    spy = OpenCLSpy(kuiper.load(DIGITS_PARAM, backend="opencl", profiling=True))
    x = np.random.default_rng(11).random((1, 1, 8, 8), dtype=np.float32)
    profile = ex.opencl_profile(spy, [x])
    assert spy.runs == PROFILE_RUNS, f"ran {spy.runs} times, expected {PROFILE_RUNS}"
    assert set(profile) == {op.name for op, _ in spy.graph.executor.steps}
    assert profile == pytest.approx(medians(spy.seen), rel=1e-12)
    assert sum(profile.values()) > 0


def test_opencl_profile_puts_the_heavy_operator_first():
    require_opencl()
    graph = kuiper.load(DIGITS_PARAM, backend="opencl", profiling=True,
                        input_shapes=[(BATCH, 1, 8, 8)])
    profile = ex.opencl_profile(graph, [batch()])
    heavy, light = profile[HEAVY], profile[LIGHT]
    assert heavy > 2 * light, f"{HEAVY} ({heavy:.3g} s) should take far longer than " \
        f"{LIGHT} ({light:.3g} s) on the device"
