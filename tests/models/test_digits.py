"""The demo model shipped in kuiper/demo: Kuiper reproduces PyTorch's logits on the whole test
split (stored in digits_test.npz when the model was trained), on both backends."""

from __future__ import annotations

import numpy as np
import pytest

import kuiper
from kuiper.demo import DIGITS_PARAM as PARAM
from kuiper.demo import DIGITS_TEST as DATA
from kuiper.testing import assert_close

pytestmark = pytest.mark.slow


def test_digits_logits_match_torch(backend):
    data = np.load(DATA)
    graph = kuiper.load(PARAM, backend=backend)
    logits = graph(data["images"])  # exported at batch 1, run at the whole split at once
    assert_close(logits, data["logits"], what=f"digits logits on {backend}")
    np.testing.assert_array_equal(logits.argmax(1), data["predictions"])
    assert (data["predictions"] == data["labels"]).mean() > 0.9  # the demo model is trained


def test_digits_one_image_at_a_time(backend):
    data = np.load(DATA)
    graph = kuiper.load(PARAM, backend=backend)
    for k in (0, 1, 359):
        assert_close(graph(data["images"][k:k + 1]), data["logits"][k:k + 1],
                     what=f"digits sample {k} on {backend}")
