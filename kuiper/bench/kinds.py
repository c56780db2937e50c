"""Time by kind of operator: Kuiper's per-operator profile and onnxruntime's own, side by side.

Kuiper's operators (pnnx's) and onnxruntime's nodes (an ONNX export's, fused by its optimiser:
a Conv with its Relu is one FusedConv) do not match one to one, so `kuiper bench` compares
them by kind: depthwise convolutions, 1x1 ones, other convolutions, matrix products, and so on.
A kind where Kuiper's time is far above onnxruntime's is where to work next (issue 30 asked
for this table, next to onnxruntime's `SessionOptions.enable_profiling`).

Kuiper's side: the profile's seconds per operator, each operator's kind from its type and
parameters (pnnx keeps an `nn.MultiheadAttention` as one operator, its four projections
included: "attention" then holds what onnxruntime counts under matrix products, and the two
kinds compare only together). onnxruntime's side: one profiled session run a few times; its
JSON file has an
event per node and run ("<node>_kernel_time", microseconds, with the node's op type and input
shapes); each node's median, summed by kind. An activation fused into its producer costs
nothing of its own on either side; on Kuiper's NumPy backend every operator runs alone.
"""

from __future__ import annotations

import json
import re
import statistics
from collections.abc import Mapping
from typing import Any

CONV_DEPTHWISE, CONV_1X1, CONV = "conv depthwise", "conv 1x1", "conv other"
KINDS = (CONV_DEPTHWISE, CONV_1X1, CONV, "matmul / linear", "attention", "pooling",
         "normalization", "data movement", "elementwise / activation", "other")

# By the type's own name: pnnx's (nn.X, F.x, torch.x, Tensor.x) and ONNX's op types.
_BY_NAME = {
    "matmul / linear": ("linear", "matmul", "bmm", "addmm", "baddbmm", "gemm", "einsum",
                        "fusedmatmul", "fusedgemm", "matmulinteger", "qgemm"),
    # a softmax is counted with attention: in a transformer (onnxruntime's unfused attention)
    # that is where it sits; a classifier's last softmax is a few microseconds either way
    "attention": ("multiheadattention", "scaled_dot_product_attention", "attention",
                  "kuiper.fusedattention", "grouped_query_attention", "softmax"),
    "pooling": ("maxpool", "avgpool", "adaptiveavgpool", "adaptivemaxpool", "lppool",
                "averagepool", "globalaveragepool", "globalmaxpool", "max_pool", "avg_pool",
                "adaptive_avg_pool"),
    "normalization": ("batchnorm", "layernorm", "groupnorm", "instancenorm", "layer_norm",
                      "batch_norm", "group_norm", "instance_norm", "normalize",
                      "layernormalization", "batchnormalization", "instancenormalization",
                      "groupnormalization", "rmsnorm", "simplifiedlayernormalization",
                      "skiplayernormalization"),
    "data movement": ("reshape", "view", "permute", "transpose", "cat", "concat", "slice",
                      "split", "chunk", "flatten", "squeeze", "unsqueeze", "expand",
                      "gather", "pixelshuffle", "pixel_shuffle", "upsample", "resize",
                      "interpolate", "pad", "contiguous", "tile", "repeat", "shape",
                      "select", "index", "stack", "unbind", "roll"),
    "elementwise / activation": (
        "relu", "relu6", "silu", "gelu", "sigmoid", "tanh", "hardswish", "hardsigmoid",
        "leakyrelu", "leaky_relu", "elu", "mish", "softplus", "clip", "clamp", "add", "sub",
        "mul", "div", "pow", "sqrt", "exp", "log", "neg", "abs", "erf", "expression", "where",
        "quickgelu", "fastgelu", "biasgelu", "prelu", "hardtanh", "dropout", "identity",
        "sum", "mean", "reducemean", "reducesum", "max", "min"),
}
_KIND_OF_NAME = {name: kind for kind, names in _BY_NAME.items() for name in names}


def _short(op_type: str) -> str:
    """'nn.Conv2d' -> 'conv2d', 'F.scaled_dot_product_attention' -> its name, 'Conv' -> 'conv'."""
    if op_type.startswith("kuiper."):
        return op_type.lower()
    return op_type.rsplit(".", 1)[-1].lower()


def conv_kind(cin_g: int, groups: int, kernel: tuple[int, ...]) -> str:
    """Depthwise (one input channel per group, in more than one group: the engine's own test,
    `ConvProblem.depthwise` and the NumPy convolution's), 1x1, or another convolution."""
    if cin_g == 1 and groups > 1:
        return CONV_DEPTHWISE
    if kernel and all(int(k) == 1 for k in kernel):
        return CONV_1X1
    return CONV


