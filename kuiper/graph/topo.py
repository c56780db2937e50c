"""Three ways to put a graph's operators in an order where producers run before consumers.

1. `dfs_recursive`: KuiperInfer's reverse post-order. Visit an operator, then (recursively) every
   operator that consumes its outputs; append it to a list once all of those are done; reverse.
2. `dfs_iterative`: the same order without recursion, with an explicit stack of
   (operator, iterator over its consumers) so a 10,000-operator chain does not hit Python's
   recursion limit.
3. `level_schedule`: the OCL-ENGINE schedule. Level 0 is every operator with no unfinished input;
   remove them; the next level is every operator whose inputs are now all produced; repeat.
   Operators in one level do not depend on each other and may run concurrently.

All three raise `GraphError` naming the operators on a cycle.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence

from kuiper.core.errors import GraphError
from kuiper.core.ir import RuntimeOperator


def successors(op: RuntimeOperator) -> list[RuntimeOperator]:
    """Distinct consumers of `op`'s outputs, in a stable order."""
    seen: dict[int, RuntimeOperator] = {}
    for operand in op.outputs:
        for consumer in operand.consumers:
            seen.setdefault(id(consumer), consumer)
    return list(seen.values())


def predecessors(op: RuntimeOperator) -> list[RuntimeOperator]:
    """Distinct producers of `op`'s inputs (an operand consumed twice counts once)."""
    seen: dict[int, RuntimeOperator] = {}
    for operand in op.inputs:
        if operand.producer is not None:
            seen.setdefault(id(operand.producer), operand.producer)
    return list(seen.values())


def _roots(ops: Sequence[RuntimeOperator]) -> list[RuntimeOperator]:
    return [op for op in ops if not predecessors(op)]


def _cycle_error(path: list[RuntimeOperator], again: RuntimeOperator) -> GraphError:
    start = next(i for i, op in enumerate(path) if op is again)
    names = " -> ".join(op.name for op in path[start:] + [again])
    return GraphError(f"the graph has a cycle: {names}")


WHITE, GRAY, BLACK = 0, 1, 2  # not visited, on the current path, finished


def dfs_recursive(ops: Sequence[RuntimeOperator]) -> list[RuntimeOperator]:
    color = {id(op): WHITE for op in ops}
    post: list[RuntimeOperator] = []
    path: list[RuntimeOperator] = []

    def visit(op: RuntimeOperator) -> None:
        color[id(op)] = GRAY
        path.append(op)
        for nxt in successors(op):
            if color[id(nxt)] == GRAY:
                raise _cycle_error(path, nxt)
            if color[id(nxt)] == WHITE:
                visit(nxt)
        path.pop()
        color[id(op)] = BLACK
        post.append(op)

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 2 * len(ops) + 100))
    try:
        for op in _roots(ops) + list(ops):  # roots first; then anything a cycle hid from them
            if color[id(op)] == WHITE:
                visit(op)
    finally:
        sys.setrecursionlimit(limit)
    post.reverse()
    return post


def dfs_iterative(ops: Sequence[RuntimeOperator]) -> list[RuntimeOperator]:
    color = {id(op): WHITE for op in ops}
    post: list[RuntimeOperator] = []
    for root in _roots(ops) + list(ops):
        if color[id(root)] != WHITE:
            continue
        # Each stack entry is an operator and the iterator over the consumers still to visit:
        # exactly what a recursive call keeps in its frame.
        stack: list[tuple[RuntimeOperator, Iterator[RuntimeOperator]]] = [
            (root, iter(successors(root)))]
        color[id(root)] = GRAY
        while stack:
            op, children = stack[-1]
            nxt = next(children, None)
            if nxt is None:
                stack.pop()
                color[id(op)] = BLACK
                post.append(op)
            elif color[id(nxt)] == GRAY:
                raise _cycle_error([s[0] for s in stack], nxt)
            elif color[id(nxt)] == WHITE:
                color[id(nxt)] = GRAY
                stack.append((nxt, iter(successors(nxt))))
    post.reverse()
    return post


def level_schedule(ops: Sequence[RuntimeOperator]) -> list[list[RuntimeOperator]]:
    waiting = {id(op): len(predecessors(op)) for op in ops}
    level = [op for op in ops if waiting[id(op)] == 0]
    levels: list[list[RuntimeOperator]] = []
    done = 0
    while level:
        levels.append(level)
        done += len(level)
        following: list[RuntimeOperator] = []
        for op in level:
            for nxt in successors(op):
                waiting[id(nxt)] -= 1
                if waiting[id(nxt)] == 0:
                    following.append(nxt)
        level = following
    if done != len(ops):
        stuck = [op.name for op in ops if waiting[id(op)] > 0]
        raise GraphError("the graph has a cycle: these operators never get all their inputs: "
                         + ", ".join(stuck))
    return levels


def flatten_levels(levels: list[list[RuntimeOperator]]) -> list[RuntimeOperator]:
    return [op for level in levels for op in level]
