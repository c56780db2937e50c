"""The columns of a benchmark: Kuiper on each backend (with its per-operator profile), and the
references, PyTorch (CPU or CUDA) and onnxruntime, each a `Column` with one inference to time."""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import statistics
from pathlib import Path
from typing import Any

import numpy as np

from kuiper.bench.timing import PROFILE_RUNS, Column, threads_label
from kuiper.core.errors import KuiperError
from kuiper.io.trace import spans_of

log = logging.getLogger("kuiper.bench")


def precision_label(args: dict) -> str:
    """' tf32' / ' fp16' after a Kuiper column's backend, nothing for fp32."""
    precision = args.get("precision", "fp32")
    return f" {precision}" if precision != "fp32" else ""


def bench_kuiper(path: str, backend: str, inputs: list[np.ndarray], args: dict) -> Column:
    from kuiper.graph.load import load

    # The timed runs use a plain queue: a profiling one stamps every kernel, which costs
    # several microseconds per launch on some drivers (NVIDIA's), as much as a small kernel.
    # The per-operator profile and the trace load a second graph on a profiling queue.
    options: dict = {}
    if backend == "opencl" and args["device"]:
        options["device"] = args["device"]
    if args.get("memory"):
        options["memory"] = args["memory"]
    runtime = None
    if backend == "opencl":  # the runtime the graph will share: its counter from here on
        from kuiper.opencl.device.runtime import OpenCLRuntime

        runtime = OpenCLRuntime.shared(args["device"], False, False)
        before = runtime.reset_peak()

    def load_graph(**extra):
        return load(path, backend=backend, input_shapes=[x.shape for x in inputs],
                    params=args["params"], passes=args.get("passes"),
                    precision=args.get("precision", "fp32"), **options, **extra)

    graph = load_graph()
    label = f"kuiper {backend}" + precision_label(args)
    if backend == "opencl":
        label += f" ({graph.executor.runtime.device.name.strip()})"
    column = Column(label)
    if graph.fallbacks:
        column.note = f"{len(graph.fallbacks)} operator(s) fall back to the CPU"
    column.outputs = graph.forward(*inputs)
    column.run = lambda: graph.forward(*inputs)
    column.memory = peak_memory(graph, runtime.peak_bytes - before if runtime else None)
    # on OpenCL, a second graph on a profiling queue, made once when the profile or the trace
    # asks for it
    profiled_graph = (functools.cache(lambda: load_graph(profiling=True)) if backend == "opencl"
                      else lambda: graph)
    if args["top"] > 0 or args["plot"]:
        if backend == "opencl":   # one set of profiled runs for the profile and the gaps
            runs = functools.cache(lambda: profiled_runs(profiled_graph(), inputs))
            column.profiler = lambda: operator_medians(runs())
            column.gap_profiler = lambda: launch_gaps(runs())
        else:
            column.profiler = lambda: cpu_profile(graph, inputs)
    column.tracer = lambda: spans_of(profiled_graph(), inputs)
    return column


def bench_kuiper_device(path: str, inputs: list[np.ndarray], args: dict) -> Column:
    """Kuiper on OpenCL with its inputs and outputs on the device (pyopencl arrays in and
    out, `device_outputs=True`): what a pipeline of models on a GPU pays, and the like for
    like of PyTorch with tensors on the GPU. Each run waits for the device at its end."""
    from kuiper.graph.load import load

    options = {"device": args["device"]} if args["device"] else {}
    if args.get("memory"):
        options["memory"] = args["memory"]
    graph = load(path, backend="opencl", input_shapes=[x.shape for x in inputs],
                 params=args["params"], passes=args.get("passes"),
                 precision=args.get("precision", "fp32"), **options)
    runtime = graph.executor.runtime
    on_device = [runtime.to_device(x) for x in inputs]
    column = Column(f"kuiper opencl{precision_label(args)}, device I/O "
                    f"({runtime.device.name.strip()})")
    column.outputs = [y.get() for y in graph.forward(*on_device, device_outputs=True)]

    def run():
        graph.forward(*on_device, device_outputs=True)
        runtime.queue.finish()

    column.run = run
    return column


