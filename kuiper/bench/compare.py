"""Per-operator agreement between backends (and PyTorch): the engine of `kuiper compare`
(kuiper/cli/compare.py) and of lessons 10 and 14.

Each backend runs the model with an observer that records every operator's outputs and time.
The first backend is the reference; for every operator we print the max absolute and relative
difference of each other backend, and mark the *first* operator whose difference exceeds the
tolerance: errors propagate, so the first one is where to look. With `--against torch`, the
graph outputs are also compared with pnnx's PyTorch module, and so are the intermediate outputs
of operators that are `nn.*` modules there (pnnx names those modules after the operators).
That module is the Python file `<stem>_pnnx.py` beside the model, and `--against torch` runs it:
only ask for it for a model folder you trust. Without it, nothing from the folder is executed.

Tolerance rules: floats within `RTOL x max(1, max |reference|)` (kuiper/testing/__init__.py), with
one exception for order. torch.topk(sorted=False) returns the k winners in an order PyTorch
does not define: its CPU kernel leaves them as std::nth_element (libstdc++'s introselect) does,
or sorted when k is small next to the dim, and its CUDA kernel otherwise again. Kuiper returns
them sorted, on both backends. So the outputs of such an operator (values and indices) are
compared as *sets*: both sides sorted along the topk dim first (`unordered_axis`). Operators
after it see the two orders and may differ for real; sort in the model if that matters.
"""


from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from kuiper.core.table import print_table
from kuiper.graph.load import load
from kuiper.graph.runtime_graph import RuntimeGraph
from kuiper.io.jsonout import emit
from kuiper.testing import RTOL, max_abs_diff, tolerance


@dataclass
class Trace:
    """Per-operator outputs and seconds of one run."""

    label: str
    outputs: dict[str, list] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    final: list = field(default_factory=list)


def trace_backend(path: str, backend: str, inputs: list[np.ndarray], device: str | None = None,
                  params=None, passes=None, precision: str = "fp32") -> tuple[Trace, RuntimeGraph]:
    options = {"device": device} if backend == "opencl" and device else {}
    # (an observed run is unfused whatever the passes: every operator's own output is seen;
    # it keeps the precision, which changes values, not which operators run)
    graph = load(path, backend=backend, params=params, passes=passes, precision=precision,
                 **options)
    # Warm-up, observed as the recorded run is: an observed run runs every operator unfused,
    # on OpenCL from kernels of its own (built and compiled on the first such run), so a
    # warm-up without an observer would leave their one-time compile in the "ms" column.
    graph.forward(*inputs, observer=lambda *_: None)
    trace = Trace(backend)

    def observe(op, outs, seconds):
        trace.outputs[op.name] = [np.asarray(o) if not np.isscalar(o) else o for o in outs]
        trace.seconds[op.name] = seconds

    trace.final = graph.forward(*inputs, observer=observe)
    return trace, graph


def trace_torch(path: str, inputs: list[np.ndarray], params=None) -> Trace:
    import torch

    from kuiper.bench.reference import load_torch_reference, run_torch_reference

    model = load_torch_reference(path, params)
    trace = Trace("torch")
    for name, module in model.named_modules():
        if not name:
            continue

        def hook(_module, _args, output, name=name):
            outs = output if isinstance(output, (tuple, list)) else (output,)
            trace.outputs[name] = [o.detach().numpy() for o in outs
                                   if isinstance(o, torch.Tensor)]

        module.register_forward_hook(hook)
    trace.final = run_torch_reference(model, inputs)
    return trace


def unordered_axis(op) -> int | None:
    """The dim along which `op`'s outputs have no defined order (topk with sorted=False)."""
    if op is None or op.type != "torch.topk" or op.param("sorted", True) is not False:
        return None
    return getattr(op.layer, "axis", None)


def as_sets(arrays: list, axis: int | None) -> list:
    """Outputs to compare: as given, or sorted along `axis` when their order is undefined."""
    if axis is None:
        return list(arrays)
    return [np.sort(np.asarray(a), axis=axis) for a in arrays]


def relative(diff: float, ref) -> float:
    scale = float(np.abs(np.asarray(ref, dtype=np.float64)).max()) if np.size(ref) else 0.0
    return diff / scale if scale > 0 else diff


