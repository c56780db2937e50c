"""What every end-to-end model test does: run PyTorch, run Kuiper, compare every output.

Tolerance: `kuiper.testing.assert_close`'s rule,
max |kuiper - torch| <= 1e-4 * max(1, max|torch|) per output. Float32 convolutions of a few
thousand terms summed in another order than PyTorch's lose a few digits; 1e-4 of the output's
scale keeps a margin of ~10x over what a correct implementation differs by, and is far below
what any real bug (a wrong padding, a missed bias, a transposed weight) produces.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

import kuiper
from kuiper.testing import RTOL, assert_close


class CPUFallbackWarning(UserWarning):
    """An OpenCL model run had operators without an OpenCL layer (they ran on the host)."""


def torch_outputs(module: torch.nn.Module, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """The module's outputs on NumPy inputs, flattened to a list (tuples are model outputs)."""
    with torch.no_grad():
        out = module(*[torch.from_numpy(np.ascontiguousarray(x)) for x in inputs])
    flat: list[np.ndarray] = []

    def collect(value) -> None:
        if isinstance(value, (tuple, list)):
            for v in value:
                collect(v)
        else:
            flat.append(value.detach().numpy())

    collect(out)
    return flat


def kuiper_outputs(param: Path | str, backend: str, inputs: Sequence[np.ndarray]
                   ) -> list[np.ndarray]:
    """Load the export on `backend` and run it on `inputs` (which may have another batch or
    size than the export: forward() then infers shapes again)."""
    graph = kuiper.load(param, backend=backend)
    outputs = graph.forward(*inputs)
    if graph.fallbacks:
        names = ", ".join(sorted({op.type for op in graph.fallbacks}))
        warnings.warn(f"{Path(param).parent.name}: no OpenCL layer for {names} (ran on the CPU)",
                      CPUFallbackWarning, stacklevel=2)
    return [np.asarray(o) for o in outputs]


def check_model(param: Path | str, module: torch.nn.Module, inputs: Sequence[np.ndarray],
                backend: str, rtol: float = RTOL) -> list[np.ndarray]:
    """Kuiper on `backend` agrees with the PyTorch module on every output."""
    expected = torch_outputs(module, inputs)
    actual = kuiper_outputs(param, backend, inputs)
    name = Path(param).parent.name
    assert len(actual) == len(expected), (
        f"{name}: kuiper gave {len(actual)} output(s), torch {len(expected)}")
    for k, (a, e) in enumerate(zip(actual, expected)):
        assert np.isfinite(e).all(), f"{name}: the reference output {k} is not finite"
        assert_close(a, e, rtol, what=f"{name} on {backend}, output {k} {tuple(e.shape)}")
    return actual


def check_resized_or_refused(param: Path | str, module: torch.nn.Module,
                             inputs: Sequence[np.ndarray], backend: str) -> str:
    """For an export that bakes its batch/size into constants (reshape targets, folded grids,
    an expanded class token): running another size must either be right or be refused with a
    ShapeError that says to re-export -- never a silently wrong result or a NumPy traceback.
    Returns "ran" or "refused"."""
    try:
        check_model(param, module, inputs, backend)
    except kuiper.ShapeError as e:
        assert "re-export" in str(e), f"the ShapeError does not say to re-export: {e}"
        return "refused"
    return "ran"


def image(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)
