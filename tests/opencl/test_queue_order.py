"""Events carry the dependencies: an out-of-order queue gives the same result as an in-order one."""

import numpy as np

import kuiper
from kuiper.testing import assert_close


def test_in_order_and_out_of_order_queues_agree(two_branch_model):
    path, inputs, expected = two_branch_model
    in_order = kuiper.load(path, backend="opencl", out_of_order=False)
    out_of_order = kuiper.load(path, backend="opencl", out_of_order=True)
    assert out_of_order.executor.runtime.out_of_order
    a = in_order.forward(*inputs)
    for _ in range(3):  # several runs: a missing dependency shows up as a race, not every time
        b = out_of_order.forward(*inputs)
        for x, y in zip(a, b):
            np.testing.assert_array_equal(x, y)
    for got, want in zip(a, expected):
        assert_close(got, want)


def test_profiling_queue_gives_the_same_result(two_branch_model):
    path, inputs, _ = two_branch_model
    plain = kuiper.load(path, backend="opencl").forward(*inputs)
    profiled = kuiper.load(path, backend="opencl", profiling=True).forward(*inputs)
    for x, y in zip(plain, profiled):
        np.testing.assert_array_equal(x, y)
