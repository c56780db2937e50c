"""The `.pnnx.param` reader: text -> a plain list of operator definitions.

A file looks like

    7767517
    4 4
    pnnx.Input    pnnx_input_0   0 1 0 #0=(1,3,8,8)f32
    nn.Conv2d     conv1          1 1 0 1 bias=True kernel_size=(3,3) ... @weight=(8,3,3,3)f32 #0=...
    ...

Each operator line is: type, name, input count, output count, input operand names, output operand
names, then `key=value` tokens of four kinds told apart by their first character:
plain parameters, `@` weights (stored in the .bin zip), `$` keyword names of inputs, `#` shapes.
Nothing here knows about layers or runtime: the result is data, checked for well-formedness.
"""

from __future__ import annotations

import os
from collections import deque
from dataclasses import dataclass, field

from kuiper.parser.errors import ModelFormatError
from kuiper.parser.files import MAX_PARAM_BYTES, open_model_file
from kuiper.parser.values import out_of_range, parse_dtype_suffix, parse_value

MAGIC = "7767517"
MAX_COUNT_DIGITS = 9  # counts of operators, operands, inputs of one operator: below 10**9
# Values pnnx writes raw: running the generic value parser on them would split them on commas.
RAW_PARAMS = ("expr", "equation")


@dataclass
class AttributeDecl:
    """A weight declared on an operator line as `@key=(shape)dtype`; the data lives in the zip."""

    shape: tuple[int, ...]
    dtype: str


@dataclass
class OperatorDef:
    """One operator line, decoded but not yet interpreted."""

    type: str
    name: str
    inputs: list[str]
    outputs: list[str]
    params: dict[str, object] = field(default_factory=dict)
    attributes: dict[str, AttributeDecl] = field(default_factory=dict)
    input_names: list[str | None] = field(default_factory=list)  # from `$name=operand`
    # `#operand=(shape)dtype` entries; None when pnnx omitted it (0-dim values, tuples)
    input_shapes: list[tuple[list[int | None], str] | None] = field(default_factory=list)
    output_shapes: list[tuple[list[int | None], str] | None] = field(default_factory=list)
    line: int = 0


@dataclass
class ParamFile:
    path: str
    operators: list[OperatorDef]
    operand_count: int


def read_param(path: str | os.PathLike) -> ParamFile:
    """Read and check a `.pnnx.param` file; errors name the file and the line."""
    path = os.fspath(path)
    f, _ = open_model_file(path, "a .pnnx.param written by pnnx", max_bytes=MAX_PARAM_BYTES)
    with f:
        data = f.read(MAX_PARAM_BYTES + 1)  # bounded even if the file grows while we read
    if len(data) > MAX_PARAM_BYTES:
        raise ModelFormatError(f"grew past {MAX_PARAM_BYTES >> 20} MB while being read", path)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ModelFormatError(f"not a text file ({e.reason} at byte {e.start}); "
                               "did you pass the .pnnx.bin instead of the .pnnx.param?",
                               path) from None
    return parse_param_text(text, path)


def parse_param_text(text: str, path: str = "<string>") -> ParamFile:
    lines = text.splitlines()
    if not lines or lines[0].strip() != MAGIC:
        got = lines[0].strip()[:40] if lines else "an empty file"
        raise ModelFormatError(f"expected the magic number {MAGIC} on the first line, got "
                               f"'{got}'", path, 1)
    if len(lines) < 2:
        raise ModelFormatError("expected '<operator_count> <operand_count>', got end of file",
                               path, 2)
    counts = lines[1].split()
    if len(counts) != 2 or not all(_is_count(c) for c in counts):
        raise ModelFormatError(f"expected '<operator_count> <operand_count>' (two integers "
                               f"below 10**{MAX_COUNT_DIGITS}), got '{lines[1].strip()[:80]}'",
                               path, 2)
    op_count, operand_count = int(counts[0]), int(counts[1])

    operators: list[OperatorDef] = []
    names: dict[str, int] = {}
    for lineno, line in enumerate(lines[2:], start=3):
        if not line.strip():
            continue
        op = _parse_operator_line(line, path, lineno)
        if op.name in names:
            raise ModelFormatError(f"operator name '{op.name}' is already used on line "
                                   f"{names[op.name]} (names must be unique)", path, lineno)
        names[op.name] = lineno
        operators.append(op)

    if len(operators) != op_count:
        raise ModelFormatError(
            f"line 2 declares {op_count} operators but the file has {len(operators)} "
            "(truncated or edited file?)", path, len(lines))
    return ParamFile(path, operators, operand_count)


