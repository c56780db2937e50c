"""Lesson 16: the online softmax against the two-pass softmax, and a fused attention's tile
loop against PyTorch, on its own and inside the engine's fused-attention layer."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from kuiper.course.lessons import check_array, implementation

REFERENCE = {
    "online_softmax_update": "kuiper.layers.cpu_helpers.online_softmax:online_softmax_update",
    "streaming_attention": "kuiper.layers.cpu_helpers.online_softmax:streaming_attention",
}
ex = implementation(__file__, REFERENCE)


def start(rows: tuple[int, ...], dv: int):
    """The state before the first block: m = -inf, total = 0, acc = 0."""
    return (np.full(rows, -np.inf, np.float32), np.zeros(rows, np.float32),
            np.zeros(rows + (dv,), np.float32))


def two_pass(scores: np.ndarray, values: np.ndarray) -> np.ndarray:
    """softmax(scores) @ values the usual way, in float64: the max, then the sum, then V."""
    s = scores.astype(np.float64)
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    return (p / p.sum(axis=-1, keepdims=True)) @ values.astype(np.float64)


def fold(scores: np.ndarray, values: np.ndarray, widths: list[int]):
    """Your update over the keys cut into blocks of `widths`; returns the last state."""
    state = start(scores.shape[:-1], values.shape[-1])
    s0 = 0
    for width in widths:
        state = ex.online_softmax_update(*state, scores[..., s0:s0 + width],
                                         values[..., s0:s0 + width, :])
        s0 += width
    return state


def random_widths(rng, total: int) -> list[int]:
    cuts = sorted(rng.choice(np.arange(1, total), size=min(3, total - 1), replace=False))
    return [int(b - a) for a, b in zip([0, *cuts], [*cuts, total])]


# --- online_softmax_update ---------------------------------------------------------------------

def test_one_block_from_the_start_is_the_softmax_of_that_block():
    rng = np.random.default_rng(16)
    scores = rng.standard_normal((2, 5, 7)).astype(np.float32) * 3
    values = rng.standard_normal((2, 7, 3)).astype(np.float32)
    m, total, acc = ex.online_softmax_update(*start((2, 5), 3), scores, values)
    check_array(m, scores.max(axis=-1), "m after one block (the largest score of each row)")
    weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
    check_array(total, weights.sum(axis=-1), "total after one block: sum of e^(s - m)")
    check_array(acc, weights @ values, "acc after one block: e^(s - m) @ values", rtol=1e-5)


def test_the_state_after_each_block_is_relative_to_the_largest_score_so_far():
    rng = np.random.default_rng(17)
    scores = rng.standard_normal((4, 12)).astype(np.float32) * 4
    values = rng.standard_normal((12, 5)).astype(np.float32)
    state = start((4,), 5)
    for b, s0 in enumerate(range(0, 12, 4)):
        state = ex.online_softmax_update(*state, scores[:, s0:s0 + 4], values[s0:s0 + 4])
        seen = scores[:, :s0 + 4]
        m = seen.max(axis=-1)
        weights = np.exp(seen - m[:, None])
        what = f"after block {b + 1} of 3 (keys 0..{s0 + 3})"
        check_array(state[0], m, f"m {what}")
        check_array(state[1], weights.sum(axis=-1), f"total {what} (relative to the new m)")
        check_array(state[2], weights @ values[:s0 + 4], f"acc {what} (relative to the new m)")


def test_a_growing_maximum_rescales_what_was_summed():
    """Block 1 sums e^(0 - 0) twice; block 2's score 10 is larger: block 1's terms must shrink
    by e^(0 - 10), or the first two values keep a weight they no longer have."""
    scores = np.array([[0.0, 0.0, 10.0]], np.float32)
    values = np.array([[1.0], [2.0], [3.0]], np.float32)
    m, total, acc = fold(scores, values, [2, 1])
    check_array(acc / total[:, None], two_pass(scores, values).astype(np.float32),
                "softmax([0, 0 | 10]) @ [1, 2 | 3], the maximum growing in block 2 (did you "
                "multiply total and acc by e^(m - m')?)")


MAGNITUDES = {"tiny": 1e-3, "unit": 1.0, "large": 50.0, "huge": 1e4}


@pytest.mark.parametrize("offset", [0.0, 1e4, -1e4], ids=["centred", "all-high", "all-low"])
@pytest.mark.parametrize("magnitude", list(MAGNITUDES))
def test_random_blocks_match_the_two_pass_softmax(magnitude, offset):
    """e^s overflows float32 above s = 88 and every e^s underflows to 0 below -104: only
    scores relative to the running maximum survive the "huge", "all-high" and "all-low" rows;
    "tiny" scores are almost equal and the weights almost uniform."""
    rng = np.random.default_rng(int(MAGNITUDES[magnitude]) + 16)
    s = rng.standard_normal((3, 6, 29)) * MAGNITUDES[magnitude] + offset
    scores = s.astype(np.float32)
    values = rng.standard_normal((3, 29, 4)).astype(np.float32)
    widths = random_widths(rng, 29)
    m, total, acc = fold(scores, values, widths)
    assert np.isfinite(total).all() and (total >= 1).all(), (
        f"total should be >= 1 (the largest score adds e^0) and finite; got {total.min()} .. "
        f"{total.max()} with scores {magnitude} around {offset} in blocks of {widths}")
    check_array(acc / total[..., None], two_pass(scores, values).astype(np.float32),
                f"softmax @ values from blocks of {widths} keys, scores {magnitude} around "
                f"{offset}", rtol=1e-4)


def test_a_row_whose_first_block_is_all_masked_does_not_become_nan():
    """Row 0 sees only -inf in block 1 (its first keys are masked): m stays -inf, and
    e^(-inf - (-inf)) must not poison the row with NaN."""
    scores = np.array([[-np.inf, -np.inf, 1.0, 2.0], [0.5, -1.0, 1.0, 2.0]], np.float32)
    values = np.arange(8, dtype=np.float32).reshape(4, 2)
    m, total, acc = ex.online_softmax_update(*start((2,), 2), scores[:, :2], values[:2])
    check_array(m[0], np.float32(-np.inf), "m of a row whose block is all -inf")
    check_array(total[0], np.float32(0), "total of a row whose block is all -inf")
    check_array(acc[0], np.zeros(2, np.float32), "acc of a row whose block is all -inf")
    m, total, acc = ex.online_softmax_update(m, total, acc, scores[:, 2:], values[2:])
    want = two_pass(np.where(np.isinf(scores), -1e30, scores), values).astype(np.float32)
    check_array(acc / total[:, None], want, "the rows after their second block")


# --- streaming_attention ---------------------------------------------------------------------

def torch_attention(q, k, v, scale, mask=None):
    t = [torch.from_numpy(a) for a in (q, k, v)]
    m = None if mask is None else torch.from_numpy(mask)
    return F.scaled_dot_product_attention(*t, attn_mask=m, scale=scale).numpy()


SHAPES = [  # (L, S, E, Ev, block)
    (1, 1, 8, 8, 1), (13, 29, 16, 8, 8), (7, 70, 5, 3, 16), (33, 33, 64, 64, 32),
    (5, 70, 12, 20, 100), (16, 64, 32, 32, 64),
]


@pytest.mark.parametrize("length, source, e, ev, block", SHAPES,
                         ids=[f"L{s[0]}-S{s[1]}-E{s[2]}-Ev{s[3]}-block{s[4]}" for s in SHAPES])
def test_streaming_attention_matches_torch(length, source, e, ev, block):
    rng = np.random.default_rng(length * 100 + source)
    q = rng.standard_normal((2, 3, length, e)).astype(np.float32)
    k = rng.standard_normal((2, 3, source, e)).astype(np.float32)
    v = rng.standard_normal((2, 3, source, ev)).astype(np.float32)
    scale = 1 / np.sqrt(e)
    got = ex.streaming_attention(q, k, v, scale, block)
    check_array(got, torch_attention(q, k, v, scale), f"attention, L={length} S={source} "
                f"E={e} Ev={ev}, blocks of {block} keys", rtol=1e-5)


def test_streaming_attention_broadcasts_batch_dims_and_takes_a_mask():
    """One K/V for every head (batch dims that broadcast), a causal mask as -inf."""
    rng = np.random.default_rng(18)
    q = rng.standard_normal((2, 4, 21, 16)).astype(np.float32)
    k = rng.standard_normal((2, 1, 21, 16)).astype(np.float32)
    v = rng.standard_normal((1, 1, 21, 8)).astype(np.float32)
    mask = np.triu(np.full((21, 21), -np.inf, np.float32), 1)   # query i sees keys 0..i
    got = ex.streaming_attention(q, k, v, 0.25, 8, mask)
    check_array(got, torch_attention(q, k, v, 0.25, mask), "causal attention, blocks of 8 "
                "keys, K and V shared by every head", rtol=1e-5)


def test_large_scores_do_not_overflow():
    rng = np.random.default_rng(19)
    q = rng.standard_normal((1, 9, 8)).astype(np.float32) * 100
    k = rng.standard_normal((1, 40, 8)).astype(np.float32) * 100
    v = rng.standard_normal((1, 40, 4)).astype(np.float32)
    got = ex.streaming_attention(q, k, v, 1.0, 16)
    check_array(got, torch_attention(q, k, v, 1.0), "attention with scores in the "
                "thousands (e^s overflows float32 past 88)", rtol=1e-4)


def test_streaming_attention_never_holds_more_than_a_block_of_scores(monkeypatch):
    """Every call of online_softmax_update sees at most `block` keys, and together they see
    each key once: the (L, S) score matrix never exists."""
    seen = []
    update = ex.online_softmax_update

    def spy(m, total, acc, scores, values):
        seen.append(scores.shape[-1])
        return update(m, total, acc, scores, values)

    monkeypatch.setitem(ex.streaming_attention.__globals__, "online_softmax_update", spy)
    rng = np.random.default_rng(20)
    q, k = rng.standard_normal((2, 11, 8), dtype=np.float32), rng.standard_normal(
        (2, 50, 8), dtype=np.float32)
    v = rng.standard_normal((2, 50, 3), dtype=np.float32)
    got = ex.streaming_attention(q, k, v, 0.3, 16)
    assert seen == [16, 16, 16, 2], (
        f"streaming_attention should call online_softmax_update once per block of 16 of the "
        f"50 keys ([16, 16, 16, 2] keys); its calls saw {seen} keys")
    check_array(got, torch_attention(q, k, v, 0.3), "attention in blocks of 16", rtol=1e-5)


def test_your_loop_inside_the_real_fused_attention_layer(monkeypatch):
    """The CPU layer of `kuiper.fused_attention` (what the fuse_attention pass makes of an
    attention written out by hand) runs YOUR streaming_attention, here 16 keys at a time,
    with a BERT-style additive mask (-10000 on padding keys)."""
    from kuiper.layers.cpu import attention
    from kuiper.testing import run_operator

    calls = []

    def yours(*args):
        calls.append(args[3:5])
        return ex.streaming_attention(*args)

    monkeypatch.setattr(attention, "streaming_attention", yours)
    monkeypatch.setattr(attention, "KEY_BLOCK", 16)
    rng = np.random.default_rng(21)
    q = rng.standard_normal((2, 4, 19, 16)).astype(np.float32)
    kt = rng.standard_normal((2, 4, 16, 45)).astype(np.float32)   # K^T, as the model has it
    v = rng.standard_normal((2, 4, 45, 8)).astype(np.float32)
    mask = np.zeros((2, 1, 1, 45), np.float32)
    mask[1, ..., 30:] = -10000.0
    (got,) = run_operator(attention.FUSED_TYPE, [q, kt, v, mask],
                          params={"scale": 0.25, "masked": True})
    assert calls == [(0.25, 16)], f"the layer should call streaming_attention once, with " \
        f"scale 0.25 and blocks of 16; it called {calls}"
    want = torch_attention(q, np.swapaxes(kt, -1, -2).copy(), v, 0.25, mask)
    check_array(got, want, "the fused-attention layer's output with your loop", rtol=1e-5)
