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

import logging
from typing import Any

from kuiper.layers.opencl_conv import algorithms
from kuiper.layers.opencl_gemm import selection

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
from kuiper.layers.opencl_gemm.selection import (  # noqa: F401 - pinned: for kuiper tune
    COST_MODEL,
    FORCED,
    TUNED,
    matching,
    pinned,
)
from kuiper.opencl.device import tuning_cache

logger = logging.getLogger(__name__)

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
    chosen = selection.PINNED
    if chosen is not None and chosen[0] in able:
        return able[chosen[0]], chosen[1], FORCED
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


def why_not(name: str, problem: ConvProblem, device: Any) -> str:
    algo = ALGORITHMS.get(name)
    if algo is None:
        return f"no algorithm is registered under that name (known: {', '.join(ALGORITHMS)})"
    return algo.unsupported(problem, device) or "it can"


def conv_algorithms_error(problem: ConvProblem):
    from kuiper.core.errors import KuiperError

    return KuiperError(f"no registered convolution algorithm can run {problem.key} (known: "
                       f"{', '.join(ALGORITHMS) or 'none'})")
