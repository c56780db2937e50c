"""A rough roofline for the convolution cost models (conv_algorithms.ConvAlgorithm.cost).

An algorithm's cost is the larger of its arithmetic time and its memory time, plus a few
microseconds per kernel launch. Only the ORDER of the estimates matters (the selector picks the
cheapest; `kuiper tune` measures the real winner), so the device's rates are read from what
OpenCL reports, without benchmarks:

- peak FLOP/s = compute units x clock x SIMD lanes x 2 (a fused multiply-add is two FLOPs).
  A CPU's lanes are its preferred float vector width (16 with AVX-512); a GPU compute unit (an
  NVIDIA SM, an AMD CU) runs 64 to 128 lanes: 128 for NVIDIA, 64 otherwise.
- memory bandwidth: a typical figure per device kind (the API does not report it).

Each algorithm states the fraction of the peak its kernels reach (`efficiency`): a GEMM with
register blocks reaches far more of it than a depthwise kernel that does 9 multiply-adds per
loaded value.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

CPU_BANDWIDTH = 20e9        # bytes/s: two channels of DDR4, shared by the cores
GPU_BANDWIDTH = 1e12        # bytes/s: a recent discrete GPU (an H100 has 3.3e12)
CPU_LAUNCH = 20e-6          # seconds per kernel launch under PoCL (thread pool wake-up)
GPU_LAUNCH = 5e-6


@dataclass(frozen=True)
class DeviceRates:
    flops: float       # peak FLOP/s
    bandwidth: float   # bytes/s
    launch: float      # seconds per launch
    is_cpu: bool


def device_rates(device: Any) -> DeviceRates:
    """The rates of a pyopencl Device (None: a 2-core AVX2 CPU, for tests without a device)."""
    if device is None:
        return DeviceRates(2 * 2.5e9 * 8 * 2, CPU_BANDWIDTH, CPU_LAUNCH, True)
    from kuiper.opencl.device.runtime import is_cpu

    units = max(1, int(device.max_compute_units))
    clock = max(1, int(device.max_clock_frequency)) * 1e6
    if is_cpu(device):
        lanes = max(4, int(device.preferred_vector_width_float))
        return DeviceRates(units * clock * lanes * 2, CPU_BANDWIDTH, CPU_LAUNCH, True)
    lanes = 128 if "nvidia" in device.vendor.lower() else 64
    return DeviceRates(units * clock * lanes * 2, GPU_BANDWIDTH, GPU_LAUNCH, False)


def roofline(device: Any, flops: float, bytes_moved: float, launches: int,
             efficiency: float) -> float:
    """Estimated seconds: max(arithmetic, memory) + launch overhead."""
    rates = device_rates(device)
    compute = flops / (rates.flops * efficiency)
    memory = bytes_moved / rates.bandwidth
    return max(compute, memory) + launches * rates.launch
