"""`kuiper demo`: a small CNN trained on handwritten digits, shipped with the package.

The model files and the test split beside this module are package data; `train_digits.py`
recreates them (it needs torch, pnnx and scikit-learn; running the demo needs only NumPy).
"""

from __future__ import annotations

from pathlib import Path

DEMO_DIR = Path(__file__).resolve().parent
DIGITS_PARAM = DEMO_DIR / "digits.pnnx.param"
DIGITS_TEST = DEMO_DIR / "digits_test.npz"
