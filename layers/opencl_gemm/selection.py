"""Which GEMM parameter set runs a weight GEMM (a linear layer, a transposed convolution's, an
attention projection's): the one `kuiper tune` pinned while it times candidates, else the tuning
cache's winner for this shape on this device and driver, else the cost model's cheapest
(cost.py). The convolution selector (layers/opencl_conv/selector.py) follows the same three
rules and shares `pinned`.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import Any

from kuiper.layers.opencl_gemm.cost import ranked_gemm_params
from kuiper.opencl.device import tuning_cache

FORCED, TUNED, COST_MODEL = "forced", "tuned", "cost model"

# (algorithm name, params) that `pinned` sets: `kuiper tune` binds each candidate with it.
PINNED: tuple[str, dict] | None = None


@contextlib.contextmanager
def pinned(name: str, params: dict) -> Iterator[None]:
    """Bind the layers inside the block with exactly this algorithm ("gemm" for a weight GEMM)
    and parameter set."""
    global PINNED
    old, PINNED = PINNED, (name, dict(params))
    try:
        yield
    finally:
        PINNED = old


def matching(stored: Any, parameter_sets: list[dict]) -> dict | None:
    """The parameter set equal to `stored` (as read back from JSON: tuples became lists), or
    None when this version no longer has it (a cache may outlive an upgrade)."""
    for params in parameter_sets:
        if json.loads(json.dumps(params)) == stored:
            return params
    return None


def select_gemm(device: Any, m: int, n: int, k: int, z: int = 1, trans_a: bool = False,
                trans_b: bool = False, packed_b: bool = False, precision: str = "fp32",
                split: bool = False) -> tuple[dict, str]:
    """(gemm.h parameter set, reason) for one weight GEMM: tuned, else the cost model's.
    `packed_b`: B will be stored in gemm_blocked's strips if that family runs it.
    `precision`: the plan's for the layer; "tf32" / "fp16" let the tensor-core sets compete
    where the device has them, and are part of the tuning cache's key. `split`: the caller
    runs split-K sets too (launch.linear_gemm_launches), at any precision."""
    if PINNED is not None and PINNED[0] == "gemm":
        return PINNED[1], FORCED
    ranked = ranked_gemm_params(device, m, n, k, z, trans_a, trans_b, packed_b,
                                precision=precision, split=split)
    entry = tuning_cache.lookup(device, tuning_cache.gemm_key(m, n, k, z, trans_a, trans_b,
                                                              precision))
    if entry is not None and entry["algorithm"] == "gemm":
        params = matching(entry.get("params"), ranked)
        if params is not None:
            return params, TUNED
    return ranked[0], COST_MODEL
