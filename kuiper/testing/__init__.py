"""Helpers for testing layers and models: write a one-operator PNNX model, run it, compare.

Used by Kuiper's own tests and meant for anyone adding a layer:

    out, = run_operator("nn.ReLU", [x], backend="opencl")
    assert_close(out, torch.relu(torch.from_numpy(x)).numpy())

`run_operator` goes through the real path (param text -> zip -> parser -> graph -> layer), so a
layer that passes here also loads from a real export.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import zipfile
from collections.abc import Sequence
from typing import Any

import numpy as np

# Tolerance rule for float32 results, stated once: max |actual - expected| must not exceed
# RTOL * max(1, max |expected|). Float32 has ~7 significant digits; GEMMs of a few thousand terms
# summed in a different order than PyTorch's lose 2-3 of them.
RTOL = 1e-4
# At the edges of floating point (edge_mismatch) each value is compared with its own expected
# value: PoCL's builtins are within 4 ulp (OpenCL's spec allows up to 16 for some), PyTorch's
# within 1-2; 4e-6 is about 33 ulp of float32.
EDGE_RTOL = 4e-6
# The edges of floating point, for differential tests and the fuzzer (kuiper/fuzz/scenarios.py):
# NaN, infinities, signed zeros, float32's largest, smallest normal and smallest subnormal
# values, halves for round(), and where exp and sinh overflow (88.7, 89, -104).
_MAX, _TINY = float(np.finfo(np.float32).max), float(np.finfo(np.float32).tiny)
EDGE_FLOATS = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, _MAX, -_MAX, _TINY, -_TINY, 1e-45,
                        -1e-45, 1.0, -1.0, 0.5, -0.5, 2.5, -2.5, 3.0, -7.0, 1e30, -1e30, 88.7,
                        89.0, -104.0], np.float32)
EDGE_INTS = np.array([0, 1, -1, 2, -7, 63, 64, 2**62, -(2**63), 2**63 - 1], np.int64)
# The same kind of values as literals, as pnnx writes them (nan.0 is its NaN).
EDGE_LITERALS = ["nan.0", "nan", "inf", "-inf", "0.0", "-0.0", "3.402823e+38",
                 "-3.402823e+38", "1e-45", "2.0", "-1.0"]

_SUFFIX = {np.dtype(np.float32): "f32", np.dtype(np.float64): "f64",
           np.dtype(np.float16): "f16", np.dtype(np.int64): "i64", np.dtype(np.int32): "i32",
           np.dtype(np.int16): "i16", np.dtype(np.int8): "i8", np.dtype(np.uint8): "u8",
           np.dtype(np.bool_): "bool", np.dtype(np.complex64): "c64",
           np.dtype(np.complex128): "c128"}


def tolerance(expected: np.ndarray, rtol: float = RTOL) -> float:
    ref = np.abs(np.asarray(expected, dtype=np.float64))
    ref = ref[np.isfinite(ref)]  # an expected inf must not make every difference acceptable
    return rtol * max(1.0, float(ref.max()) if ref.size else 1.0)


def max_abs_diff(actual: Any, expected: Any) -> float:
    a = np.asarray(actual, dtype=np.float64)
    e = np.asarray(expected, dtype=np.float64)
    if a.size == 0:
        return 0.0
    same = (np.isnan(a) & np.isnan(e)) | (a == e)  # equal infinities count as equal
    with np.errstate(invalid="ignore"):
        diff = np.where(same, 0.0, np.abs(a - e))
    return float(np.nan_to_num(diff, nan=np.inf).max())


def assert_close(actual: Any, expected: Any, rtol: float = RTOL, what: str = "output") -> None:
    """Shape, then values under the tolerance rule; the message shows the worst elements.

    Complex values are compared as (real, imag) pairs, in a trailing dim of 2."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    if np.iscomplexobj(actual) or np.iscomplexobj(expected):
        assert np.iscomplexobj(actual) == np.iscomplexobj(expected), (
            f"{what}: dtype {actual.dtype} but expected {expected.dtype}")
        actual = np.stack([actual.real, actual.imag], axis=-1)
        expected = np.stack([expected.real, expected.imag], axis=-1)
    assert actual.shape == expected.shape, (
        f"{what}: shape {actual.shape} != expected {expected.shape}")
    diff, tol = max_abs_diff(actual, expected), tolerance(expected, rtol)
    if diff > tol:
        a64, e64 = actual.astype(np.float64), expected.astype(np.float64)
        err = np.abs(a64 - e64)
        worst = np.argsort(np.nan_to_num(err, nan=np.inf).ravel())[::-1][:5]
        rows = "\n".join(f"  at {np.unravel_index(i, actual.shape)}: got {a64.flat[i]:.7g}, "
                         f"expected {e64.flat[i]:.7g}" for i in worst)
        raise AssertionError(f"{what}: max abs difference {diff:.3g} > tolerance {tol:.3g}\n"
                             + rows)


