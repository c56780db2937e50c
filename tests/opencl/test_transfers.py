"""The whole graph stays on the device: one upload per input, one download per output."""

import pyopencl as cl

import kuiper
from kuiper.testing import assert_close


def test_one_upload_per_input_one_download_per_output(two_branch_model, monkeypatch):
    path, inputs, expected = two_branch_model
    graph = kuiper.load(path, backend="opencl")
    assert graph.fallbacks == [], "every operator of this model has an OpenCL layer"
    graph.forward(*inputs)  # warm-up outside the count

    counts = {"upload": 0, "download": 0}
    real_copy = cl.enqueue_copy

    def counting_copy(queue, dest, src, **kwargs):
        if isinstance(dest, cl.MemoryObjectHolder) and not isinstance(src, cl.MemoryObjectHolder):
            counts["upload"] += 1
        elif isinstance(src, cl.MemoryObjectHolder) and not isinstance(dest,
                                                                        cl.MemoryObjectHolder):
            counts["download"] += 1
        return real_copy(queue, dest, src, **kwargs)

    monkeypatch.setattr(cl, "enqueue_copy", counting_copy)
    outputs = graph.forward(*inputs)
    assert counts == {"upload": len(inputs), "download": len(expected)}
    for got, want in zip(outputs, expected):
        assert_close(got, want)