def compare(path: str, backends: list[str], against: list[str], x: list[np.ndarray] | None,
            device: str | None = None, rtol: float = RTOL, params=None,
            as_json: bool = False, passes=None, precision: str = "fp32") -> int:
    """Run, print the per-operator table, return the process exit code (1 on a mismatch).

    A difference over the tolerance is marked with `!`, and the first operator that has one
    with `>>`: errors propagate, so that is where to look. `as_json`: the same facts as one
    JSON document (operators, outputs, first_bad, ok) instead of the text. `precision`: every
    backend loads the model with it (the cpu one computes fp32 anyway: against it, the
    difference is the reduced precision's error; see kuiper/DESIGN.md for its bounds)."""
    traces, graph = [], None
    for backend in backends:
        if graph is None:
            probe = load(path, backend="cpu", params=params)
            if x is None:
                rng = np.random.default_rng(0)
                x = [rng.standard_normal(p.shape).astype(p.dtype) if p.dtype.kind == "f"
                     else np.zeros(p.shape, p.dtype) for p in probe.inputs]
        trace, graph = trace_backend(path, backend, x, device, params, passes, precision)
        traces.append(trace)
    torch_trace = trace_torch(path, x, params) if "torch" in against else None

    ref = traces[0]
    others = traces[1:] + ([torch_trace] if torch_trace else [])
    header = ["operator", "type"]
    for t in others:
        header += [f"{t.label} max abs", f"{t.label} rel"]
    header += [f"{t.label} ms" for t in traces]
    rows = [header]

    first_bad = None
    records = []  # the same facts for --json
    for op in graph.order:
        if op.name not in ref.outputs:
            continue
        cells, bad = [], False
        record = {"operator": op.name, "type": op.type, "line": op.line, "diffs": {},
                  "ms": {t.label: t.seconds.get(op.name, 0) * 1e3 for t in traces}}
        for t in others:
            key = op.name if t is not torch_trace else op.name.replace(".", "_")
            theirs = t.outputs.get(key)
            mine = ref.outputs[op.name]
            if theirs is not None:  # topk(sorted=False): compared as sets (module docstring)
                axis = unordered_axis(op)
                theirs, mine = as_sets(theirs, axis), as_sets(mine, axis)
            if theirs is None or len(theirs) != len(mine) or any(
                    np.shape(a) != np.shape(b) for a, b in zip(theirs, mine)):
                cells += ["-", "-"]
                continue
            diff = max(max_abs_diff(a, b) for a, b in zip(theirs, mine))
            rel = max(relative(max_abs_diff(a, b), b) for a, b in zip(theirs, mine))
            over = any(max_abs_diff(a, b) > tolerance(b, rtol) for a, b in zip(theirs, mine))
            bad |= over
            cells += [f"{diff:.2e}" + ("!" if over else ""), f"{rel:.2e}"]
            record["diffs"][t.label] = {"max_abs": diff, "rel": rel, "over": bool(over)}
        times = [f"{t.seconds.get(op.name, 0) * 1e3:.3f}" for t in traces]
        name = op.name
        if bad and first_bad is None:
            first_bad = op
            name = f">> {op.name}"
        rows.append([name, op.type, *cells, *times])
        records.append(record)
    say = print if not as_json else (lambda *_a, **_k: None)  # --json: the document only
    say(f"{path}: differences against {ref.label} (tolerance {rtol:g} x max(1, |ref|max); "
        "! = over it); ms: each operator run on its own, after a warm-up run (one-time "
        "kernel compiles excluded)")
    if not as_json:
        print_table(rows, right=range(2, len(header)))

    failed = False
    finals = []
    for t in others:
        for i, (a, b) in enumerate(zip(t.final, ref.final)):
            operand = graph.output_operands[i] if i < len(graph.output_operands) else None
            a, b = as_sets([a, b], unordered_axis(operand.producer if operand else None))
            diff, tol = max_abs_diff(a, b), tolerance(b, rtol)
            ok = diff <= tol
            failed |= not ok
            finals.append({"output": i, "against": t.label, "max_abs": diff, "tolerance": tol,
                           "ok": bool(ok)})
            say(f"output {i}: {t.label} vs {ref.label}: max abs {diff:.3e} "
                f"(tolerance {tol:.1e}) {'ok' if ok else 'MISMATCH'}")
    if first_bad is not None:
        say(f"first operator over tolerance: {first_bad.name} ({first_bad.type}, "
            f"line {first_bad.line})")
    if as_json:
        emit({"model": path, "reference": ref.label, "rtol": rtol,
              "compared": [t.label for t in others], "operators": records, "outputs": finals,
              "first_bad": None if first_bad is None else {
                  "operator": first_bad.name, "type": first_bad.type, "line": first_bad.line},
              "ok": not failed})
    return 1 if failed else 0
