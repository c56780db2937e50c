"""The end of an OpenCL build where kernels compile at their first launch (PoCL).

PoCL compiles each kernel when it is first launched with a given work-group size: LLVM's
optimiser and code generator, 0.2 to 5 s per kernel on the 2-core test machine, most of a cold
first run. Left to the first inference, that makes the first inference the slow one, with no
progress shown, and times such as `kuiper compare`'s "opencl ms" count it. So the executor ends
such a build with one run on zeros (`warm_up`), each operator waited for, its progress counted;
with a warm cache it costs one inference (PoCL finds each kernel compiled in its cache).

On a cold cache, the runtime's JIT helpers (kuiper/opencl/device/jit_helper.py: other
processes) compile the kernels of each step as soon as it is bound (`offer_to_helpers`), while
this process binds the rest; the warm-up takes back what no helper has started.
"""

from __future__ import annotations

import logging
import warnings
from typing import Any

import numpy as np

from kuiper.layers.opencl_base import Steps

logger = logging.getLogger("kuiper.opencl.execution.executor")


def _launches(runner: Any) -> list:
    """A step's launches, a recurrence's Steps opened up (each of its kernels once: the step
    number is an argument, the compiled kernel the same for every step)."""
    flat = []
    for item in getattr(runner, "launches", None) or ():
        flat.extend(item.launches if isinstance(item, Steps) else [item])
    return flat


def offer_to_helpers(executor: Any, runner: Any) -> None:
    """The kernels of a step just bound, to the runtime's JIT helpers (once they have started,
    which the first real compile does, the steps bound before are offered too)."""
    helpers = executor.runtime.jit_helpers()
    if helpers is None:
        return
    if not executor._offered:
        for _, earlier in executor.steps[:-1]:
            helpers.offer(_launches(earlier))
        executor._offered = True
    helpers.offer(_launches(runner))


def warm_up(executor: Any, advance) -> None:
    """One run on zeros, each operator waited for (so that the progress moves as PoCL compiles
    each kernel), results dropped. Zeros, not whatever the fresh buffers hold: an index read
    from garbage (gather, embedding) would run past its tensor. A failure here is left for the
    real run to report, with the real inputs."""
    graph = executor.graph
    zeros = [np.zeros(spec.shape, spec.dtype) for spec in
             (graph.specs[op.outputs[0].name] for op in graph.input_ops)]
    queue = executor.runtime.queue
    skipped = executor._operators() - len(executor.steps)
    helpers = executor.runtime.jit_helpers()

    def before_step(runner):  # what a helper has not started is this process's to compile
        if helpers is not None:
            helpers.claim(_launches(runner))

    def after_step():
        queue.finish()
        advance(1)

    try:
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a host layer's log(0) on made-up data
            executor.run(zeros, _hooks=(before_step, after_step))
    except Exception as e:  # noqa: BLE001 - see the docstring
        logger.debug("the warm-up run stopped (%s: %s); the first run compiles the rest",
                     type(e).__name__, e)
    advance(skipped)  # folded and fused operators: nothing to run
