"""The engine of `kuiper tune`: time every kernel candidate of each convolution, transposed
convolution and linear layer on the device (the command is kuiper/cli/tune.py).

For each distinct problem of the model (a convolution's ConvProblem, the GEMM shape of a linear
layer or of a transposed convolution), every algorithm that can run it
(layers/opencl_conv/selector.py) is bound with each of its parameter sets, on a fresh copy of
the layer with its own buffers, the way the executor binds layers (`bind_layer`, with the
model's fused epilogue), and timed: one warm-up run (the kernels are compiled at bind time,
before it), then `runs` timed runs, each measured on the device from OpenCL profiling events
(first kernel's start to last kernel's end), so host overheads do not count; the median decides.

A transposed convolution is timed as its layer runs, GEMM and col2im (the same col2im for every
candidate); its GFLOP/s count the GEMM's FLOPs.
"""

from __future__ import annotations

import logging
import statistics
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kuiper.core.errors import KuiperError
from kuiper.opencl.execution.epilogue_step import epilogue_operand
from kuiper.opencl.execution.executor import bind_layer, computes_nothing, precision_decision

log = logging.getLogger("kuiper.tune")


@dataclass
class Candidate:
    algorithm: str
    params: dict
    seconds: float | None = None      # median device time; None: it failed
    error: str = ""


@dataclass
class Problem:
    """One distinct shape to tune, and the layers of the model that have it."""

    kind: str                         # "conv" or "gemm"
    key: str                          # the tuning cache's key
    op: Any                           # the first operator with this shape
    flops: float
    shape: Any = None                 # the ConvProblem, or the GEMM's (M, N, K, Z, ta, tb)
    precision: str = "fp32"           # the plan's for these layers (kuiper.load(precision=))
    layers: list[str] = field(default_factory=list)
    candidates: list[Candidate] = field(default_factory=list)
    model_choice: tuple[str, dict] | None = None   # the cost model's (algorithm, params)
    partial: bool = False             # stopped before every candidate was timed

    @property
    def best(self) -> Candidate | None:
        timed = [c for c in self.candidates if c.seconds is not None]
        return min(timed, key=lambda c: c.seconds) if timed else None

    def time_of(self, choice: tuple[str, dict] | None) -> float | None:
        for c in self.candidates:
            if choice is not None and (c.algorithm, c.params) == choice:
                return c.seconds
        return None


def tune_graph(graph, runs: int = 5, on_tuned=None, skip=None, budget: float | None = None,
               on_candidate=None) -> list[Problem]:
    """Time every candidate of every distinct convolution and GEMM problem of an OpenCL `graph`.

    `on_tuned(problem)` is called after each problem, and for the problem being timed when the
    tune stops early (`problem.partial`: a winner among the candidates timed so far), so that
    a stopped tune keeps everything it measured. Problems whose key `skip(key)` accepts are
    left out. `budget`: seconds after which no new candidate starts (the problems not reached
    are returned untimed). `on_candidate(done, total)` reports progress, one call per
    candidate timed."""
    from kuiper.opencl.device.runtime import OpenCLRuntime

    deadline = None if budget is None else time.monotonic() + budget
    runtime = graph.executor.runtime
    profiled = OpenCLRuntime.shared(_device_spec(runtime), profiling=True)
    problems = collect_problems(graph)
    if skip is not None:
        done = [p for p in problems if skip(p.key)]
        if done:
            log.info("%d of %d problems are in the tuning cache already: skipped (--fresh times "
                     "them again)", len(done), len(problems))
        problems = [p for p in problems if p not in done]
    for problem in problems:  # all first: the progress bar knows its total
        problem.candidates = candidate_list(problem, profiled.device)
    total, timed = sum(len(p.candidates) for p in problems), 0
    flush = cache_flush(profiled)   # one scratch buffer for the whole tune
    for i, problem in enumerate(problems, 1):
        log.info("tuning %d/%d: %s %s (%s), %d candidates", i, len(problems), problem.kind,
                 problem.layers[0], problem.key, len(problem.candidates))
        try:
            for candidate in problem.candidates:
                if deadline is not None and time.monotonic() > deadline:
                    problem.partial = True
                    break
                _time_one(graph, problem, candidate, profiled, runs, flush)
                timed += 1
                if on_candidate is not None:
                    on_candidate(timed, total)
        except KeyboardInterrupt:  # Ctrl-C: keep what this problem measured, then stop
            problem.partial = True
            if on_tuned is not None and problem.best is not None:
                on_tuned(problem)
            raise
        best = problem.best
        if best is not None:
            log.info("  best: %s %s, %.3f ms%s", best.algorithm, params_text(best.params),
                     best.seconds * 1e3, " (budget spent: of the candidates timed)"
                     if problem.partial else "")
        if on_tuned is not None:
            on_tuned(problem)
        if problem.partial:
            log.info("the time budget of %g s is spent after %d of %d candidates; run the "
                     "tune again to go on where it stopped", budget, timed, total)
            break
    return problems


