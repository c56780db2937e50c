"""The digits demo: classify 360 held-out handwritten digits with Kuiper, check against PyTorch.

What it shows a newcomer, in one command and without PyTorch installed:
1. a real model (exported from PyTorch by pnnx) loads and runs on NumPy or OpenCL;
2. it is *right*: accuracy on data it never saw in training;
3. it is *the same model*: Kuiper's logits match the logits PyTorch computed when the model was
   trained (stored in digits_test.npz), sample by sample. That second check is the one that
   matters for an inference engine: any bug in a layer shows up as a logit difference long
   before it changes a prediction.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from typing import TextIO

import numpy as np

from kuiper.core.errors import KuiperError
from kuiper.demo import DIGITS_PARAM, DIGITS_TEST
from kuiper.graph.load import load
from kuiper.testing import max_abs_diff, tolerance

# Grey levels from white paper to black ink, two characters per pixel so digits are not squashed
# (terminal cells are about twice as tall as they are wide).
UNICODE_SHADES = " ░▒▓█"
ASCII_SHADES = " .:+#"


def shades_for(stream: TextIO) -> str:
    """Block characters when the terminal's encoding has them, ASCII otherwise."""
    encoding = getattr(stream, "encoding", None) or "ascii"
    try:
        UNICODE_SHADES.encode(encoding)
        return UNICODE_SHADES
    except (UnicodeEncodeError, LookupError):
        return ASCII_SHADES


def render_digit(image: np.ndarray, shades: str = UNICODE_SHADES) -> list[str]:
    """An H x W image with values in [0, 1] as H lines of 2*W characters."""
    levels = np.clip(np.rint(np.asarray(image) * (len(shades) - 1)), 0, len(shades) - 1)
    return ["".join(shades[int(v)] * 2 for v in row) for row in levels.astype(int)]


def render_row(images: Sequence[np.ndarray], captions: Sequence[Sequence[str]],
               shades: str = UNICODE_SHADES, gap: int = 3) -> str:
    """Several digits side by side, each with caption lines under it."""
    pictures = [render_digit(img, shades) for img in images]
    width = max(len(p[0]) for p in pictures)
    width = max([width] + [len(c) for caps in captions for c in caps])
    lines = []
    for r in range(len(pictures[0])):
        lines.append((" " * gap).join(p[r].ljust(width) for p in pictures).rstrip())
    for c in range(max(len(caps) for caps in captions)):
        lines.append((" " * gap).join((caps[c] if c < len(caps) else "").ljust(width)
                                      for caps in captions).rstrip())
    return "\n".join(lines)


def pick_examples(predictions: np.ndarray, labels: np.ndarray, count: int) -> list[int]:
    """The first `count` samples, but make room for up to two mistakes if there are any:
    seeing what the model gets wrong (and why it is forgivable) teaches more than ten hits."""
    wrong = [int(i) for i in np.flatnonzero(predictions != labels)[:min(2, count // 2)]]
    right = [i for i in range(len(labels)) if i not in wrong][:count - len(wrong)]
    return sorted(right + wrong)


def load_test_split() -> dict[str, np.ndarray]:
    if not DIGITS_TEST.exists() or not DIGITS_PARAM.exists():
        raise KuiperError(f"the demo files are missing from {DIGITS_TEST.parent}: reinstall "
                          "kuiper, or recreate them with "
                          "`python -m kuiper.demo.train_digits`")
    with np.load(DIGITS_TEST, allow_pickle=False) as data:
        return {key: data[key] for key in data.files}


def run_demo(backend: str = "cpu", device: str | None = None, show: int = 6,
             out: TextIO | None = None) -> int:
    """Run the demo; returns the exit status (0 when Kuiper agrees with PyTorch everywhere)."""
    out = out or sys.stdout
    data = load_test_split()
    images, labels = data["images"], data["labels"]
    torch_logits, torch_predictions = data["logits"], data["predictions"]

    options = {"device": device} if backend == "opencl" and device else {}
    start = time.perf_counter()
    # Exported at batch 1; building at the test split's batch size runs all of it at once.
    graph = load(DIGITS_PARAM, backend=backend, input_shapes=[images.shape], **options)
    load_s = time.perf_counter() - start
    where = "NumPy" if backend == "cpu" else graph.executor.runtime.name
    print(f"Kuiper demo: handwritten digits (scikit-learn's 8x8 digits), {DIGITS_PARAM.name}",
          file=out)
    print(f"backend: {backend} ({where}), model loaded and built in {load_s * 1e3:.0f} ms",
          file=out)
    if graph.fallbacks:
        print("note: no OpenCL layer yet for " + ", ".join(sorted({op.type for op in
              graph.fallbacks})) + ": those operators run on the CPU", file=out)

    start = time.perf_counter()
    logits = graph.forward(images)[0]
    run_s = time.perf_counter() - start
    predictions = np.asarray(logits).argmax(axis=1)
    correct = int((predictions == labels).sum())
    print(f"classified {len(labels)} held-out digits in {run_s * 1e3:.1f} ms: accuracy "
          f"{correct / len(labels):.2%} ({correct}/{len(labels)})", file=out)

    if show > 0:
        picks = pick_examples(predictions, labels, show)
        captions = [[f"kuiper: {predictions[i]}",
                     f"label:  {labels[i]}" + ("  (wrong)" if predictions[i] != labels[i]
                                               else "")] for i in picks]
        print(file=out)
        print(render_row([images[i, 0] for i in picks], captions, shades_for(out)), file=out)
        print(file=out)

    same = int((predictions == torch_predictions).sum())
    diff = max_abs_diff(logits, torch_logits)
    tol = tolerance(torch_logits)
    print(f"agreement with PyTorch: {same}/{len(labels)} predictions identical, "
          f"max |logit difference| {diff:.2e} (tolerance {tol:.1e})", file=out)
    if same != len(labels) or not diff <= tol:
        bad = np.flatnonzero(predictions != torch_predictions)[:10].tolist()
        print(f"FAILED: Kuiper and PyTorch disagree (samples {bad or 'none'}; logit "
              f"difference {diff:.3g} vs tolerance {tol:.3g}); `kuiper compare "
              f"{DIGITS_PARAM}` shows which operator goes wrong first", file=out)
        return 1
    print("OK: Kuiper and PyTorch agree on every sample", file=out)
    return 0
