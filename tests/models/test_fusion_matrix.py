"""The fusion matrix: every producer that accepts an epilogue x every fusable activation x
(no residual, residual add before the activation, residual add after it), on both backends,
against PyTorch, through real pnnx exports.

A ConvTranspose2d followed by a ReLU once crashed the CPU backend: the producer claimed to take
a fused activation and did not. So no pair is left out. One export per (producer, residual
mode) holds one branch per activation, each with its own producer (a producer read twice would
not fuse), and the test checks both that the plan fused every branch and that the results are
PyTorch's.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

import kuiper
from kuiper.testing import assert_close
from tests.models.common import torch_outputs

# name -> (make a producer module, the input shape)
PRODUCERS = {
    "nn.Conv1d": (lambda: nn.Conv1d(4, 5, 3, padding=1), (2, 4, 11)),
    "nn.Conv2d": (lambda: nn.Conv2d(4, 5, 3, padding=1, stride=(1, 2)), (2, 4, 9, 7)),
    "nn.Conv2d-depthwise": (lambda: nn.Conv2d(4, 4, 3, padding=1, groups=4), (2, 4, 9, 7)),
    "nn.Conv2d-1x1": (lambda: nn.Conv2d(4, 6, 1), (1, 4, 5, 7)),
    "nn.Conv3d": (lambda: nn.Conv3d(3, 4, 3, padding=(1, 0, 1)), (1, 3, 4, 5, 6)),
    "nn.ConvTranspose1d": (lambda: nn.ConvTranspose1d(4, 6, 3, stride=2, padding=1,
                                                      output_padding=1, groups=2), (2, 4, 7)),
    "nn.ConvTranspose2d": (lambda: nn.ConvTranspose2d(4, 5, 3, stride=2, padding=1,
                                                      output_padding=(1, 0)), (2, 4, 5, 6)),
    "nn.ConvTranspose3d": (lambda: nn.ConvTranspose3d(3, 4, (2, 3, 2), stride=(2, 1, 2)),
                           (1, 3, 3, 4, 3)),
    "nn.Linear": (lambda: nn.Linear(6, 5), (3, 6)),
    "F.linear": (lambda: FunctionalLinear(6, 5), (3, 2, 6)),
    "torch.matmul": (lambda: MatmulByWeight(6, 5), (2, 3, 6)),
    "nn.MultiheadAttention": (lambda: SelfAttention(8, 2), (2, 5, 8)),
}
# nn.MultiheadAttention traces differently at each call: pnnx's check of the trace must be off
EXPORT_OPTIONS = {"nn.MultiheadAttention": {"check_trace": False}}


class FunctionalLinear(nn.Module):
    def __init__(self, n_in: int, n_out: int):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(n_out, n_in))
        self.bias = nn.Parameter(torch.randn(n_out))

    def forward(self, x):
        return F.linear(x, self.weight, self.bias)


class MatmulByWeight(nn.Module):
    def __init__(self, n_in: int, n_out: int):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(n_in, n_out))

    def forward(self, x):
        return torch.matmul(x, self.weight)


class SelfAttention(nn.Module):
    """nn.MultiheadAttention's output alone: the epilogue goes into its output projection."""

    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)

    def forward(self, x):
        return self.attn(x, x, x, need_weights=False)[0]


# name -> the activation module (what pnnx writes for each is checked by the plan)
ACTIVATIONS = {
    "ReLU": nn.ReLU, "ReLU6": nn.ReLU6, "LeakyReLU": lambda: nn.LeakyReLU(0.1),
    "SiLU": nn.SiLU, "Hardswish": nn.Hardswish, "Sigmoid": nn.Sigmoid, "GELU": nn.GELU,
    "GELU-tanh": lambda: nn.GELU(approximate="tanh"), "Tanh": nn.Tanh,
    "Hardtanh": lambda: nn.Hardtanh(-1.0, 2.0), "clamp": lambda: Clamp(-0.5, 0.75),
}
RESIDUAL = ("none", "before", "after")


class Clamp(nn.Module):
    def __init__(self, low: float, high: float):
        super().__init__()
        self.low, self.high = low, high

    def forward(self, x):
        return torch.clamp(x, self.low, self.high)