def _time_one(graph, problem: Problem, candidate: Candidate, runtime, runs: int,
              flush) -> None:
    """Time one candidate into `candidate.seconds`; a failing one keeps its error instead."""
    try:
        candidate.seconds = time_candidate(graph, problem, candidate, runtime, runs, flush)
    except Exception as e:  # noqa: BLE001 - a failing candidate is reported, not fatal
        candidate.error = f"{type(e).__name__}: {e}".splitlines()[0][:200]
        log.warning("%s: %s %s failed: %s", problem.layers[0], candidate.algorithm,
                    params_text(candidate.params), candidate.error)


def _device_spec(runtime) -> str:
    """A device spec that finds the graph's device again ('P:D')."""
    from kuiper.opencl.device.runtime import list_devices

    for index, _label, device in list_devices():
        if device == runtime.device:
            return index
    return runtime.device.name


def collect_problems(graph) -> list[Problem]:
    """The distinct convolution and GEMM problems of the graph, in model order. A GEMM's shape
    is (M, N, K, Z, trans_a, trans_b): ranked_gemm_params' and tuning_cache.gemm_key's arguments."""
    from kuiper.layers.opencl.conv2d import ConvBind
    from kuiper.layers.opencl.conv_transpose2d import ConvTransposeBind
    from kuiper.layers.opencl.linear import Linear
    from kuiper.opencl.device import tuning_cache

    found: dict[str, Problem] = {}
    for op in graph.order:
        layer = op.layer
        if not graph.plan.runs(op):
            # a Linear absorbed by a fusion (fuse_attention takes BERT's Q/K/V projections)
            # is never bound: the fused operator computes it, with its own kernels
            continue
        if not isinstance(layer, (ConvBind, Linear, ConvTransposeBind)):
            # (the operators the graph handles itself have no layer, and a
            # prim::TupleConstruct's output, a tuple, has no spec: YOLO's heads)
            continue
        in_specs = [graph.specs[o.name] for o in op.inputs]
        out_specs = [graph.specs[o.name] for o in op.outputs]
        if computes_nothing(out_specs, ()):   # a batch of 0: never bound, nothing to time
            continue
        precision = graph.plan.precision_of(op)
        if isinstance(layer, ConvBind):
            if getattr(layer, "host_fallback", None) is not None:
                continue
            shape = layer.problem(in_specs, precision)
            key, kind, flops = tuning_cache.conv_key(shape), "conv", 2.0 * shape.macs
        else:
            if isinstance(layer, Linear):   # x @ W^T, W stored as the layer chose
                shape = layer.gemm_problem(in_specs, out_specs)
            else:                           # W^T @ x into the column buffer
                shape = (*layer.gemm_shape(in_specs), True, False)
            if not all(shape[:4]):
                continue
            key, kind = tuning_cache.gemm_key(*shape, precision), "gemm"
            flops = 2.0 * float(np.prod(shape[:4]))
        if key not in found:
            found[key] = Problem(kind, key, op, flops, shape, precision)
        found[key].layers.append(op.name)
    return list(found.values())