def _parse_operator_line(line: str, path: str, lineno: int) -> OperatorDef:
    tokens = line.split()  # type/name are padded to 24 columns, but never rely on columns
    if len(tokens) < 4:
        raise ModelFormatError("expected '<type> <name> <n_in> <n_out> ...', got "
                               f"{len(tokens)} field(s)", path, lineno)
    op_type, name, n_in_text, n_out_text = tokens[:4]
    if not (_is_count(n_in_text) and _is_count(n_out_text)):
        raise ModelFormatError(f"operator '{name}': expected input and output counts as "
                               f"integers below 10**{MAX_COUNT_DIGITS}, got "
                               f"'{n_in_text[:40]}' '{n_out_text[:40]}'", path, lineno)
    n_in, n_out = int(n_in_text), int(n_out_text)
    if len(tokens) < 4 + n_in + n_out:
        raise ModelFormatError(f"operator '{name}': declares {n_in} input(s) and {n_out} "
                               f"output(s) but only {len(tokens) - 4} operand name(s) follow",
                               path, lineno)
    inputs = tokens[4:4 + n_in]
    outputs = tokens[4 + n_in:4 + n_in + n_out]
    op = OperatorDef(op_type, name, inputs, outputs, line=lineno,
                     input_names=[None] * n_in)
    for operand in inputs + outputs:
        if "=" in operand:
            raise ModelFormatError(f"operator '{name}': expected an operand name, got "
                                   f"'{operand}' (too few operands for the declared counts?)",
                                   path, lineno)

    shapes: list[tuple[list[int | None], str]] = []
    dollar: list[tuple[str, str]] = []
    for token in tokens[4 + n_in + n_out:]:
        key, eq, value = token.partition("=")
        if not eq or not key:
            raise ModelFormatError(f"operator '{name}': expected 'key=value', got '{token}'",
                                   path, lineno)
        kind = key[0]
        if kind == "@":
            try:
                dims, dtype = parse_dtype_suffix(value)
            except ValueError as e:
                raise ModelFormatError(f"operator '{name}': weight '{key}': {e}", path,
                                       lineno) from None
            if any(d is None for d in dims):
                raise ModelFormatError(f"operator '{name}': weight '{key}' has a '?' "
                                       "dimension; weights need a static shape", path, lineno)
            op.attributes[key[1:]] = AttributeDecl(tuple(int(d) for d in dims), dtype)
        elif kind == "$":
            dollar.append((key[1:], value))
        elif kind == "#":
            try:
                shapes.append(parse_dtype_suffix(value))
            except ValueError as e:
                raise ModelFormatError(f"operator '{name}': shape of operand '{key[1:]}': {e}",
                                       path, lineno) from None
            shapes[-1] = (shapes[-1][0], shapes[-1][1], key[1:])  # type: ignore[assignment]
        else:
            op.params[key] = value if key in RAW_PARAMS else parse_value(value)
            problem = None if key in RAW_PARAMS else out_of_range(op.params[key])
            if problem:
                raise ModelFormatError(f"operator '{name}': parameter '{key}': {problem}",
                                       path, lineno)

    _assign_input_names(op, dollar)
    _assign_shapes(op, shapes)
    return op


def _is_count(text: str) -> bool:
    """An operator/operand count: ASCII digits, short enough to be a real count (int() of a
    5,000-digit text is slow and then refused by Python's digit limit)."""
    return text.isascii() and text.isdigit() and len(text) <= MAX_COUNT_DIGITS


def _assign_input_names(op: OperatorDef, dollar: list[tuple[str, str]]) -> None:
    """`$argname=operand`: input *position* is the truth; names fill matching slots in order.

    Linear in the line's length (a dict of free slots per operand), so that a hostile line with
    a million inputs does not take hours."""
    free: dict[str, deque[int]] = {}
    for i, inp in enumerate(op.inputs):
        free.setdefault(inp, deque()).append(i)
    for argname, operand in dollar:
        slots = free.get(operand)
        if slots:
            op.input_names[slots.popleft()] = argname


def _assign_shapes(op: OperatorDef, shapes: list) -> None:
    """`#` shapes come inputs first (repeated for duplicates), then outputs; 0-dim are omitted.

    Match them to operands by name, consuming in order, so a missing entry leaves None (one
    queue per operand name: linear, like `_assign_input_names`).
    """
    pending: dict[str, deque] = {}
    for dims, dtype, who in shapes:
        pending.setdefault(who, deque()).append((dims, dtype))

    def take(operand: str):
        queue = pending.get(operand)
        return queue.popleft() if queue else None

    op.input_shapes = [take(x) for x in op.inputs]
    op.output_shapes = [take(x) for x in op.outputs]
