"""What the device probes' tests share (test_tensor_cores.py, test_vector_width.py): a stand-in
device with just what a probe reads, and a probe that must not be called.

Both probes (kuiper/opencl/device/tensor_cores.py, vector_width.py) keep their answer in this
process, the environment and the cache folder; the `fresh_probe` fixture of conftest.py forgets
all three for a test.
"""

from __future__ import annotations

CPU, GPU = 2, 4   # OpenCL's CL_DEVICE_TYPE_CPU and _GPU (pyopencl's device_type)


class FakeDevice:
    """What the probes read of a pyopencl Device: its platform's name, its name, driver
    version (the cache key: tuning_cache.device_key) and type."""

    def __init__(self, platform: str, kind: int = CPU, name: str = "a CPU",
                 driver_version: str = "1.0"):
        self.platform = type("Platform", (), {"name": platform})()
        self.name, self.driver_version, self.type = name, driver_version, kind


def no_probe(*_):
    raise AssertionError("asked the device")
