"""GEMM throughput per precision: every parameter set of gemm.h at N^3 (default 4096^3), timed on
the device, as GFLOP/s and as a fraction of the peak the precision is measured against.

    python -m tests.benchmarks.gemm_precision [--size 4096] [--runs 10] [--device NVIDIA]
                                              [--layout conv2d|conv_transpose2d|linear]
                                              [--precisions fp32,tf32,fp16] [--json FILE]
                                              [--emulated]

fp32 times the portable GPU sets (gemm_tiled, GPU_PARAMETER_SETS); tf32 and fp16 the tensor-core
sets (mma_sets.py), which run only where the probe (kuiper/opencl/device/tensor_cores.py) found
tensor cores: elsewhere they are reported as skipped, with the probe's answer. Each kernel is
timed from profiling events (median of --runs after one warm-up), and its result checked
against NumPy on 64 sampled entries, within the precision's bound (tests/opencl/mma_harness.py),
so a fast wrong kernel cannot win. Peaks (H100 SXM / H200, dense): 67 TFLOP/s FP32 FMA, 495 TF32,
989 FP16; the issue's targets are >= 50% for TF32 and FP16, >= 64% for FP32. fp16 stores A (the
weight) as half, as precision="fp16" does.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys

import numpy as np

from kuiper.core.precision import ROUND, U32, U_INPUT
from kuiper.layers.opencl_gemm import launch as gemm
from kuiper.layers.opencl_gemm import mma_sets
from kuiper.opencl.device.runtime import OpenCLRuntime
from kuiper.opencl.device.tensor_cores import tensor_cores
from tests.opencl.mma_harness import GemmLayer

PEAK_TFLOPS = {"fp32": 67.0, "tf32": 495.0, "fp16": 989.0}   # H100 SXM / H200, dense
LAYOUTS = {"conv2d": (False, False), "conv_transpose2d": (True, False), "linear": (False, True)}


def sets_for(precision: str) -> list[dict]:
    return list(gemm.GPU_PARAMETER_SETS) if precision == "fp32" \
        else list(mma_sets.MMA_PARAMETER_SETS[precision])


def check(c: np.ndarray, a: np.ndarray, b: np.ndarray, trans_a: bool, trans_b: bool,
          precision: str, rng) -> float:
    """Max error on 64 sampled entries over the precision's bound (<= 1 is right)."""
    rows, cols = rng.integers(0, c.shape[0], 64), rng.integers(0, c.shape[1], 64)
    a_rows = (a[:, rows].T if trans_a else a[rows]).astype(np.float64)
    b_cols = (b[cols] if trans_b else b[:, cols].T).astype(np.float64)
    rounding = ROUND[precision]
    ra = rounding(a_rows.astype(np.float32)).astype(np.float64)
    rb = rounding(b_cols.astype(np.float32)).astype(np.float64)
    want = np.einsum("ik,ik->i", ra, rb)
    k = a_rows.shape[1]
    bound = 4 * k * U32 * np.einsum("ik,ik->i", np.abs(ra), np.abs(rb)) + 1e-30
    got = c[rows, cols]
    exact = np.einsum("ik,ik->i", a_rows, b_cols)
    outer = (2 * U_INPUT * (precision != "fp32") + 4 * k * U32) \
        * np.einsum("ik,ik->i", np.abs(a_rows), np.abs(b_cols))
    return float(max((np.abs(got - want) / bound).max(), (np.abs(got - exact) / outer).max()))


def time_set(runtime, params: dict, size: int, layout: str, runs: int, rng) -> dict:
    trans_a, trans_b = LAYOUTS[layout]
    precision = mma_sets.precision_of(params)
    half_a = precision == "fp16"
    a = rng.standard_normal((size, size)).astype(np.float32)
    b = rng.standard_normal((size, size)).astype(np.float32)
    da = runtime.to_device(a.astype(np.float16) if half_a else a)
    db, dc = runtime.to_device(b), runtime.empty((size, size))
    launch = gemm.weight_gemm_launch(GemmLayer(runtime, layout), size, size, size, da.data, 0,
                                     db.data, 0, dc.data, 0, params=params, half_a=half_a)
    enqueue = runtime.cl.enqueue_nd_range_kernel
    enqueue(runtime.queue, launch.kernel, launch.global_size, launch.local_size).wait()
    times = []
    for _ in range(runs):
        event = enqueue(runtime.queue, launch.kernel, launch.global_size, launch.local_size)
        event.wait()
        times.append((event.profile.end - event.profile.start) * 1e-9)
    seconds = statistics.median(times)
    a_seen = a.astype(np.float16).astype(np.float32) if half_a else a
    error = check(dc.get(), a_seen, b, trans_a, trans_b, precision, rng)
    tflops = 2.0 * size ** 3 / seconds / 1e12
    return {"precision": precision, "params": gemm.describe_params(params), "ms": seconds * 1e3,
            "tflops": tflops, "of_peak": tflops / PEAK_TFLOPS[precision],
            "error_over_bound": error, "right": error <= 1.0}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--size", type=int, default=4096)
    p.add_argument("--runs", type=int, default=10)
    p.add_argument("--device", default=None, help="OpenCL device, as kuiper's --device")
    p.add_argument("--layout", choices=list(LAYOUTS), default="conv2d")
    p.add_argument("--precisions", default="fp32,tf32,fp16")
    p.add_argument("--json", metavar="FILE", help="also write the rows as JSON")
    p.add_argument("--emulated", action="store_true", help="time the tensor-core sets' "
                   "emulation instead (any device: checks this script, not the GPU)")
    args = p.parse_args(argv)
    runtime = OpenCLRuntime.shared(args.device, profiling=True)
    cores = tensor_cores(runtime.device)
    print(f"device: {runtime.name}; tensor cores (probe): "
          f"{', '.join(sorted(cores)) or 'none'}; {args.size}^3, layout {args.layout}")
    rng = np.random.default_rng(0)
    rows = []
    for precision in args.precisions.split(","):
        for params in sets_for(precision):
            if args.emulated and precision != "fp32":
                params = mma_sets.emulated(params)
            elif precision != "fp32" and precision not in cores:
                print(f"{precision:5} {gemm.describe_params(params):32} skipped: no {precision} "
                      "tensor cores here")
                continue
            if not gemm.fits(params, runtime.device):
                print(f"{precision:5} {gemm.describe_params(params):32} skipped: does not fit")
                continue
            row = time_set(runtime, params, args.size, args.layout, args.runs, rng)
            rows.append(row)
            print(f"{precision:5} {row['params']:32} {row['ms']:9.3f} ms "
                  f"{row['tflops'] * 1e3:9.0f} GFLOP/s {row['of_peak']:6.1%} of peak  "
                  f"{'ok' if row['right'] else 'WRONG'} "
                  f"(error/bound {row['error_over_bound']:.2f})",
                  flush=True)
    for precision in args.precisions.split(","):
        best = max((r for r in rows if r["precision"] == precision and r["right"]),
                   key=lambda r: r["tflops"], default=None)
        if best is not None:
            print(f"best {precision}: {best['params']}, {best['tflops'] * 1e3:.0f} GFLOP/s, "
                  f"{best['of_peak']:.1%} of {PEAK_TFLOPS[precision]:.0f} TFLOP/s")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": runtime.name, "size": args.size, "layout": args.layout,
                       "rows": rows}, f, indent=1)
    return 0 if all(r["right"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
