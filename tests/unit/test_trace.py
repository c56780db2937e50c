"""`--trace out.json`: a Chrome trace (Trace Event Format) that Perfetto and chrome://tracing
open. Checked here: the JSON shape those viewers need ("X" events with ts/dur in microseconds,
pid/tid, names = operator names, args = type and shapes, a process name per backend), and that
the times are the executor's own (observer on cpu, profiling events on opencl).
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.conftest import opencl_available
from tests.unit.test_cli import assert_user_error, run_main

DIGITS = "kuiper/demo/digits.pnnx.param"
OPERATORS = {"features.0": "nn.Conv2d", "features.1": "nn.ReLU", "features.2": "nn.Conv2d",
             "features.3": "nn.ReLU", "features.4": "nn.MaxPool2d",
             "torch.flatten_0": "torch.flatten", "classifier.1": "nn.Linear",
             "classifier.2": "nn.ReLU", "classifier.3": "nn.Linear"}


def check_trace_shape(trace: dict) -> list[dict]:
    """What a trace viewer needs; returns the complete ("X") events."""
    assert set(trace) >= {"traceEvents"} and trace["displayTimeUnit"] == "ms"
    events = trace["traceEvents"]
    named = {e["pid"]: e["args"]["name"] for e in events
             if e["ph"] == "M" and e["name"] == "process_name"}
    complete = [e for e in events if e["ph"] == "X"]
    assert complete and {e["ph"] for e in events} <= {"M", "X"}
    for e in complete:
        assert set(e) >= {"name", "ph", "ts", "dur", "pid", "tid", "args"}, e
        assert isinstance(e["ts"], (int, float)) and isinstance(e["dur"], (int, float))
        assert e["ts"] >= 0 and e["dur"] >= 0 and e["pid"] in named
        assert e["args"]["type"] == OPERATORS[e["name"]]
        assert all(isinstance(s, str) for s in e["args"]["inputs"] + e["args"]["outputs"])
    return complete


def test_cpu_trace_of_run(tmp_path, capsys):
    out = tmp_path / "run.json"
    result = run_main(capsys, "run", DIGITS, "--trace", str(out))
    assert result.returncode == 0, result.stderr
    events = check_trace_shape(json.loads(out.read_text()))
    assert [e["name"] for e in events] == list(OPERATORS)  # execution order, each once
    conv = events[0]
    assert conv["args"]["inputs"] == ["1x1x8x8"] and conv["args"]["outputs"] == ["1x8x8x8"]
    # one timeline: each operator starts after the previous one ended (the CPU runs them in
    # turn), and the durations are plausible microseconds (not seconds, not nanoseconds)
    for before, after in zip(events, events[1:]):
        assert after["ts"] >= before["ts"] + before["dur"] - 1.0
    assert 0 < sum(e["dur"] for e in events) < 1e6


@pytest.mark.skipif(not opencl_available(), reason="no OpenCL device for profiling events")
def test_opencl_trace_from_profiling_events(tmp_path, capsys):
    out = tmp_path / "cl.json"
    result = run_main(capsys, "run", DIGITS, "--backend", "opencl", "--trace", str(out))
    assert result.returncode == 0, result.stderr
    events = check_trace_shape(json.loads(out.read_text()))
    assert {e["name"] for e in events} <= set(OPERATORS)
    assert "features.0" in {e["name"] for e in events}
    assert min(e["ts"] for e in events) == 0  # device times, from the first kernel's start
    assert all(" of " in e["args"]["event"] for e in events)  # which kernel of the operator


def test_bench_trace_has_a_process_per_backend(tmp_path, capsys):
    backends = "cpu,opencl" if opencl_available() else "cpu"
    out = tmp_path / "bench.json"
    result = run_main(capsys, "bench", DIGITS, "--backends", backends, "--repeat", "2",
                      "--warmup", "0", "--top", "0", "--trace", str(out))
    assert result.returncode == 0, result.stderr
    trace = json.loads(out.read_text())
    events = check_trace_shape(trace)
    names = [e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "process_name"]
    assert len(names) == len(backends.split(",")) and names[0] == "kuiper cpu"
    assert {e["pid"] for e in events} == set(range(1, len(names) + 1))


def test_trace_file_errors_come_before_the_run(tmp_path, capsys):
    assert_user_error(run_main(capsys, "run", DIGITS, "--trace", str(tmp_path / "no" / "t.json")),
                      "does not exist")
    assert_user_error(run_main(capsys, "bench", DIGITS, "--trace", str(tmp_path)), "is a folder")


def test_chrome_trace_from_spans():
    from kuiper.io.trace import Span, chrome_trace

    trace = chrome_trace([("a", [Span("conv", "nn.Conv2d", 1.5, 2.25, {"type": "nn.Conv2d"})]),
                          ("b", [])])
    x = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert x == [{"name": "conv", "cat": "nn.Conv2d", "ph": "X", "ts": 1.5, "dur": 2.25,
                  "pid": 1, "tid": 1, "args": {"type": "nn.Conv2d"}}]
    assert np.isclose(json.loads(json.dumps(trace))["traceEvents"][2]["dur"], 2.25)
