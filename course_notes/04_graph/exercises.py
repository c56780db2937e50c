"""Lesson 4 exercises: put a graph's operators in an order where producers run first.

Fill in the functions, then run `kuiper course check 4`. You may use `successors(op)` and
`predecessors(op)` from kuiper.graph.topo (the distinct consumers / producers of an operator):
import them, and leave kuiper/graph/topo.py closed until yours pass, since that file also holds
the answers, `dfs_iterative` and `level_schedule`.
"""

from __future__ import annotations

from collections.abc import Sequence

from kuiper.core.errors import GraphError  # noqa: F401 - raise it for a cycle
from kuiper.core.ir import RuntimeOperator
from kuiper.graph.topo import predecessors, successors  # noqa: F401 - your building blocks


def dfs_iterative(ops: Sequence[RuntimeOperator]) -> list[RuntimeOperator]:
    """A topological order of `ops`: reverse post-order of a depth-first search, WITHOUT
    recursion (a 20,000-operator chain must not hit Python's recursion limit).

    Start from the roots (operators with no producers), then from any operator not visited
    yet (a cycle can hide operators from every root). Keep an explicit stack of
    (operator, iterator over its successors). Colour operators white (not seen), grey (on the
    stack) and black (finished); meeting a grey operator again means a cycle: raise GraphError
    with the names of the operators on it.
    """
    raise NotImplementedError("lesson 4: write dfs_iterative")


def level_schedule(ops: Sequence[RuntimeOperator]) -> list[list[RuntimeOperator]]:
    """Operators grouped in levels: level 0 is every operator with no producers; level k+1 is
    every operator whose producers are all in levels 0..k. Operators of one level do not depend
    on each other (they may run concurrently).

    Count, for each operator, how many distinct producers it still waits for; peel off the ones
    at zero, decrement their successors, repeat. If some operators never reach zero, the graph
    has a cycle: raise GraphError naming them.
    """
    raise NotImplementedError("lesson 4: write level_schedule")