def peak_memory(graph, device_peak: int | None) -> str:
    """What `kuiper bench` says of memory. OpenCL: the runtime's counter of device buffers
    held at once (weights, activations, workspaces) during the build and a first run. CPU:
    the planned arena of the layers that write into it (kuiper/cpu/arena.py), not measured:
    NumPy's other temporaries come and go per forward."""
    from kuiper.memory.plan_memory import short_bytes
    from kuiper.memory.report import strategy_in_use

    strategy = strategy_in_use(graph.executor) or "naive"
    if device_peak is not None:
        return (f"peak device memory {short_bytes(device_peak)} (runtime counter; memory "
                f"plan: {strategy})")
    arena = getattr(graph.executor, "arena", None)
    held = short_bytes(arena.nbytes) if arena is not None else "none"
    return f"activation arena {held} (planned, {strategy}; other NumPy arrays not counted)"


def cpu_profile(graph, inputs: list[np.ndarray]) -> dict[str, float]:
    """Median wall time of each layer's forward() over a few runs (the observer hook).

    Under an observer every operator runs on its own, unfused (kuiper/cpu/executor.py): a fused
    ReLU shows up with its own (small) time here, while the timed runs above had none.
    """
    samples: dict[str, list[float]] = {}

    def observe(op, outputs, seconds):
        samples.setdefault(op.name, []).append(seconds)

    for _ in range(PROFILE_RUNS):
        graph.forward(*inputs, observer=observe)
    return {name: statistics.median(s) for name, s in samples.items()}


def opencl_profile(graph, inputs: list[np.ndarray]) -> dict[str, float]:
    """Median device time of each operator's kernels, from the profiling events of a few runs."""
    return operator_medians(profiled_runs(graph, inputs))


def profiled_runs(graph, inputs: list[np.ndarray]) -> list[list[tuple[Any, list]]]:
    """PROFILE_RUNS inferences on a profiling queue: each run's (operator, events) pairs."""
    runs = []
    for _ in range(PROFILE_RUNS):
        graph.forward(*inputs)
        runs.append(graph.executor.operator_events())
    return runs


def operator_medians(runs: list[list[tuple[Any, list]]]) -> dict[str, float]:
    """Each operator's median seconds of kernel time over `profiled_runs`' runs."""
    samples: dict[str, list[float]] = {}
    for run in runs:
        for op, events in run:
            ns = sum(e.profile.end - e.profile.start for e in events)
            samples.setdefault(op.name, []).append(ns * 1e-9)
    return {name: statistics.median(s) for name, s in samples.items()}


def launch_gaps(runs: list[list[tuple[Any, list]]]) -> dict[str, float]:
    """How busy the device is during one inference, from `profiled_runs`' events (medians
    over the runs): kernel launches, the time the kernels run ("busy"), the time from the
    first kernel's start to the last one's end ("span"), and the gaps between consecutive
    kernels: time the device runs no kernel of the inference (waiting for the next launch, or
    copying), which many small kernels pay more of than a few big ones. Copies are not counted
    as kernel time."""
    import pyopencl as cl

    measured = []
    for run in runs:
        spans = sorted((e.profile.start, e.profile.end) for _, events in run
                       for e in events if e.command_type == cl.command_type.NDRANGE_KERNEL)
        if not spans:
            return {}
        gaps = [max(0, b[0] - a[1]) for a, b in zip(spans, spans[1:])] or [0]
        measured.append((len(spans), sum(end - start for start, end in spans),
                         max(end for _, end in spans) - spans[0][0], statistics.median(gaps)))
    launches, busy, span, gap = (statistics.median(r[i] for r in measured) for i in range(4))
    return {"launches": launches, "busy_ms": busy * 1e-6, "span_ms": span * 1e-6,
            "median_gap_us": gap * 1e-3}


def bench_torch(path: str, inputs: list[np.ndarray], args: dict) -> Column:
    import torch

    from kuiper.bench.reference import load_torch_reference, run_torch_reference

    torch.set_num_threads(args["threads"])
    model = load_torch_reference(path, args["params"])
    column = Column(f"torch {torch.__version__} ({threads_label(args['threads'])})")
    column.outputs = run_torch_reference(model, inputs)
    tensors = [torch.from_numpy(x) for x in inputs]

    def run():
        with torch.inference_mode():
            model(*tensors)

    column.run = run
    return column


