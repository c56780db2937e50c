"""Running FFTs with clkernels/fft.cl: the radices of a length, and the passes along one dim.

The Stockham FFT (explained at the top of clkernels/fft.cl) reads one buffer and writes the
other in every pass, so a transform needs two complex work buffers, swapped after each pass.
`WorkBuffers` holds them and knows which one has the latest result; `transform_dim` lists the
launches of one 1-D transform along one dim of the work array. Used by the FFT and STFT layers.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from kuiper.layers.opencl_base import Launch
from kuiper.layers.opencl_helpers.buffers import keep_alive

COMPLEX64 = np.dtype(np.complex64)


def radices(n: int) -> list[int]:
    """n split into the radices of the passes: 4s first (half as many passes as 2s), then
    2, 3, 5, then any other prime factor (a large one makes its pass a direct DFT)."""
    out = []
    for p in (4, 2, 3, 5):
        while n % p == 0 and n > 1:
            out.append(p)
            n //= p
    p = 7
    while n > 1:
        while n % p == 0:
            out.append(p)
            n //= p
        p += 2
    return out


class WorkBuffers:
    """Two complex64 device buffers of `numel` elements; `src` holds the current data."""

    def __init__(self, layer, numel: int):
        self.arrays = [layer.runtime.empty((max(numel, 1),), COMPLEX64) for _ in range(2)]
        keep_alive(layer, self.arrays)
        self.current = 0

    @property
    def src(self):
        return self.arrays[self.current]

    @property
    def dst(self):
        return self.arrays[1 - self.current]

    def swap(self) -> None:
        self.current = 1 - self.current


def roots_of_unity(layer, n: int):
    """The device table roots[m] = e^(2 pi i m / n), m < n, once per layer and length: the
    twiddle factors of every pass (computed in float64, so each is exact to float32)."""
    tables = layer.__dict__.setdefault("fft_roots", {})
    if n not in tables:
        roots = np.exp(2j * np.pi * np.arange(n) / n).astype(COMPLEX64)
        tables[n] = layer.upload(roots)
    return tables[n]


def transform_dim(layer, buffers: WorkBuffers, shape: Sequence[int], dim: int,
                  inverse: bool) -> list[Launch]:
    """Launches of an unscaled 1-D FFT along `dim` of the C-contiguous `shape` in
    `buffers.src`; the result ends in `buffers.src` (the buffers are swapped per pass)."""
    n = int(shape[dim])
    total = math.prod(shape)
    if total == 0 or n == 1:
        return []
    inner = math.prod(shape[dim + 1:])
    roots = roots_of_unity(layer, n)
    launches, ns = [], 1
    for p in radices(n):
        kernel = layer.kernel("fft_pass", stem="fft")
        kernel.set_args(buffers.src.data, buffers.dst.data, roots.data, np.int32(n),
                        np.int32(inner), np.int32(p), np.int32(ns),
                        np.int32(1 if inverse else -1))
        launches.append(Launch(kernel, (n, total // n)))
        buffers.swap()
        ns *= p
    return launches
