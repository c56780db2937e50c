"""The one table printer: `kuiper info`, `ops`, `devices`, `bench` and `compare` all use it.

Plain text on purpose: a table goes to terminals, logs, CI output and course notes alike, and
must read the same everywhere (no terminal width to guess, no colour codes in a file).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence


def format_table(rows: Sequence[Sequence[object]], right: Collection[int] = ()) -> str:
    """Rows of cells as aligned columns; the first row is the header, underlined with dashes.

    Columns whose index is in `right` are right-aligned, so numbers line up on their last digit.
    A header cell that is empty gets no dashes (a column of markers, say).
    """
    if not rows:
        return ""
    text = [[str(cell) for cell in row] for row in rows]
    width = [max(len(row[i]) for row in text if i < len(row)) for i in range(len(text[0]))]

    def line(row: list[str]) -> str:
        return "  ".join(cell.rjust(w) if i in right else cell.ljust(w)
                         for i, (cell, w) in enumerate(zip(row, width))).rstrip()

    rule = "  ".join(("-" if head else " ") * w for head, w in zip(text[0], width)).rstrip()
    return "\n".join([line(text[0]), rule] + [line(row) for row in text[1:]])


def print_table(rows: Sequence[Sequence[object]], right: Collection[int] = ()) -> None:
    """`format_table`, printed."""
    print(format_table(rows, right))