def bench_torch_cuda(path: str, inputs: list[np.ndarray], args: dict,
                     tf32: bool | None = None, resident: bool = False, compiled: bool = False,
                     half: bool = False) -> Column:
    """PyTorch on the GPU; `tf32=False` forces true fp32, None keeps PyTorch's defaults, True
    allows TF32 tensor cores everywhere; `half`: the model and its inputs in float16.

    By default each timed run is what Kuiper's host-to-host run is: from the host arrays in to
    the host arrays out (the inputs copied to the GPU, the outputs back, which also waits for
    the GPU): for YOLOv5s at 640 the copies are several milliseconds, more than the kernels.
    `resident`: the inputs are on the GPU before the run and the outputs stay there (the run
    ends by waiting for the GPU), which is what a PyTorch user keeping tensors on the GPU
    pays; `compiled`: torch.compile(mode="reduce-overhead"), CUDA graphs included, the
    strongest PyTorch there is (its compile happens before timing)."""
    import torch

    from kuiper.bench.reference import load_torch_reference

    if not torch.cuda.is_available():
        raise KuiperError("PyTorch sees no CUDA device")
    if tf32 is not None:
        torch.backends.cuda.matmul.allow_tf32 = tf32
        torch.backends.cudnn.allow_tf32 = tf32
    mode = {False: "fp32, TF32 off", None: "defaults", True: "TF32"}[tf32]
    mode = "fp16" if half else mode
    model = load_torch_reference(path, args["params"]).cuda().eval()
    if half:
        model = model.half()
    if compiled:
        model = torch.compile(model, mode="reduce-overhead")
    how = ("torch.compile, " if compiled else "") + ("tensors on the GPU" if resident
                                                       else "host arrays")
    column = Column(f"torch {torch.__version__} cuda ({mode}; {how})")

    def device_inputs():
        return [torch.from_numpy(x).cuda().half() if half and x.dtype == np.float32
                else torch.from_numpy(x).cuda() for x in inputs]

    resident_inputs = device_inputs()
    with torch.inference_mode():
        out = model(*resident_inputs)
    outs = out if isinstance(out, (tuple, list)) else (out,)
    column.outputs = [o.float().cpu().numpy() for o in outs if isinstance(o, torch.Tensor)]

    def run():
        with torch.inference_mode():
            out = model(*(resident_inputs if resident else device_inputs()))
            if not resident:
                for o in out if isinstance(out, (tuple, list)) else (out,):
                    if isinstance(o, torch.Tensor):
                        o.cpu()
        torch.cuda.synchronize()

    column.run = run
    return column


def plain_onnx_path(param_path: str) -> Path:
    """`model.onnx` beside `model.pnnx.param`: there when the model came through ONNX.

    (pnnx's own `model.pnnx.onnx` is pnnx's graph in an ONNX container, with pnnx operator
    types and no opset: onnxruntime cannot run it.)
    """
    p = Path(param_path)
    stem = p.name.split(".pnnx.")[0] if ".pnnx." in p.name else p.stem
    return p.with_name(stem + ".onnx")


@contextlib.contextmanager
def silenced():
    """Nothing written to stdout or stderr gets through, Python's or native code's: the file
    descriptors 1 and 2 point at a temporary file meanwhile. torch's ONNX exporters print a
    whole TorchScript graph (35 lines for a transformer block) from C++ when they fail, and
    progress lines when they work; `kuiper bench` says in one line what happened instead."""
    import sys
    import tempfile

    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    try:
        with tempfile.TemporaryFile() as sink, contextlib.redirect_stdout(None):
            os.dup2(sink.fileno(), 1)
            os.dup2(sink.fileno(), 2)
            yield
    finally:
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in saved:
            os.close(fd)


