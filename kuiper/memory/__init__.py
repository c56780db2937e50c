"""The memory planner: lifetimes of the tensors of one inference, strategies that place them in
shared memory, and the report `kuiper info --memory` prints.

    tensors = operand_lifetimes(steps, specs, inputs, outputs, views)   # lifetimes.py
    p = plan(tensors, "greedy_by_size", alignment=128)                 # strategies.py
    p.offsets["12"], p.total, p.lower_bound

The OpenCL executor carves its operands out of the planned blocks
(kuiper/opencl/execution/device_memory.py); the CPU executor gives the layers that can write into a
given array a view of one NumPy arena.
"""

from kuiper.memory.lifetimes import Lifetime, lower_bound, operand_lifetimes, spec_bytes
from kuiper.memory.plan_memory import plan_memory
from kuiper.memory.strategies import (
    DEFAULT_STRATEGY,
    STRATEGIES,
    MemoryPlanError,
    Plan,
    check_strategy,
    conflicts,
    plan,
)

__all__ = ["DEFAULT_STRATEGY", "STRATEGIES", "Lifetime", "Plan", "MemoryPlanError",
           "check_strategy", "conflicts", "lower_bound", "operand_lifetimes", "plan",
           "plan_memory", "spec_bytes"]
