"""`kuiper compare`: where, and by how much, do backends (and PyTorch) disagree?

Each backend runs the model with an observer that records every operator's outputs and time.
The first backend is the reference; for every operator we print the max absolute and relative
difference of each other backend, and mark the *first* operator whose difference exceeds the
tolerance: errors propagate, so the first one is where to look. With `--against torch`, the
graph outputs are also compared with pnnx's PyTorch module, and so are the intermediate outputs
of operators that are `nn.*` modules there (pnnx names those modules after the operators).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field

import numpy as np

import kuiper
from kuiper.table import print_table
from kuiper.tools.options import add_plugin_option, load_plugins
from kuiper.tools.testing import RTOL, max_abs_diff, tolerance


@dataclass
class Trace:
    """Per-operator outputs and seconds of one run."""

    label: str
    outputs: dict[str, list] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    final: list = field(default_factory=list)


def trace_backend(path: str, backend: str, inputs: list[np.ndarray], device: str | None = None,
                  params=None) -> tuple[Trace, kuiper.RuntimeGraph]:
    options = {"device": device} if backend == "opencl" and device else {}
    graph = kuiper.load(path, backend=backend, params=params, **options)
    graph.forward(*inputs)  # warm-up: compiles kernels, so the recorded times are fair
    trace = Trace(backend)

    def observe(op, outs, seconds):
        trace.outputs[op.name] = [np.asarray(o) if not np.isscalar(o) else o for o in outs]
        trace.seconds[op.name] = seconds

    trace.final = graph.forward(*inputs, observer=observe)
    return trace, graph


def trace_torch(path: str, inputs: list[np.ndarray], params=None) -> Trace:
    import torch

    from kuiper.tools.reference import load_torch_reference, run_torch_reference

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


def relative(diff: float, ref) -> float:
    scale = float(np.abs(np.asarray(ref, dtype=np.float64)).max()) if np.size(ref) else 0.0
    return diff / scale if scale > 0 else diff


def compare(path: str, backends: list[str], against: list[str], x: list[np.ndarray] | None,
            device: str | None = None, rtol: float = RTOL, params=None) -> int:
    """Run, print the per-operator table, return the process exit code (1 on a mismatch).

    A difference over the tolerance is marked with `!`, and the first operator that has one
    with `>>`: errors propagate, so that is where to look."""
    traces, graph = [], None
    for backend in backends:
        if graph is None:
            probe = kuiper.load(path, backend="cpu", params=params)
            if x is None:
                rng = np.random.default_rng(0)
                x = [rng.standard_normal(p.shape).astype(p.dtype) if p.dtype.kind == "f"
                     else np.zeros(p.shape, p.dtype) for p in probe.inputs]
        trace, graph = trace_backend(path, backend, x, device, params)
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
    for op in graph.order:
        if op.name not in ref.outputs:
            continue
        cells, bad = [], False
        for t in others:
            key = op.name if t is not torch_trace else op.name.replace(".", "_")
            theirs = t.outputs.get(key)
            mine = ref.outputs[op.name]
            if theirs is None or len(theirs) != len(mine) or any(
                    np.shape(a) != np.shape(b) for a, b in zip(theirs, mine)):
                cells += ["-", "-"]
                continue
            diff = max(max_abs_diff(a, b) for a, b in zip(theirs, mine))
            rel = max(relative(max_abs_diff(a, b), b) for a, b in zip(theirs, mine))
            over = any(max_abs_diff(a, b) > tolerance(b, rtol) for a, b in zip(theirs, mine))
            bad |= over
            cells += [f"{diff:.2e}" + ("!" if over else ""), f"{rel:.2e}"]
        times = [f"{t.seconds.get(op.name, 0) * 1e3:.3f}" for t in traces]
        name = op.name
        if bad and first_bad is None:
            first_bad = op
            name = f">> {op.name}"
        rows.append([name, op.type, *cells, *times])
    print(f"{path}: differences against {ref.label} (tolerance {rtol:g} x max(1, |ref|max); "
          "! = over it)")
    print_table(rows, right=range(2, len(header)))

    failed = False
    for t in others:
        for i, (a, b) in enumerate(zip(t.final, ref.final)):
            diff, tol = max_abs_diff(a, b), tolerance(b, rtol)
            ok = diff <= tol
            failed |= not ok
            print(f"output {i}: {t.label} vs {ref.label}: max abs {diff:.3e} "
                          f"(tolerance {tol:.1e}) {'ok' if ok else 'MISMATCH'}")
    if first_bad is not None:
        print(f"first operator over tolerance: {first_bad.name} ({first_bad.type}, "
                      f"line {first_bad.line})")
    return 1 if failed else 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("compare", help="per-operator differences between backends and PyTorch",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", help="path of the .pnnx.param")
    p.add_argument("--input", action="append", help=".npy input (repeat for several inputs); "
                   "default: seeded random inputs of the model's input shapes")
    p.add_argument("--backends", default="cpu,opencl", help="comma list; the first is the "
                   "reference (default cpu,opencl)")
    p.add_argument("--against", default="", help="'torch' to also compare with pnnx's PyTorch "
                   "module (<stem>_pnnx.py beside the model)")
    p.add_argument("--device", help="OpenCL device (as PYOPENCL_CTX, or part of its name)")
    p.add_argument("--rtol", type=float, default=RTOL,
                   help="tolerance factor (default %(default)g)")
    add_plugin_option(p)
    p.set_defaults(func=run_command)


def run_command(args: argparse.Namespace) -> int:
    params = load_plugins(args)
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    against = [a.strip() for a in args.against.split(",") if a.strip()]
    unknown = [a for a in against if a != "torch"]
    if unknown:
        raise kuiper.KuiperError(f"--against: unknown reference {', '.join(unknown)} "
                                 "(supported: torch)")
    x = [np.load(p) for p in args.input] if args.input else None
    return compare(args.model, backends, against, x, args.device, args.rtol, params)
