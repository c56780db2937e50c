"""Per-operator timelines as a Chrome trace (`kuiper run/bench --trace out.json`).

The Trace Event Format is what chrome://tracing and https://ui.perfetto.dev open: a JSON object
whose "traceEvents" list holds, per operator, one complete event

    {"name": "conv1", "ph": "X", "ts": 12.0, "dur": 85.5, "pid": 1, "tid": 1,
     "cat": "nn.Conv2d", "args": {"type": "nn.Conv2d", "inputs": ["1x3x8x8"], ...}}

with `ts` (start) and `dur` in microseconds. One process (pid) per timed backend, named by a
"process_name" metadata event, so two backends sit one above the other in the viewer.

Where the times come from:
- cpu: the executor's observer hook; it is called when an operator finishes, with its duration,
  so the start is the call time minus that duration (host wall clock, Python overhead
  included; every operator runs on its own, unfused);
- opencl: the profiling events of a queue made with `profiling=True`: `event.profile.start` and
  `.end` are device timestamps in ns, one event per kernel (or copy), grouped per operator by
  `executor.operator_events()`. Host work between kernels does not show; gaps are idle device.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from kuiper.core.errors import KuiperError
from kuiper.io.files import require_writable


@dataclass
class Span:
    """One timed piece of work: an operator's forward (cpu) or one of its kernels (opencl)."""

    name: str
    op_type: str
    start_us: float
    dur_us: float
    args: dict = field(default_factory=dict)


def shapes_of(graph, operands) -> list[str]:
    out = []
    for operand in operands:
        spec = graph.specs.get(operand.name)
        shape = spec.shape if spec is not None else (operand.shape or ())
        out.append("x".join("?" if d is None else str(d) for d in shape) or "scalar")
    return out


def op_args(graph, op) -> dict:
    return {"type": op.type, "inputs": shapes_of(graph, op.inputs),
            "outputs": shapes_of(graph, op.outputs), "line": op.line}


def cpu_spans(graph, inputs) -> list[Span]:
    """One run of a CPU graph, timed per operator through the observer."""
    spans: list[Span] = []
    origin = time.perf_counter()

    def observe(op, _outputs, seconds):
        end = time.perf_counter() - origin
        spans.append(Span(op.name, op.type, (end - seconds) * 1e6, seconds * 1e6,
                          op_args(graph, op)))

    graph.forward(*inputs, observer=observe)
    return spans


def opencl_spans(graph) -> list[Span]:
    """The last run of an OpenCL graph (loaded with profiling=True), from its events."""
    timed = []
    for op, events in graph.executor.operator_events():
        for k, event in enumerate(events):
            try:
                start, end = event.profile.start, event.profile.end
            except Exception as e:  # pyopencl raises its own error on a queue w/o profiling
                raise KuiperError("the OpenCL queue has no profiling: load the model with "
                                  f"profiling=True for a trace ({type(e).__name__})") from None
            timed.append((op, k, len(events), start, end))
    if not timed:
        return []
    origin = min(t[3] for t in timed)
    spans = []
    for op, k, count, start, end in timed:
        args = op_args(graph, op) | {"event": f"{k + 1} of {count}"}
        spans.append(Span(op.name, op.type, (start - origin) / 1e3, (end - start) / 1e3, args))
    return spans


def spans_of(graph, inputs) -> list[Span]:
    """Run `graph` once on `inputs` and time each operator, whichever its backend."""
    if graph.backend == "opencl":
        graph.forward(*inputs)
        return opencl_spans(graph)
    return cpu_spans(graph, inputs)


def chrome_trace(processes: list[tuple[str, list[Span]]]) -> dict:
    """{"traceEvents": [...]}: a process per (label, spans), a complete event per span."""
    events: list[dict] = []
    for pid, (label, spans) in enumerate(processes, start=1):
        events.append({"name": "process_name", "ph": "M", "pid": pid, "tid": 1,
                       "args": {"name": label}})
        events.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": 1,
                       "args": {"name": "operators"}})
        for s in spans:
            events.append({"name": s.name, "cat": s.op_type, "ph": "X",
                           "ts": round(s.start_us, 3), "dur": round(max(s.dur_us, 0.0), 3),
                           "pid": pid, "tid": 1, "args": s.args})
    return {"traceEvents": events, "displayTimeUnit": "ms",
            "otherData": {"producer": "kuiper", "units": "ts and dur in microseconds"}}


def check_writable(path: str | os.PathLike, option: str = "--trace") -> None:
    """Fail before the model runs if `path` cannot be written."""
    require_writable(path, option, "trace.json")


def write_trace(path: str | os.PathLike, processes: list[tuple[str, list[Span]]]) -> int:
    """Write the trace; returns the number of operator events."""
    trace = chrome_trace(processes)
    try:
        Path(path).write_text(json.dumps(trace, indent=1))
    except OSError as e:
        raise KuiperError(f"--trace {path}: cannot be written ({e.strerror or e})") from None
    return sum(e["ph"] == "X" for e in trace["traceEvents"])
