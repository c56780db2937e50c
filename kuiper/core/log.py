"""Kuiper's logger and its warning class: how the engine tells you what it is doing.

- `logging.getLogger("kuiper")` (and its children, one per module:
  "kuiper.opencl.execution.executor") carries status lines such as "building OpenCL kernels for
  12 operators...". A library must not print on its own, so the logger has only a NullHandler:
  nothing shows until the
  application configures logging, e.g. `logging.basicConfig(level=logging.INFO)` (the CLI's
  -v/-q do that for you).
- `KuiperWarning` is what `warnings.warn` raises for things that work but may not be what you
  want, such as operators that fall back to the host on OpenCL. Python shows a warning once
  per place by default; turn them into errors with `warnings.simplefilter("error",
  kuiper.KuiperWarning)`, or silence them with "ignore".
"""

from __future__ import annotations

import importlib.util
import logging
import os
import sys
import warnings

logger = logging.getLogger("kuiper")
logger.addHandler(logging.NullHandler())


class KuiperWarning(UserWarning):
    """Something works, but probably not as you expect (a host fallback on OpenCL, say)."""


def _engine_folders() -> tuple[str, ...]:
    """The folders of Kuiper's own code: kuiper/ and the checkout's layers/ and parser/ (found,
    not imported: this module sits on a floor below the layers)."""
    folders = [os.path.dirname(os.path.abspath(sys.modules["kuiper"].__file__))]
    for name in ("kuiper.layers", "kuiper.parser"):
        spec = importlib.util.find_spec(name)
        folders += [os.path.abspath(p) for p in (spec.submodule_search_locations or [])]
    return tuple(folder + os.sep for folder in folders)


def warn(message: str) -> None:
    """warnings.warn(message, KuiperWarning), attributed to the first caller outside Kuiper.

    A warning points at a file and line; the useful one is the user's `kuiper.load(...)` or
    `graph(x)`, not the executor line that noticed the problem (Python 3.12's
    skip_file_prefixes does the same; Kuiper supports 3.10 and 3.11)."""
    folders = _engine_folders()
    level, frame = 1, sys._getframe(1)
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(folders):
        level, frame = level + 1, frame.f_back
    warnings.warn(message, KuiperWarning, stacklevel=level + 1)