def first_line(error: Exception, limit: int = 200) -> str:
    """`Type: the first line of the message`, at most `limit` characters. A first line that
    only announces the cause ("backend='inductor' raised:", torch.compile's wrapper) is
    followed by the next one, the cause itself."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    message = " ".join(lines[:2]) if len(lines) > 1 and lines[0].endswith(":") else \
        (lines[0] if lines else "")
    text = f"{type(error).__name__}: {message}"
    return text if len(text) <= limit else text[:limit - 3] + "..."


def export_onnx(param_path: str, inputs: list[np.ndarray], folder: str, params=None) -> Path:
    """No plain .onnx beside the model: export one from pnnx's PyTorch module (needs torch).

    The TorchScript exporter first (a second or two); where it cannot (nn.MultiheadAttention's
    fused kernel has no ONNX form there), PyTorch's default one (dynamo: slower, but it
    decomposes such operators). A KuiperError of one line when neither can."""
    import warnings

    import torch

    from kuiper.bench.reference import load_torch_reference

    model = load_torch_reference(param_path, params)
    path = Path(folder) / "model.onnx"
    example = tuple(torch.from_numpy(x) for x in inputs)
    failures = []
    for dynamo in (False, True):
        try:
            with torch.no_grad(), warnings.catch_warnings(), silenced():
                warnings.simplefilter("ignore")  # the TorchScript exporter's deprecation notices
                torch.onnx.export(model, example, str(path), dynamo=dynamo)
            return path
        except Exception as e:  # noqa: BLE001 - any exporter failure: try the next, then say
            failures.append(f"{'dynamo' if dynamo else 'TorchScript'} exporter: {first_line(e)}")
    raise KuiperError("torch.onnx.export could not export pnnx's PyTorch module "
                      f"({'; '.join(failures)})")


def bench_onnxruntime(path: str, inputs: list[np.ndarray], args: dict) -> Column:
    import tempfile

    import onnxruntime as ort

    from kuiper.bench.kinds import profile_onnxruntime
    from kuiper.bench.reference import torch_module_path

    with tempfile.TemporaryDirectory(prefix="kuiper-bench-") as folder:
        model = plain_onnx_path(path)
        source = model.name
        if not model.is_file():
            if not args["trust_model_code"]:
                # The export would run <stem>_pnnx.py: Python code from the model's folder.
                raise KuiperError(f"no {model.name} beside the model; to export one from "
                                  f"{torch_module_path(path).name} (which runs that Python "
                                  "file) add --trust-model-code")
            try:
                model = export_onnx(path, inputs, folder, args["params"])
            except ImportError:
                raise KuiperError(f"no {model.name} beside the model, and exporting one from "
                                  "pnnx's PyTorch module needs torch (pip install "
                                  "torch==2.13.0)") from None
            source = f"exported from {Path(path).name.split('.pnnx.')[0]}_pnnx.py"
        options = ort.SessionOptions()
        options.intra_op_num_threads = args["threads"]
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        session = ort.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])
        # onnxruntime's own per-node profile (kinds.py), from a second session: the timed one
        # stays unprofiled. Made here, while an exported model's folder still exists.
        profiled = (profiling_session(str(model), options) if args.get("top", 0) > 0
                    else None)
    feed = {i.name: x for i, x in zip(session.get_inputs(), inputs)}
    column = Column(f"onnxruntime {ort.__version__} ({threads_label(args['threads'])}, "
                    f"{source})")
    column.outputs = session.run(None, feed)
    column.run = lambda: session.run(None, feed)
    if profiled is not None:
        column.kind_profiler = lambda: profile_onnxruntime(*profiled, feed)
    return column


def profiling_session(model: str, options) -> tuple:
    """(an onnxruntime session of `model` with profiling on, the folder its profile goes to;
    the folder goes with the session, profiled or not)."""
    import shutil
    import tempfile
    import weakref

    import onnxruntime as ort

    folder = tempfile.mkdtemp(prefix="kuiper-ort-profile-")
    profiling = ort.SessionOptions()
    profiling.intra_op_num_threads = options.intra_op_num_threads
    profiling.inter_op_num_threads = options.inter_op_num_threads
    profiling.log_severity_level = 3
    profiling.enable_profiling = True
    profiling.profile_file_prefix = f"{folder}/onnxruntime_profile"
    session = ort.InferenceSession(model, profiling, providers=["CPUExecutionProvider"])
    weakref.finalize(session, shutil.rmtree, folder, True)
    return session, folder


def why(error: Exception) -> str:
    if isinstance(error, ImportError):
        module = error.name or str(error)
        hint = "pip install torch==2.13.0" if module == "torch" else f"pip install {module}"
        return f"{module} is not installed ({hint})"
    if isinstance(error, KuiperError):
        return str(error)
    return f"it failed: {first_line(error)}"
