"""Copies of row blocks between one tensor and several: cat (several -> one) and split (one ->
several), four parts per launch (clkernels/cat.cl: cat4, split4).

Seen as 2-D, the whole tensor is `rows` x `row` and part k is `rows` x `len_k`, its columns
side by side with the other parts' in the whole's rows, in order.
"""

from __future__ import annotations

import numpy as np

from kuiper.layers.opencl_base import Launch, round_up
from kuiper.layers.opencl_helpers.cl_types import move_type

PER_LAUNCH = 4  # inputs of cat4 / outputs of split4 (clkernels/cat.cl)


def blocks_launches(layer, kernel_name: str, whole, parts, lengths, row: int, rows: int,
                    dtype) -> list[Launch]:
    """cat4 (whole = the output, parts = the inputs) or split4 (whole = the input, parts = the
    outputs): one launch per PER_LAUNCH parts, parts of length 0 left out. `lengths` are the
    parts' row lengths, `row` the whole's."""
    launches, first = [], 0
    pieces = [(p, n) for p, n in zip(parts, lengths) if n]
    for start in range(0, len(pieces), PER_LAUNCH):
        chunk = pieces[start:start + PER_LAUNCH]
        chunk += [(None, 0)] * (PER_LAUNCH - len(chunk))
        width = sum(n for _, n in chunk)
        kernel = layer.kernel(kernel_name, [f"-DT={move_type(dtype)}"], stem="cat")
        buffers = [p.data if p is not None else None for p, _ in chunk]
        kernel.set_args(whole.data, *buffers, *(np.int32(n) for _, n in chunk),
                        np.int32(row), np.int32(first), np.int32(rows * width))
        launches.append(Launch(kernel, (round_up(rows * width, 64),)))
        first += width
    return launches