class Branches(nn.Module):
    """One producer + activation (+ residual add) per activation, all reading x (and r)."""

    def __init__(self, producer: str, residual: str):
        super().__init__()
        make, _ = PRODUCERS[producer]
        self.producers = nn.ModuleList(make() for _ in ACTIVATIONS)
        self.acts = nn.ModuleList(make_act() for make_act in ACTIVATIONS.values())
        self.residual = residual

    def forward(self, x, r):
        outs = []
        for producer, act in zip(self.producers, self.acts):
            y = producer(x)
            if self.residual == "before":
                y = act(y + r)
            elif self.residual == "after":
                y = act(y) + r
            else:
                y = act(y)
            outs.append(y)
        return tuple(outs)


def inputs_of(producer: str, rng: np.random.Generator) -> list[np.ndarray]:
    torch.manual_seed(0)
    module = Branches(producer, "none").eval()
    x = 2 * rng.standard_normal(PRODUCERS[producer][1]).astype(np.float32)
    with torch.no_grad():
        shape = module.producers[0](torch.from_numpy(x)).shape
    return [x, rng.standard_normal(tuple(shape)).astype(np.float32)]


def exported(export_model, producer: str, residual: str):
    torch.manual_seed(0)
    module = Branches(producer, residual).eval()
    rng = np.random.default_rng(5)
    inputs = inputs_of(producer, rng)
    path = export_model(f"fusion_{producer}_{residual}".replace(".", "_"), module,
                        tuple(torch.from_numpy(a) for a in inputs),
                        **EXPORT_OPTIONS.get(producer, {}))
    return path, module, inputs


def check_fused_and_correct(path, module, inputs, backend: str, residual: str) -> None:
    graph = kuiper.load(path, backend=backend)
    epilogues = graph.plan.epilogues
    # every branch fused: its activation, and its residual add where there is one
    assert len(epilogues) == len(ACTIVATIONS), graph.plan.describe()
    for epilogue in epilogues.values():
        assert epilogue.activation is not None, graph.plan.describe()
        assert (epilogue.residual is not None) == (residual != "none"), graph.plan.describe()
        if residual != "none":
            assert epilogue.residual_first == (residual == "before")
    want = torch_outputs(module, inputs)
    got = graph.forward(*inputs)
    assert len(got) == len(want)
    for name, a, e in zip(ACTIVATIONS, got, want):
        assert_close(a, e, what=f"{name} after {path.parent.name} on {backend}")
    unfused = kuiper.load(path, backend=backend, passes=["fold_constants"]).forward(*inputs)
    for name, a, b in zip(ACTIVATIONS, got, unfused):
        assert_close(a, b, what=f"{name}: fused vs unfused on {backend}")


# The normal run takes every producer once, the residual positions in turn (each export holds
# every activation); the whole matrix, 36 exports run on both backends (about 3 minutes of a
# 2-core machine), runs with `python -m pytest --full-sweeps`.
SUBSET = {(p, RESIDUAL[i % len(RESIDUAL)]) for i, p in enumerate(PRODUCERS)}
MATRIX = [pytest.param(p, r, marks=pytest.mark.slow if (p, r) in SUBSET
                       else (pytest.mark.slow, pytest.mark.full_sweep))
          for p in PRODUCERS for r in RESIDUAL]


@pytest.mark.parametrize(("producer", "residual"), MATRIX)
def test_every_producer_fuses_every_activation(export_model, backend, producer, residual):
    path, module, inputs = exported(export_model, producer, residual)
    check_fused_and_correct(path, module, inputs, backend, residual)


def test_the_producers_cover_every_layer_that_accepts_an_epilogue():
    """A new layer class with `accepts_epilogue` must join the matrix above."""
    from kuiper.core import registry

    accepting = {t for t, cls in registry.supported("cpu").items()
                 if getattr(cls, "accepts_epilogue", False)}
    covered = {name.split("-")[0] for name in PRODUCERS}
    families = {registry.lookup(t) for t in covered}
    missing = sorted(t for t in accepting if registry.lookup(t) not in families
                     and t != "pnnx.Expression")  # tests/unit/test_passes.py covers it
    assert not missing, f"add to PRODUCERS: {missing}"
