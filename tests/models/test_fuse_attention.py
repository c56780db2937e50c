"""The fuse_attention pass on attention written out by hand (kuiper/passes/fuse_attention.py):
real pnnx exports of Hugging Face-style blocks, on both backends, against PyTorch."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn as nn

import kuiper
from kuiper.testing import assert_close

FUSED = "kuiper.fused_attention"
PNNX_FUSED = ("F.scaled_dot_product_attention", "nn.MultiheadAttention")


def chain(graph) -> bool:
    """Whether pnnx left the attention as matmul, softmax, matmul."""
    return any(op.type == "F.softmax" for op in graph.order)


class HandWritten(nn.Module):
    """BERT's self-attention as Hugging Face writes it: Linear projections, heads by
    view/permute, matmul with k.transpose, a scale, a mask, softmax, matmul."""

    def __init__(self, embed=48, heads=3, scale="div", mask=True, softmax="torch"):
        super().__init__()
        self.heads, self.d, self.scale, self.mask, self.softmax = heads, embed // heads, scale, \
            mask, softmax
        self.q, self.k, self.v = (nn.Linear(embed, embed) for _ in range(3))
        self.o = nn.Linear(embed, embed)

    def split(self, x):
        b, t, _ = x.shape
        return x.view(b, t, self.heads, self.d).permute(0, 2, 1, 3)

    def forward(self, x, mask):
        q, k, v = self.split(self.q(x)), self.split(self.k(x)), self.split(self.v(x))
        if self.scale == "query":   # timm's way: the query scaled before the product
            q = q * (self.d ** -0.5)
        scores = torch.matmul(q, k.transpose(-1, -2))
        if self.scale == "div":
            scores = scores / math.sqrt(self.d)
        elif self.scale == "mul":
            scores = scores * (self.d ** -0.5)
        if self.mask:
            scores = scores + mask
        probs = (torch.softmax(scores, dim=-1) if self.softmax == "torch"
                 else nn.functional.softmax(scores, dim=3))
        out = torch.matmul(probs, v).permute(0, 2, 1, 3).contiguous()
        b, t = out.shape[:2]
        return self.o(out.view(b, t, -1))


def inputs(rng, tokens=19, embed=48):
    x = rng.standard_normal((2, tokens, embed)).astype(np.float32)
    mask = np.zeros((2, 1, 1, tokens), np.float32)
    mask[0, ..., -4:] = -1e4   # padding of the first sequence, as BERT's extended mask
    return x, mask


# pnnx itself recognises some spellings (no mask: an nn.MultiheadAttention for the whole block;
# an unscaled one with a mask: F.scaled_dot_product_attention); the others stay a chain of
# operators, which the pass fuses. Either way no score matrix may be left.
@pytest.fixture(scope="module", params=[("div", True, "torch"), ("mul", True, "F"),
                                        ("query", True, "torch"), ("none", True, "F")],
                ids=["div_mask", "mul_mask", "scaled_query_mask", "unscaled_mask"])
def exported(request, export_model):
    scale, mask, softmax = request.param
    torch.manual_seed(0)
    net = HandWritten(scale=scale, mask=mask, softmax=softmax).eval()
    x, m = inputs(np.random.default_rng(0))
    path = export_model(f"hand_attention_{scale}_{mask}_{softmax}", net,
                        (torch.from_numpy(x), torch.from_numpy(m)))
    return net, path


def test_the_chain_becomes_one_fused_attention(exported, backend, rng):
    net, path = exported
    graph = kuiper.load(path, backend=backend)
    report = {r.name: r for r in graph.plan.reports}["fuse_attention"]
    steps = [op.type for op in graph.plan.steps]
    if chain(graph):
        assert report.changed == 1 and FUSED in report.details[0]
        assert steps.count(FUSED) == 1
    else:
        assert report.changed == 0 and any(t in PNNX_FUSED for t in steps)
    assert "F.softmax" not in steps
    x, m = inputs(rng)
    with torch.no_grad():
        expected = net(torch.from_numpy(x), torch.from_numpy(m)).numpy()
    assert_close(graph(x, m), expected, what=f"fused attention on {backend}")


def test_the_unfused_plan_still_serves_every_operand(exported, backend, rng):
    """An observer, or asking for the softmax's output, runs every operator on its own."""
    _, path = exported
    graph = kuiper.load(path, backend=backend)
    if not chain(graph):
        pytest.skip("pnnx wrote this spelling as one attention operator: no chain to unfuse")
    x, m = inputs(rng)
    seen = []
    y = graph.forward(x, m, observer=lambda op, outs, s: seen.append(op.type))[0]
    assert "F.softmax" in seen and FUSED not in seen
    softmax = next(op for op in graph.order if op.type == "F.softmax")
    probs = graph.forward(x, m, outputs=[softmax.outputs[0].name])[0]
    np.testing.assert_allclose(probs.sum(axis=-1), 1.0, rtol=1e-5)
    assert_close(graph(x, m), y)


def test_the_pass_can_be_left_out(exported, rng):
    net, path = exported
    graph = kuiper.load(path, passes=["fold_constants", "eliminate_dead", "eliminate_noops",
                                      "fuse_epilogues", "plan_memory"])
    assert FUSED not in [op.type for op in graph.plan.steps]
    x, m = inputs(rng)
    with torch.no_grad():
        expected = net(torch.from_numpy(x), torch.from_numpy(m)).numpy()
    assert_close(graph(x, m), expected)


