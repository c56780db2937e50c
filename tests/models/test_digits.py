"""The demo model shipped in kuiper/demo: Kuiper reproduces PyTorch's logits on the whole test
split (stored in digits_test.npz when the model was trained), on both backends."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import kuiper
from kuiper.tools.testing import assert_close

pytestmark = pytest.mark.slow

DEMO = Path(kuiper.__file__).resolve().parent / "demo"
PARAM, DATA = DEMO / "digits.pnnx.param", DEMO / "digits_test.npz"
needs_demo = pytest.mark.skipif(not (PARAM.exists() and DATA.exists()),
                                reason="kuiper/tools/demo/digits.* not built yet "
                                       "(python -m kuiper.tools.demo.train_digits)")


@needs_demo
def test_digits_logits_match_torch(backend):
    data = np.load(DATA)
    graph = kuiper.load(PARAM, backend=backend)
    logits = graph(data["images"])  # exported at batch 1, run at the whole split at once
    assert_close(logits, data["logits"], what=f"digits logits on {backend}")
    np.testing.assert_array_equal(logits.argmax(1), data["predictions"])
    assert (data["predictions"] == data["labels"]).mean() > 0.9  # the demo model is trained


@needs_demo
def test_digits_one_image_at_a_time(backend):
    data = np.load(DATA)
    graph = kuiper.load(PARAM, backend=backend)
    for k in (0, 1, 359):
        assert_close(graph(data["images"][k:k + 1]), data["logits"][k:k + 1],
                     what=f"digits sample {k} on {backend}")