def edge_mismatch(actual: Any, expected: Any, rtol: float = EDGE_RTOL) -> str | None:
    """Where `actual` differs from `expected` at the edges of floating point, or None.

    Stricter than `assert_close`, whose tolerance scales with the largest value (3.4e38 would
    hide everything): NaN where and only where expected, infinities of the same sign, zeros of
    the same sign, and every finite value within `rtol` of its own expected value. A subnormal
    on one side may be a zero of either sign on the other: a device that flushes subnormals
    to zero (PoCL, PyTorch's vectorized kernels) is not wrong about signs.
    """
    a, e = np.asarray(actual), np.asarray(expected)
    if a.shape != e.shape or a.dtype != e.dtype:
        return f"shape {a.shape} {a.dtype}, expected {e.shape} {e.dtype}"
    if a.dtype.kind == "c":  # each part on its own
        return edge_mismatch(np.stack([a.real, a.imag], -1), np.stack([e.real, e.imag], -1),
                             rtol)
    if a.dtype.kind != "f":
        bad = a != e
    else:
        a64, e64 = a.astype(np.float64), e.astype(np.float64)
        nan_a, nan_e = np.isnan(a64), np.isnan(e64)
        with np.errstate(all="ignore"):
            diff = np.abs(a64 - e64)
            value_ok = ((a64 == e64) | (np.isfinite(e64) & (diff <= rtol * np.abs(e64)))
                        | (diff < np.finfo(a.dtype).tiny))  # (a subnormal against a zero)
            zeros = (a64 == 0) & (e64 == 0)
            sign_ok = ~zeros | (np.signbit(a64) == np.signbit(e64))
        bad = (nan_a != nan_e) | (~nan_a & ~nan_e & ~(value_ok & sign_ok))
    if not bad.any():
        return None
    at = [tuple(int(i) for i in index) for index in np.argwhere(bad)[:4]]
    return "; ".join(f"at {i}: got {a[i]!r}, expected {e[i]!r}" for i in at) + (
        f" ({int(bad.sum())} elements differ)" if bad.sum() > len(at) else "")


def write_param(folder: str | os.PathLike, lines: Sequence[str],
                weights: dict[str, np.ndarray] | None = None, counts: str | None = None,
                name: str = "model") -> str:
    """Write `<folder>/<name>.pnnx.param` by hand: the magic number, the counts line, then
    `lines` (one operator each, as pnnx writes them); returns its path. `counts` defaults to
    the operators and the operands the lines name (pass it for a deliberately wrong one).
    `weights` ({"op.weight": array}), when given, become `<name>.pnnx.bin` (an empty one for
    {}): a zip of raw little-endian arrays, stored, as pnnx writes it."""
    if counts is None:
        operands: set[str] = set()
        for line in lines:
            fields = line.split()
            with contextlib.suppress(IndexError, ValueError):
                n_in, n_out = int(fields[2]), int(fields[3])
                operands.update(fields[4:4 + n_in + n_out])
        counts = f"{len(lines)} {len(operands)}"
    path = os.path.join(folder, f"{name}.pnnx.param")
    with open(path, "w") as f:
        f.write("\n".join(["7767517", counts, *lines]) + "\n")
    if weights is not None:
        with zipfile.ZipFile(os.path.join(folder, f"{name}.pnnx.bin"), "w",
                             zipfile.ZIP_STORED) as z:
            for entry, array in weights.items():
                z.writestr(entry, np.ascontiguousarray(array).tobytes())
    return path


def write_expression_model(folder: str | os.PathLike, inputs: Sequence[np.ndarray],
                           exprs: Sequence[str]) -> str:
    """Write `<folder>/model.pnnx.param` with one pnnx.Expression per item of `exprs`, each
    reading every input and giving its own graph output, in that order. One model for many
    expressions: one load (on OpenCL, one kernel each) instead of one per expression."""
    ins = [f"x{i}" for i in range(len(inputs))]
    lines = [f"pnnx.Input in{i} 0 1 {name} #{name}={_shape_token(np.shape(x), np.asarray(x).dtype)}"
             for i, (name, x) in enumerate(zip(ins, inputs))]
    outs = [f"y{k}" for k in range(len(exprs))]
    lines += [f"pnnx.Expression e{k} {len(ins)} 1 {' '.join(ins)} {out} expr={expr}"
              for k, (out, expr) in enumerate(zip(outs, exprs))]
    lines.append(f"pnnx.Output out {len(outs)} 0 {' '.join(outs)}")
    return write_param(folder, lines)


def _format_value(value: Any) -> str:
    if value is None:
        return "None"
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, float):
        return f"{value:e}"
    if isinstance(value, (list, tuple)):
        return "(" + ",".join(_format_value(v) for v in value) + ")"
    return str(value)