def candidate_list(problem: Problem, device) -> list[Candidate]:
    """Every (algorithm, params) that can run the problem; remembers the cost model's pick."""
    from kuiper.layers.opencl_conv import selector
    from kuiper.layers.opencl_gemm.cost import ranked_gemm_params

    if problem.kind == "gemm":
        # split-K sets only for layers that bind them (a linear layer, not a transposed conv),
        # tensor-core sets for the plan's precision (as the layer's select_gemm offers them)
        sets = ranked_gemm_params(device, *problem.shape, precision=problem.precision,
                                  split=getattr(problem.op.layer, "splits_k", False))
        problem.model_choice = ("gemm", sets[0])
        return [Candidate("gemm", p) for p in sets]
    conv = problem.shape
    ranked = selector.by_cost(conv, device)
    if ranked:
        algo = ranked[0][1]
        problem.model_choice = (algo.name, algo.parameter_sets(conv, device)[0])
    return [Candidate(algo.name, params) for _cost, algo in ranked
            for params in algo.parameter_sets(conv, device)]


def time_candidate(graph, problem: Problem, candidate: Candidate, runtime, runs: int,
                   flush=None) -> float:
    """Median device seconds of one candidate, on a fresh layer with its own buffers, storing
    through the fused epilogue the model gives the layer (a SiLU in the store can cost more
    than the convolution on a CPU device). `flush` (cache_flush's function, or None) runs
    before each timed run."""
    from kuiper.layers.opencl_gemm.selection import pinned
    op = problem.op
    in_specs = [graph.specs[o.name] for o in op.inputs]
    out_specs = [graph.specs[o.name] for o in op.outputs]
    layer = type(op.layer).from_operator(op)
    layer.infer(in_specs)
    layer.attach(runtime)
    rng = np.random.default_rng(0)
    inputs = [runtime.to_device(np.asarray(s.value, np.float32) if s.known else
                                rng.standard_normal(s.shape).astype(np.float32))
              for s in in_specs]
    outputs = [runtime.empty(s.shape, s.dtype) for s in out_specs]
    epilogue = graph.plan.epilogues.get(op.name)
    residual = None
    if epilogue is not None and epilogue.residual is not None:
        residual = runtime.to_device(rng.standard_normal(out_specs[0].shape).astype(np.float32))
    epilogue, residual = epilogue_operand(epilogue, residual, runtime)  # or its numbers
    with pinned(candidate.algorithm, candidate.params):
        workspaces = layer.own_workspaces(in_specs, out_specs,
                                          **precision_decision(layer, problem.precision))
        bind_layer(op, layer, runtime, inputs, outputs, in_specs, out_specs, epilogue,
                   residual, workspaces, graph.specs, problem.precision)
    if getattr(layer, "algorithm", candidate.algorithm) != candidate.algorithm:
        raise KuiperError(f"bound {layer.algorithm}, not {candidate.algorithm}")
    queue = runtime.queue
    layer.enqueue(queue, [])          # warm-up
    queue.finish()
    times = []
    for _ in range(runs):
        if flush is not None:
            flush()
        layer.enqueue(queue, [])
        queue.finish()
        events = layer.events
        times.append((events[-1].profile.end - events[0].profile.start) * 1e-9)
    return statistics.median(times)


# Bytes a CPU device's caches forget between two timed runs (see cache_flush).
FLUSH_BYTES = 64 << 20


def cache_flush(runtime):
    """On a CPU device, a function that writes FLUSH_BYTES of scratch memory (and waits), or
    None elsewhere. Inside a model, the other layers' weights and activations pass through the
    caches between two runs of a layer, so its weights come from memory; timed back to back, a
    layer finds them in the cache. On the 2-core machine that made ResNet-18's stage-4
    Winograd look 1.8x faster than it runs in the model, and ranked the algorithms wrongly. A
    GPU's caches are small next to its memory bandwidth: no flush there."""
    from kuiper.opencl.device.runtime import is_cpu

    if not is_cpu(runtime.device):
        return None
    scratch = runtime.empty((FLUSH_BYTES // 4,), np.float32)
    cl, queue = runtime.cl, runtime.queue

    def flush():
        cl.enqueue_fill_buffer(queue, scratch.data, np.float32(0), 0, FLUSH_BYTES)
        queue.finish()

    return flush


def params_text(params: dict) -> str:
    from kuiper.layers.opencl_gemm.parameter_sets import describe_params

    return describe_params(params)


