"""`--json`: one JSON document on stdout, for scripts (`kuiper info m.pnnx.param --json | jq`).

With --json a command builds a plain dict and prints it with `emit`; its human text is not
printed at all, so stdout parses as JSON. Warnings and errors still go to stderr.
NumPy scalars and tuples are converted, and non-finite floats become null (JSON has no NaN).
"""

from __future__ import annotations

import json
import math
import sys

import numpy as np


def plain(value):
    """`value` with NumPy types, tuples and non-finite floats made JSON-friendly."""
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, np.ndarray):
        return plain(value.tolist())
    if isinstance(value, np.generic):
        return plain(value.item())
    if isinstance(value, np.dtype):
        return value.name
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def emit(document: dict) -> None:
    json.dump(plain(document), sys.stdout, indent=2)
    sys.stdout.write("\n")


def add_json_option(p) -> None:
    p.add_argument("--json", action="store_true",
                   help="print one JSON document on stdout instead of the text")


def port_dict(port) -> dict:
    return {"name": port.name, "shape": list(port.shape), "dtype": np.dtype(port.dtype).name}