def _shape_token(shape: Sequence[int], dtype: np.dtype) -> str:
    return "(" + ",".join(str(d) for d in shape) + ")" + _SUFFIX[np.dtype(dtype)]


def write_operator_model(folder: str | os.PathLike, op_type: str,
                         inputs: Sequence[np.ndarray], params: dict[str, Any] | None = None,
                         weights: dict[str, np.ndarray] | None = None, n_outputs: int = 1,
                         name: str = "op0", constants: Sequence[int] = (),
                         output_specs: Sequence[tuple[Sequence[int], Any]] | None = None) -> str:
    """Write `<folder>/model.pnnx.param` + `.bin` with one operator between inputs and outputs.

    Returns the .param path. Parameter values are written as pnnx writes them; pass raw strings
    for values the generic writer does not cover (e.g. `expr`). Inputs whose positions are in
    `constants` are written as `pnnx.Attribute` operators instead of graph inputs, so their
    values are known at build time (like a shape list computed from `size(...)`).
    `output_specs`: (shape, dtype) per output; when given, the operator line carries pnnx's
    `#` shape tokens (inputs, then these outputs), for layers that tell their outputs apart by
    the declared shapes (pnnx drops unused outputs).
    """
    params, weights = params or {}, weights or {}
    lines = []
    ins = [str(i) for i in range(len(inputs))]
    outs = [str(len(inputs) + k) for k in range(n_outputs)]
    for i, x in enumerate(inputs):
        token = _shape_token(np.shape(x), np.asarray(x).dtype)
        if i in constants:
            lines.append(f"pnnx.Attribute pnnx_const_{i} 0 1 {ins[i]} @data={token} "
                         f"#{ins[i]}={token}")
        else:
            lines.append(f"pnnx.Input pnnx_input_{i} 0 1 {ins[i]} #{ins[i]}={token}")
    tokens = [f"{k}={_format_value(v)}" for k, v in sorted(params.items())]
    tokens += [f"@{k}={_shape_token(w.shape, w.dtype)}" for k, w in weights.items()]
    if output_specs is not None:  # as pnnx writes them: inputs' shapes, then outputs'
        tokens += [f"#{i}={_shape_token(np.shape(x), np.asarray(x).dtype)}"
                   for i, x in zip(ins, inputs)]
        tokens += [f"#{o}={_shape_token(shape, dtype)}"
                   for o, (shape, dtype) in zip(outs, output_specs)]
    lines.append(f"{op_type} {name} {len(ins)} {len(outs)} {' '.join(ins)} {' '.join(outs)} "
                 + " ".join(tokens))
    lines.append(f"pnnx.Output pnnx_output_0 {len(outs)} 0 {' '.join(outs)}")
    stored = {f"{name}.{k}": w for k, w in weights.items()}
    stored.update({f"pnnx_const_{i}.data": inputs[i] for i in constants})
    return write_param(folder, lines, stored)


def run_operator(op_type: str, inputs: Sequence[np.ndarray], params: dict[str, Any] | None = None,
                 weights: dict[str, np.ndarray] | None = None, n_outputs: int = 1,
                 backend: str = "cpu", allow_fallback: bool = False,
                 constants: Sequence[int] = (),
                 output_specs: Sequence[tuple[Sequence[int], Any]] | None = None,
                 **options: Any) -> list:
    """Run one operator through the whole loading path on `backend`; returns its outputs.

    On OpenCL a layer that silently fell back to the CPU would make the test meaningless, so
    that is an error unless `allow_fallback`. `constants`: positions of inputs given as
    build-time constants (see `write_operator_model`); the others are fed to the graph.
    """
    from kuiper.graph.load import load

    with tempfile.TemporaryDirectory(prefix="kuiper-op-") as folder:
        path = write_operator_model(folder, op_type, inputs, params, weights, n_outputs,
                                    constants=constants, output_specs=output_specs)
        graph = load(path, backend=backend, **options)
        # Only the operator under test counts (constants are folded, never run).
        if any(op.name == "op0" for op in graph.fallbacks) and not allow_fallback:
            raise AssertionError(f"{op_type} has no {backend} layer: it fell back to the CPU")
        return graph.forward(*[x for i, x in enumerate(inputs) if i not in constants])


@contextlib.contextmanager
def tensor_cores_preferred():
    """The OpenCL cost model told that the tensor cores run at their peak, for a test about what
    a layer on them computes: on products that small (or emulated ones) the measured efficiency
    (layers/opencl_gemm/cost.py) would rightly leave the layer on a portable kernel."""
    from unittest import mock

    from kuiper.layers.opencl_gemm import cost

    at_peak = {p: dict.fromkeys(rates, 1.0) for p, rates in cost.MMA_EFFICIENCY.items()}
    with mock.patch.object(cost, "MMA_EFFICIENCY", at_peak):
        yield
