"""Inputs and outputs by name, as onnxruntime and ncnn users expect them.

pnnx names operands with numbers ("0", "9"): fine for a file, awkward to type. So every graph
input also answers to `in0, in1, ...` and every graph output to `out0, out1, ...`, in the order
of `graph.inputs` / `graph.outputs` (Port.alias). An alias that is already the name of another
operand is not given (a file's own names always win), so a name never means two things.

- feeds: `graph.forward({"in0": x})` or `{"0": x}`: a dict keyed by input name or alias.
- outputs: `graph.forward(x, outputs=["out0", "12"])`: graph outputs by name or alias, or any
  operand inside the graph (ncnn's `extract("blob")`): every operand `kuiper info` shows.

The functions here only read the graph (its ports, operands and specs); RuntimeGraph calls them.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from typing import Any

from kuiper.core.errors import InputError


def alias_for(kind: str, index: int, own_name: str, operand_names) -> str | None:
    """`in3` / `out0` for port `index`, unless another operand already has that name."""
    alias = f"{kind}{index}"
    return None if alias in operand_names and alias != own_name else alias


def _lookup(ports) -> dict[str, str]:
    """{name or alias: operand name} of the given ports."""
    table = {p.name: p.name for p in ports}
    table.update({p.alias: p.name for p in ports if p.alias})
    return table


def _listed(ports) -> str:
    return ", ".join(p.label for p in ports)


def ordered_inputs(graph, inputs: Sequence[Any]) -> Sequence[Any]:
    """The inputs in port order: a single dict {name or alias: array} is sorted into place;
    positional arrays are returned as they are."""
    if not any(isinstance(x, Mapping) for x in inputs):
        return inputs
    ports = graph.inputs
    if len(inputs) != 1:
        raise InputError("give the inputs either as arrays in order, or as one dict "
                         f"{{name: array}}, not both (the model's inputs: {_listed(ports)})")
    feeds, lookup = inputs[0], _lookup(ports)
    ordered: dict[str, Any] = {}
    for key, value in feeds.items():
        name = lookup.get(key) if isinstance(key, str) else None
        if name is None:
            raise InputError(f"no input named {key!r}{_close(key, lookup)}; the model's inputs "
                             f"(name or alias): {_listed(ports)}")
        if name in ordered:
            raise InputError(f"input '{name}' is given twice (by its name and its alias)")
        ordered[name] = value
    missing = [p.label for p in ports if p.name not in ordered]
    if missing:
        raise InputError(f"missing input(s) {', '.join(missing)}; the model's inputs (name "
                         f"or alias): {_listed(ports)}")
    return [ordered[p.name] for p in ports]


def output_operands(graph, names: str | Sequence[str]) -> list[str]:
    """The operand names of the asked-for outputs: graph outputs by name or alias, or any
    operand with a value (graph.specs: every operand `kuiper info` shows)."""
    if isinstance(names, str):
        names = [names]
    ports = graph.outputs
    lookup = _lookup(ports)
    operands = []
    for name in names:
        if not isinstance(name, str):
            raise InputError(f"outputs= takes names (strings), got {name!r}")
        operand = lookup.get(name, name if name in graph.specs else None)
        if operand is None:
            raise InputError(f"no output or operand named {name!r}"
                             f"{_close(name, [*lookup, *graph.specs])}: ask for a graph output "
                             f"({_listed(ports)}) or any operand name shown by `kuiper info`")
        operands.append(operand)
    return operands


def _close(name: Any, candidates) -> str:
    unique = list(dict.fromkeys(str(c) for c in candidates))
    close = difflib.get_close_matches(str(name), unique, n=3)
    return f" (did you mean {', '.join(close)}?)" if close else ""
