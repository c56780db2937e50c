"""OpenCL devices as the cost model sees them: a few attributes, no hardware needed.

The cost model (kuiper/opencl/device/roofline.py, cost_model.py) reads only what OpenCL
reports about a device, so its choices for an H100 or a 2-core CPU can be checked anywhere.
"""

from __future__ import annotations

from types import SimpleNamespace


def fake_h100():
    """An NVIDIA H100 as its OpenCL driver describes it."""
    import pyopencl as cl

    return SimpleNamespace(type=cl.device_type.GPU, vendor="NVIDIA Corporation",
                           max_compute_units=132, max_clock_frequency=1980,
                           max_work_group_size=1024, local_mem_size=49152,
                           preferred_vector_width_float=1)


def fake_two_core_cpu(lanes: int = 16):
    """The development machine under PoCL: 2 cores with AVX-512 (`lanes=8`: with AVX2, as
    PoCL describes an AMD EPYC Zen 3)."""
    import pyopencl as cl

    return SimpleNamespace(type=cl.device_type.CPU, vendor="The pocl project",
                           max_compute_units=2, max_clock_frequency=2500,
                           max_work_group_size=4096, local_mem_size=4 << 20,
                           preferred_vector_width_float=lanes)
