"""Copies of row blocks between one tensor and several: cat (several -> one) and split (one ->
several), four parts per launch (clkernels/cat.cl: cat4, split4, and their `_rows` variants).

Seen as 2-D, the whole tensor is `rows` x `row` and part k is `rows` x `len_k`, its columns
side by side with the other parts' in the whole's rows, in order.
"""

from __future__ import annotations

import numpy as np

from kuiper.layers.opencl_base import Launch, round_up
from kuiper.layers.opencl_helpers.cl_types import move_type
from kuiper.layers.opencl_helpers.strided import copies_by_rows, rows_launch

PER_LAUNCH = 4  # inputs of cat4 / outputs of split4 (clkernels/cat.cl)
# A work-item copies up to 32 bytes (one AVX register): a vector of VECTOR_WIDTHS elements, the
# widest that every part's row length and the whole's divide (then every offset is whole
# vectors, and each part starts aligned). Under PoCL the kernel's index arithmetic costs more
# than the copy itself: moving 8 floats per work-item instead of 1 made DenseNet-121's
# concatenations 4.5x faster (11.5 ms -> 2.6 ms in all; its first 56x56 cat4: 0.52 -> 0.09 ms).
UNIT_BYTES = 32
VECTOR_WIDTHS = (16, 8, 4, 2)


def blocks_launches(layer, kernel_name: str, whole, parts, lengths, row: int, rows: int,
                    dtype) -> list[Launch]:
    """cat4 (whole = the output, parts = the inputs) or split4 (whole = the input, parts = the
    outputs): one launch per PER_LAUNCH parts, parts of length 0 left out. `lengths` are the
    parts' row lengths, `row` the whole's."""
    launches, first = [], 0
    itemsize = np.dtype(dtype).itemsize
    per_unit = next((w for w in VECTOR_WIDTHS if w * itemsize <= UNIT_BYTES
                     and all(n % w == 0 for n in [row, *lengths])), 1)
    # T: a vector of the unsigned integer that moves one element bit for bit (uint8: eight
    # float32), which the executor's element-type check accepts
    # (kuiper/opencl/device/element_types.py)
    unit_type = move_type(dtype) + (str(per_unit) if per_unit > 1 else "")
    row, lengths = row // per_unit, [n // per_unit for n in lengths]   # in units from here on
    pieces = [(p, n) for p, n in zip(parts, lengths) if n]
    for start in range(0, len(pieces), PER_LAUNCH):
        chunk = pieces[start:start + PER_LAUNCH]
        chunk += [(None, 0)] * (PER_LAUNCH - len(chunk))
        width = sum(n for _, n in chunk)
        # cat4_rows / split4_rows (a work-item per row) by strided.py's rule, for the same reason
        by_rows = copies_by_rows(layer.runtime.device, width, rows)
        name = kernel_name + "_rows" if by_rows else kernel_name
        kernel = layer.kernel(name, [f"-DT={unit_type}"], stem="cat")
        buffers = [p.data if p is not None else None for p, _ in chunk]
        items = rows if by_rows else rows * width
        kernel.set_args(whole.data, *buffers, *(np.int32(n) for _, n in chunk),
                        np.int32(row), np.int32(first), np.int32(items))
        launches.append(rows_launch(kernel, rows) if by_rows
                        else Launch(kernel, (round_up(items, 64),)))
        first += width
    return launches
