"""The kernel selector: which algorithm, with which parameters, runs each OpenCL convolution.

clDNN's idea, in three rules, checked in this order for every layer at bind time:

1. "forced": a test (or `kuiper tune`, timing candidates) asked for an algorithm by name,
   `algorithms.forced(name)`, or for an exact (algorithm, params) pair, `pinned(...)`.
   A forced algorithm that cannot run the problem falls through to the rules below.
2. "tuned": the tuning cache (kuiper/opencl/device/tuning_cache.py) holds a winner that
   `kuiper tune` measured on this device and driver for this exact shape.
3. "cost model": the cheapest of the algorithms that can run the problem by their own
   estimate (`ConvAlgorithm.cost`: a roofline with a per-algorithm efficiency), with that
   algorithm's favourite parameter set (the first of `parameter_sets`).

The algorithms live in their own modules and register themselves when imported
(algorithms.py's `@register_algorithm`); the imports below are what fills ALGORITHMS.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Iterator
from typing import Any

from kuiper.layers.opencl_conv import algorithms

# isort: off
# Importing each module registers its algorithms, in this order: on equal costs the first wins.
# im2col_gemm.py: im2col_gemm, gemm_1x1, depthwise_direct; winograd.py: the F(4x4) and F(2x2)
from kuiper.layers.opencl_conv import im2col_gemm  # noqa: F401,E402
from kuiper.layers.opencl_conv import winograd  # noqa: F401,E402
from kuiper.layers.opencl_conv import depthwise  # noqa: F401,E402
from kuiper.layers.opencl_conv import implicit_gemm  # noqa: F401,E402
from kuiper.layers.opencl_conv import split_k  # noqa: F401,E402
from kuiper.layers.opencl_conv import direct  # noqa: F401,E402
# isort: on
from kuiper.layers.opencl_conv.algorithms import ALGORITHMS, ConvAlgorithm, ConvProblem
from kuiper.opencl.device import tuning_cache

logger = logging.getLogger(__name__)

FORCED, TUNED, COST_MODEL = "forced", "tuned", "cost model"

# (algorithm name, params) that `pinned` sets: `kuiper tune` binds each candidate with it.
PINNED: tuple[str, dict] | None = None


@contextlib.contextmanager
def pinned(name: str, params: dict) -> Iterator[None]:
    """Bind the convolutions inside the block with exactly this algorithm and parameter set."""
    global PINNED
    old, PINNED = PINNED, (name, dict(params))
    try:
        yield
    finally:
        PINNED = old


def candidates(problem: ConvProblem, device: Any) -> dict[str, ConvAlgorithm]:
    """The registered algorithms that can run `problem` on `device`, by name."""
    return {name: algo for name, algo in ALGORITHMS.items()
            if algo.unsupported(problem, device) is None}


def by_cost(problem: ConvProblem, device: Any) -> list[tuple[float, ConvAlgorithm]]:
    """(estimated seconds, algorithm) of every candidate, cheapest first."""
    costs = [(algo.cost(problem, device), algo) for algo in candidates(problem, device).values()]
    return sorted(costs, key=lambda pair: pair[0])


def select(layer: Any, problem: ConvProblem, device: Any) -> tuple[ConvAlgorithm, dict, str]:
    """(algorithm, params, reason) for one convolution; reason is FORCED, TUNED or COST_MODEL.
    `layer` is the OpenCL layer being bound (for the log)."""
    able = candidates(problem, device)
    if PINNED is not None and PINNED[0] in able:
        return able[PINNED[0]], PINNED[1], FORCED
    if algorithms.FORCE is not None:
        algo = able.get(algorithms.FORCE)
        if algo is not None:
            return algo, algo.parameter_sets(problem, device)[0], FORCED
        logger.debug("%s: forced algorithm %s cannot run it (%s): cost model", layer.name,
                     algorithms.FORCE, why_not(algorithms.FORCE, problem, device))
    entry = tuning_cache.lookup(device, tuning_cache.conv_key(problem))
    if entry is not None and entry["algorithm"] in able:
        algo = able[entry["algorithm"]]
        params = matching(entry.get("params", {}), algo.parameter_sets(problem, device))
        if params is not None:
            return algo, params, TUNED
    ranked = by_cost(problem, device)
    if not ranked:  # im2col_gemm runs everything: only a broken registry gets here
        raise conv_algorithms_error(problem)
    algo = ranked[0][1]
    return algo, algo.parameter_sets(problem, device)[0], COST_MODEL


def matching(stored: Any, parameter_sets: list[dict]) -> dict | None:
    """The parameter set equal to `stored` (as read back from JSON: tuples became lists), or
    None when this version no longer has it (a cache may outlive an upgrade)."""
    for params in parameter_sets:
        if json.loads(json.dumps(params)) == stored:
            return params
    return None


def why_not(name: str, problem: ConvProblem, device: Any) -> str:
    algo = ALGORITHMS.get(name)
    if algo is None:
        return f"no algorithm is registered under that name (known: {', '.join(ALGORITHMS)})"
    return algo.unsupported(problem, device) or "it can"


def conv_algorithms_error(problem: ConvProblem):
    from kuiper.core.errors import KuiperError

    return KuiperError(f"no registered convolution algorithm can run {problem.key} (known: "
                       f"{', '.join(ALGORITHMS) or 'none'})")


# --- a linear layer's (or any weight GEMM's) parameter set --------------------------------------
def select_gemm(device: Any, m: int, n: int, k: int, z: int = 1, trans_a: bool = False,
                trans_b: bool = False) -> tuple[dict, str]:
    """(gemm.h parameter set, reason) for one weight GEMM: tuned, else the cost model's."""
    from kuiper.layers.opencl_gemm.cost import ranked_gemm_params

    if PINNED is not None and PINNED[0] == "gemm":
        return PINNED[1], FORCED
    ranked = ranked_gemm_params(device, m, n, k, z, trans_a, trans_b)
    entry = tuning_cache.lookup(device, tuning_cache.gemm_key(m, n, k, z, trans_a, trans_b))
    if entry is not None and entry["algorithm"] == "gemm":
        params = matching(entry.get("params"), ranked)
        if params is not None:
            return params, TUNED
    return ranked[0], COST_MODEL