class NotAnAttention(nn.Module):
    """Look-alikes the pass must leave alone: softmax over another dim, the probabilities
    used twice (they are an output too)."""

    def forward(self, q, k, v):
        scores = torch.matmul(q, k.transpose(-1, -2)) / 4.0
        first = torch.matmul(torch.softmax(scores, dim=-2), v)
        probs = torch.softmax(scores * 2.0, dim=-1)
        return first, torch.matmul(probs, v), probs


def test_look_alikes_are_not_fused(export_model, backend, rng):
    torch.manual_seed(0)
    net = NotAnAttention().eval()
    q, k, v = (rng.standard_normal((1, 2, 7, 8)).astype(np.float32) for _ in range(3))
    path = export_model("not_an_attention", net, tuple(torch.from_numpy(a) for a in (q, k, v)))
    graph = kuiper.load(path, backend=backend)
    assert FUSED not in [op.type for op in graph.plan.steps]
    with torch.no_grad():
        expected = [t.numpy() for t in net(*(torch.from_numpy(a) for a in (q, k, v)))]
    for got, want in zip(graph(q, k, v), expected):
        assert_close(got, want)


def test_the_head_split_permutes_are_absorbed(exported, backend):
    """Q's, K's and V's view/permute and the output's permute back run as strides of the
    fused kernel: no permute is left in the plan, the permutes' outputs are unavailable."""
    _, path = exported
    graph = kuiper.load(path, backend=backend)
    if not chain(graph):
        pytest.skip("pnnx wrote this spelling as one attention operator: no chain to fuse")
    steps = graph.plan.steps
    assert not [op.name for op in steps if op.type in ("Tensor.permute", "torch.permute")]
    fused = next(op for op in steps if op.type == FUSED)
    assert {"q_perm", "k_perm", "v_perm", "o_perm"} <= set(fused.params)
    # the three projections of x are the fused operator's one GEMM: only the output's is left
    assert fused.params["projected"]
    assert [op.name for op in steps if op.type == "nn.Linear"] == ["o"]


class OtherLayouts(nn.Module):
    """Head splits the kernel cannot read in place, or that another operator reads too: the
    pass keeps those permutes and fuses the rest. Heads of 20 (odd tokens, head size 20)."""

    def __init__(self, embed=60, heads=3):
        super().__init__()
        self.heads, self.d = heads, embed // heads
        self.q, self.k, self.v = (nn.Linear(embed, embed) for _ in range(3))

    def forward(self, x):
        b, t, _ = x.shape
        # heads interleaved (channel c = d * heads + h): the head dim is not the contiguous one
        q = self.q(x).view(b, t, self.d, self.heads).permute(0, 3, 1, 2)
        k = self.k(x).view(b, t, self.heads, self.d).permute(0, 2, 1, 3)
        v = self.v(x).view(b, t, self.heads, self.d).permute(0, 2, 1, 3)
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.d)
        out = torch.matmul(torch.softmax(scores, dim=-1), v)
        # v's heads are an output too, and the result stays split by heads
        return out.permute(0, 2, 3, 1).reshape(b, t, -1), v * 2.0


def test_permutes_it_cannot_absorb_stay(export_model, backend, rng):
    torch.manual_seed(0)
    net = OtherLayouts().eval()
    x = rng.standard_normal((2, 23, 60)).astype(np.float32)
    path = export_model("attention_other_layouts", net, (torch.from_numpy(x),))
    graph = kuiper.load(path, backend=backend)
    if not chain(graph):
        pytest.skip("pnnx wrote this spelling as one attention operator: no chain to fuse")
    fused = next(op for op in graph.plan.steps if op.type == FUSED)
    assert "k_perm" in fused.params
    assert not {"q_perm", "v_perm", "o_perm"} & set(fused.params), fused.params
    with torch.no_grad():
        expected = [t.numpy() for t in net(torch.from_numpy(x))]
    for got, want in zip(graph(x), expected):
        assert_close(got, want, what=f"attention with other layouts on {backend}")


class QueryGiven(nn.Module):
    """The query arrives split by heads already (ConViT, VOLO and TNT in timm compute it in
    other ways), while K, V and the output have head permutes the pass absorbs: with the
    output's permute and no query's, the pass looked up Q's projection (KeyError: 'q')."""

    def __init__(self, embed=48, heads=3):
        super().__init__()
        self.heads, self.d = heads, embed // heads
        self.k, self.v = nn.Linear(embed, embed), nn.Linear(embed, embed)

    def forward(self, q, x):
        b, t, _ = x.shape
        k = self.k(x).view(b, t, self.heads, self.d).permute(0, 2, 1, 3)
        v = self.v(x).view(b, t, self.heads, self.d).permute(0, 2, 1, 3)
        scores = torch.matmul(q, k.transpose(-1, -2)) * (self.d ** -0.5)
        out = torch.matmul(torch.softmax(scores, dim=-1), v)
        return out.permute(0, 2, 1, 3).reshape(b, t, -1)


def test_a_query_without_a_permute(export_model, backend, rng):
    torch.manual_seed(0)
    net = QueryGiven().eval()
    q = rng.standard_normal((2, 3, 19, 16)).astype(np.float32)
    x = rng.standard_normal((2, 19, 48)).astype(np.float32)
    path = export_model("attention_query_given", net, (torch.from_numpy(q), torch.from_numpy(x)))
    graph = kuiper.load(path, backend=backend)
    if chain(graph):
        fused = next(op for op in graph.plan.steps if op.type == FUSED)
        assert "q_perm" not in fused.params and "o_perm" in fused.params, fused.params
    with torch.no_grad():
        expected = net(torch.from_numpy(q), torch.from_numpy(x)).numpy()
    assert_close(graph(q, x), expected, what=f"attention with a given query on {backend}")