def kind_of_type(op_type: str) -> str:
    """The kind of an operator type that needs no parameters to tell (not a convolution)."""
    short = _short(op_type)
    base = re.sub(r"[123]d$", "", short)   # nn.MaxPool2d, nn.BatchNorm1d, ...
    for name in (short, base):
        if name in _KIND_OF_NAME:
            return _KIND_OF_NAME[name]
    if base in ("conv", "conv_transpose", "convtranspose", "fusedconv"):
        return CONV
    return "other"


def kuiper_kind(op: Any, specs: Mapping[str, Any]) -> str:
    """The kind of one of Kuiper's operators (a RuntimeOperator of the loaded graph)."""
    short = _short(op.type)
    if short.startswith("conv") and "transpose" not in short:
        params = getattr(op, "params", {}) or {}
        groups = int(params.get("groups", 1) or 1)
        kernel = tuple(params.get("kernel_size") or ())
        cin_g = int(params.get("in_channels", 0) or 0) // groups
        if not kernel and len(op.inputs) > 1:  # F.conv2d: the weight (out, in/groups, k...)
            shape = tuple(getattr(specs.get(op.inputs[1].name), "shape", ()) or ())
            kernel, cin_g = shape[2:], (shape[1] if len(shape) > 1 else 0)
        return conv_kind(cin_g, groups, kernel)
    return kind_of_type(op.type)


def kuiper_kinds(profile: Mapping[str, float], operators: Mapping[str, Any],
                 specs: Mapping[str, Any]) -> dict[str, float]:
    """Seconds per kind of a Kuiper column's per-operator profile (operator name -> seconds)."""
    kinds: dict[str, float] = {}
    for name, seconds in profile.items():
        op = operators.get(name)
        kind = kuiper_kind(op, specs) if op is not None else "other"
        kinds[kind] = kinds.get(kind, 0.0) + seconds
    return kinds


def onnx_node_kind(op_type: str, input_shapes: list) -> str:
    """The kind of an onnxruntime node from its op type and input shapes (the profile's): a
    convolution's weight [out, in / groups, kh, kw] and its input [n, in, ...] give the
    groups, hence depthwise, and the kernel, hence 1x1."""
    if op_type in ("Conv", "FusedConv", "NhwcFusedConv", "QLinearConv") and len(input_shapes) > 1:
        x, weight = input_shapes[0], input_shapes[1]
        if len(weight) >= 3 and len(x) >= 2 and weight[1] > 0:
            return conv_kind(weight[1], x[1] // weight[1], tuple(weight[2:]))
    return kind_of_type(op_type)


def onnxruntime_kinds(profile_file: str) -> dict[str, float]:
    """Seconds per inference by kind, from an onnxruntime profile (each node's median run)."""
    with open(profile_file) as f:
        events = json.load(f)
    runs: dict[str, list[float]] = {}
    kinds: dict[str, str] = {}
    for event in events:
        name = event.get("name", "")
        if event.get("cat") != "Node" or not name.endswith("_kernel_time"):
            continue
        args = event.get("args", {})
        shapes = [next(iter(s.values()), []) for s in args.get("input_type_shape", [])
                  if isinstance(s, dict)]
        kinds[name] = onnx_node_kind(args.get("op_name", ""), shapes)
        runs.setdefault(name, []).append(float(event.get("dur", 0.0)) * 1e-6)
    totals: dict[str, float] = {}
    for name, seconds in runs.items():
        totals[kinds[name]] = totals.get(kinds[name], 0.0) + statistics.median(seconds)
    return totals


def profile_onnxruntime(session: Any, folder: str, feed: dict, runs: int = 10
                        ) -> dict[str, float]:
    """Run a session made with profiling on `runs` times after 3 warm-ups (profiled too:
    each node's median leaves them out) and return its seconds by kind; `folder`, where its
    profile file goes, is removed after."""
    import shutil

    try:
        for _ in range(3 + runs):
            session.run(None, feed)
        return onnxruntime_kinds(session.end_profiling())
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def kinds_table(columns: list) -> list[tuple] | None:
    """Rows of the by-kind table (None: fewer than one column has kinds)."""
    with_kinds = [c for c in columns if c.kinds]
    if not with_kinds:
        return None
    present = [k for k in KINDS if any(c.kinds.get(k) for c in with_kinds)]
    rows = [("kind",) + tuple(c.label.split(" (")[0] for c in with_kinds)]
    for kind in present:
        rows.append((kind,) + tuple(f"{c.kinds.get(kind, 0.0) * 1e3:.3f}" for c in with_kinds))
    rows.append(("total",) + tuple(f"{sum(c.kinds.values()) * 1e3:.3f}" for c in with_kinds))
    return rows
