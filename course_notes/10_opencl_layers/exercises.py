"""Lesson 10 exercise: the max-pooling kernel.

Fill in the function, then run `kuiper course check 10`. The test runs your kernel on its own
against PyTorch, and then inside the real MaxPool layer (layers/opencl/maxpool.py binds it).
The answer is the engine's own kernel, in clkernels/maxpool.cl: try first, read it after.
"""

from __future__ import annotations


def maxpool_source() -> str:
    """The OpenCL C source of a kernel with exactly this signature (the argument order
    layers/opencl/maxpool.py binds, with layers/common/pooling.py:window_params for the last 8):

        __kernel void maxpool(__global const float *x, __global float *y, const int n,
                              const int H, const int W, const int OH, const int OW,
                              const int kh, const int kw, const int sh, const int sw,
                              const int ph, const int pw, const int dh, const int dw)

    x is a stack of planes (planes, H, W) (a batch N x C is N*C planes), y is
    (planes, OH, OW) and n = planes * OH * OW. One work-item per output element i < n:
    recover (plane, oy, ox) from i, then take the max over the kh x kw window whose top-left
    tap is at (oy*sh - ph, ox*sw - pw), with taps dh rows and dw columns apart. Taps outside
    the input (in the padding) are skipped: padding counts as -infinity. Work-items with
    i >= n do nothing.
    """
    raise NotImplementedError("lesson 10: return the max-pooling kernel's source from "
                              "maxpool_source()")
