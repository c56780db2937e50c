"""A roofline of your own measurements, drawn as SVG (lesson 12; `kuiper course figures`).

The roofline model says a kernel cannot run faster than

    min(peak FLOP/s,  memory bandwidth x arithmetic intensity)

where the arithmetic intensity is its FLOPs per byte of memory traffic. On a log-log plot of
GFLOP/s against intensity that bound is a slanted line (memory-bound) meeting a flat one
(compute-bound) at the *ridge point*, peak / bandwidth FLOP/byte. Each measured kernel is a
point under the roof: how far below it sits is how much faster it could still go.

- `bench_points` turns one column of `kuiper bench MODEL --json` into points: each operator's
  FLOPs (the model's summary) over its measured time, at its intensity (its FLOPs over the
  bytes of its inputs, outputs and weights: the least traffic it can have).
- `measure_cpu_roof` measures a CPU's roof with NumPy (a large sgemm, a large copy): the roof
  of PoCL, whose device is that CPU. For a GPU, take its datasheet's numbers.
- `roofline_svg` draws points and roof; `sample_figure` draws SAMPLE, measured on the course's
  machine, as course_notes/figures/roofline.svg.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import time
from dataclasses import asdict, dataclass

import numpy as np

from kuiper.core.errors import KuiperError


@dataclass(frozen=True)
class Point:
    """One measured kernel or operator: its rate and its arithmetic intensity."""

    label: str
    gflops: float       # GFLOP/s it reached
    intensity: float    # FLOPs per byte of memory traffic


def operator_bytes(graph, op) -> int:
    """The least memory traffic of `op`: every input and output once, and its weights."""
    moved = 0
    for operand in op.inputs + op.outputs:
        spec = graph.specs[operand.name]
        moved += int(np.prod(spec.shape, dtype=np.int64)) * spec.dtype.itemsize
    return moved + sum(int(a.nbytes) for a in op.attributes.values())


def bench_points(document: dict, model: str, column: str = "kuiper opencl") -> list[Point]:
    """Points of one column of a `kuiper bench MODEL --json` document (parsed JSON): one per
    operator that does arithmetic (FLOPs > 0) and took measurable time."""
    from kuiper.graph.load import load
    from kuiper.graph.summary import operator_rows

    columns = document.get("columns", [])
    chosen = next((c for c in columns if c["label"].startswith(column)), None)
    if chosen is None or not chosen.get("profile_ms"):
        labels = ", ".join(repr(c["label"]) for c in columns) or "none"
        raise KuiperError(f"roofline: the bench document has no per-operator profile for a "
                          f"column starting with {column!r} (its columns: {labels})")
    shapes = [tuple(x["shape"]) for x in document["inputs"]]
    graph = load(model, input_shapes=shapes)
    flops = {row["name"]: row["flops"] for row in operator_rows(graph)}
    ops = {op.name: op for op in graph.order}
    points = []
    for entry in chosen["profile_ms"]:
        name, ms = entry["operator"], entry["ms"]
        if flops.get(name, 0) > 0 and ms > 0 and name in ops:
            moved = operator_bytes(graph, ops[name])
            points.append(Point(f"{name} ({entry['type']})", flops[name] / (ms * 1e-3) / 1e9,
                                flops[name] / moved))
    return points


def measure_cpu_roof(size: int = 1024, megabytes: int = 256) -> tuple[float, float]:
    """(GFLOP/s, GB/s) this CPU reaches with NumPy: the best of a few float32 matrix products
    of `size`^3 (its BLAS, on every core) and of a few copies of a large array (read + write).
    A measured roof, not a datasheet's: what a good kernel can reach here."""
    a = np.ones((size, size), np.float32)
    best_mm = min(_seconds(lambda: a @ a) for _ in range(5))
    src = np.ones(megabytes * 2**20 // 4, np.float32)
    dst = np.empty_like(src)
    best_copy = min(_seconds(lambda: np.copyto(dst, src)) for _ in range(5))
    return 2 * size ** 3 / best_mm / 1e9, 2 * src.nbytes / best_copy / 1e9


def gemm_points(runtime) -> list[Point]:
    """The two GEMM kernels of lesson 12 (kuiper/course/tiled_gemm.py, and the tiled one of
    tiled_gemm_answer.py) as points: the same product, so the same intensity (the least
    traffic: A, B and C once), two heights."""
    from kuiper.course import tiled_gemm, tiled_gemm_answer

    measured = tiled_gemm.speedup(runtime, tiled_gemm_answer.tiled_gemm_source())
    n = measured.size
    flops, moved = 2 * n ** 3, 3 * n * n * 4
    return [Point(f"gemm_naive {n}^3 (lesson 12)", flops / measured.naive / 1e9, flops / moved),
            Point(f"gemm_tiled {n}^3 (lesson 12)", flops / measured.tiled / 1e9, flops / moved)]


def measure_sample(model: str, input_shape: str, roof_tries: int = 5) -> dict:
    """Everything `roofline_svg` needs, measured on this machine's OpenCL device: the model's
    operators from `kuiper bench MODEL --json`, the two GEMM kernels of lesson 12, and the
    CPU's roof (the best of `roof_tries`: a shared machine only ever makes it look lower).
    `python -m kuiper.course.roofline` prints it; SAMPLE below is its output here."""
    from kuiper.bench.timing import machine_line
    from kuiper.opencl.device.runtime import OpenCLRuntime

    bench = subprocess.run([sys.executable, "-m", "kuiper", "bench", model, "--backends",
                            "opencl", "--input-shape", input_shape, "--repeat", "20", "--json"],
                           capture_output=True, text=True, check=True)
    points = bench_points(json.loads(bench.stdout), model)
    runtime = OpenCLRuntime(profiling=True)
    points += gemm_points(runtime)
    roofs = [measure_cpu_roof() for _ in range(roof_tries)]
    return {"points": [asdict(p) for p in points],
            "peak_gflops": max(r[0] for r in roofs), "bandwidth_gbs": max(r[1] for r in roofs),
            "machine": f"{runtime.name}: {machine_line().split(', Python')[0]}",
            "roof_note": "roof measured with NumPy: peak = best 1024^3 sgemm, bandwidth = best "
                         "256 MiB copy"}


# measure_sample("kuiper/demo/digits.pnnx.param", "256x1x8x8") on the course's machine
# (2026-11-24): the demo model at a batch of 256 and lesson 12's kernels, rounded to 3 digits,
# with one of the model's three ReLUs (the others sat on the same spot, 4 and 5.6 GFLOP/s).
SAMPLE = {
    "machine": "PoCL 3.0 (pthread) on a 2-core Intel Xeon (Ice Lake, AVX-512), shared",
    "peak_gflops": 390.0, "bandwidth_gbs": 28.3,
    "roof_note": "roof measured with NumPy on the same 2 cores: peak = best 1024^3 sgemm "
                 "(OpenBLAS), bandwidth = best 256 MiB copy",
    "points": [
        {"label": "features.2 (nn.Conv2d)", "gflops": 16.0, "intensity": 23.9},
        {"label": "features.0 (nn.Conv2d)", "gflops": 5.6, "intensity": 4.0},
        {"label": "classifier.1 (nn.Linear)", "gflops": 54.7, "intensity": 21.3},
        {"label": "classifier.3 (nn.Linear)", "gflops": 26.4, "intensity": 4.18},
        {"label": "features.4 (nn.MaxPool2d)", "gflops": 0.184, "intensity": 0.2},
        {"label": "features.1 (nn.ReLU)", "gflops": 6.26, "intensity": 0.125},
        {"label": "gemm_naive 512^3 (lesson 12)", "gflops": 4.67, "intensity": 85.3},
        {"label": "gemm_tiled 512^3 (lesson 12)", "gflops": 15.2, "intensity": 85.3},
    ],
}


def sample_figure() -> str:
    """course_notes/figures/roofline.svg: SAMPLE, drawn."""
    sample = dict(SAMPLE)
    points = [Point(**p) for p in sample.pop("points")]
    return roofline_svg(points, **sample)


def _seconds(run) -> float:
    start = time.perf_counter()
    run()
    return time.perf_counter() - start


# --- drawing -----------------------------------------------------------------------------------

WIDTH, HEIGHT = 760, 470
LEFT, RIGHT, TOP, BOTTOM = 80, 250, 60, 80   # margins: the legend sits on the right
POINT_COLOURS = ["#e6550d", "#3182bd", "#31a354", "#756bb1", "#636363", "#d6616b", "#8c6d31",
                 "#17becf"]


def _decades(low: float, high: float) -> tuple[int, int]:
    """Whole powers of ten around [low, high], with some room on both sides."""
    return math.floor(math.log10(low / 2)), math.ceil(math.log10(high * 2))


def _label(power: int) -> str:
    return f"{10.0 ** power:g}"


def roofline_svg(points: list[Point], peak_gflops: float, bandwidth_gbs: float,
                 machine: str, roof_note: str = "") -> str:
    """The roofline of `points` under a roof of `peak_gflops` and `bandwidth_gbs`, as SVG text.

    `machine` says where it was measured (a caption: a number without its machine is not a
    result); `roof_note` how the roof was obtained."""
    from kuiper.course.svg import Svg, _n

    if not points:
        raise KuiperError("roofline: no points to draw (did the bench profile any operator?)")
    numbers = [peak_gflops, bandwidth_gbs] + [v for p in points for v in (p.gflops, p.intensity)]
    if not all(math.isfinite(v) and v > 0 for v in numbers):
        raise KuiperError("roofline: peak_gflops, bandwidth_gbs and every point's gflops and "
                          f"intensity must be finite and > 0 (got peak {peak_gflops}, "
                          f"bandwidth {bandwidth_gbs}, points {points})")
    ridge = peak_gflops / bandwidth_gbs
    x0, x1 = _decades(min([p.intensity for p in points] + [ridge]),
                      max([p.intensity for p in points] + [ridge]))
    y0, y1 = _decades(min([p.gflops for p in points] + [bandwidth_gbs * 10.0 ** x0]),
                      peak_gflops)
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def px(intensity: float) -> float:
        return LEFT + (math.log10(intensity) - x0) / (x1 - x0) * plot_w

    def py(gflops: float) -> float:
        return TOP + plot_h - (math.log10(gflops) - y0) / (y1 - y0) * plot_h

    svg = Svg(WIDTH, HEIGHT, f"roofline of measured kernels on {machine}")
    svg.text(WIDTH / 2, 24, "Roofline: how far each kernel is from what the machine allows",
             size=14, weight="bold")
    svg.text(WIDTH / 2, 42, f"measured on {machine}", size=10, fill="#555")
    svg.rect(LEFT, TOP, plot_w, plot_h, fill="#fcfcfc", stroke="#999")
    for power in range(x0, x1 + 1):          # decade grid lines and their labels
        x = px(10.0 ** power)
        svg.parts.append(f'<line x1="{_n(x)}" y1="{TOP}" x2="{_n(x)}" y2="{TOP + plot_h}" '
                         'stroke="#e5e5e5" stroke-width="0.8"/>')
        svg.text(x, TOP + plot_h + 16, _label(power), size=10, fill="#555")
    for power in range(y0, y1 + 1):
        y = py(10.0 ** power)
        svg.parts.append(f'<line x1="{LEFT}" y1="{_n(y)}" x2="{LEFT + plot_w}" y2="{_n(y)}" '
                         'stroke="#e5e5e5" stroke-width="0.8"/>')
        svg.text(LEFT - 6, y + 4, _label(power), size=10, anchor="end", fill="#555")
    svg.text(LEFT + plot_w / 2, HEIGHT - BOTTOM + 36, "arithmetic intensity (FLOP / byte)",
             size=11)
    svg.parts.append(f'<text x="18" y="{_n(TOP + plot_h / 2)}" font-size="11" '
                     f'transform="rotate(-90 18 {_n(TOP + plot_h / 2)})" text-anchor="middle" '
                     'font-family="DejaVu Sans, Helvetica, Arial, sans-serif">GFLOP/s</text>')
    # the roof: bandwidth x intensity up to the ridge, then the flat peak
    left_x = 10.0 ** x0
    start = (left_x, bandwidth_gbs * left_x)
    if start[1] < 10.0 ** y0:                # enter the plot through its bottom edge
        start = (10.0 ** y0 / bandwidth_gbs, 10.0 ** y0)
    corners = [start, (ridge, peak_gflops), (10.0 ** x1, peak_gflops)]
    path = " ".join(f"{_n(px(x))},{_n(py(y))}" for x, y in corners)
    svg.parts.append(f'<polyline points="{path}" fill="none" stroke="#222" stroke-width="2"/>')
    svg.text(px(ridge), py(peak_gflops) - 8, f"peak {peak_gflops:.3g} GFLOP/s", size=10,
             anchor="start")
    middle = (math.sqrt(start[0] * ridge), math.sqrt(start[1] * peak_gflops))  # on the slope
    svg.text(px(middle[0]) - 6, py(middle[1]) - 6, f"{bandwidth_gbs:.3g} GB/s", size=10,
             anchor="end")
    svg.parts.append(f'<line x1="{_n(px(ridge))}" y1="{_n(py(peak_gflops))}" '
                     f'x2="{_n(px(ridge))}" y2="{TOP + plot_h}" stroke="#999" '
                     'stroke-width="0.8" stroke-dasharray="4 3"/>')
    svg.text(px(ridge) + 4, TOP + plot_h - 6, f"ridge {ridge:.3g} FLOP/B", size=9,
             anchor="start", fill="#555")
    # the points, numbered, and the legend that names them
    legend_x = WIDTH - RIGHT + 16
    svg.text(legend_x, TOP + 4, "measured (GFLOP/s, % of its roof)", size=10, anchor="start",
             weight="bold")
    placed: list[tuple[float, float]] = []   # number labels so far: move a new one off them
    for i, p in enumerate(points):
        colour = POINT_COLOURS[i % len(POINT_COLOURS)]
        x, y = px(p.intensity), py(p.gflops)
        svg.parts.append(f'<circle cx="{_n(x)}" cy="{_n(y)}" r="5" fill="{colour}" '
                         'stroke="white" stroke-width="1"/>')
        lx, ly = x + 8, y + 4
        while any(abs(lx - ax) < 14 and abs(ly - ay) < 11 for ax, ay in placed):
            lx += 14
        placed.append((lx, ly))
        svg.text(lx, ly, i + 1, size=10, anchor="start", fill=colour, weight="bold")
        roof = min(peak_gflops, bandwidth_gbs * p.intensity)
        line_y = TOP + 24 + i * 30
        svg.text(legend_x, line_y, f"{i + 1}. {p.label}", size=10, anchor="start", fill=colour)
        svg.text(legend_x + 14, line_y + 13, f"{p.gflops:.3g} GFLOP/s at {p.intensity:.3g} "
                 f"FLOP/B: {p.gflops / roof:.0%}", size=9, anchor="start", fill="#555")
    notes = [roof_note] if roof_note else []
    if any(p.gflops > min(peak_gflops, bandwidth_gbs * p.intensity) for p in points):
        # not a drawing error: the roof's bandwidth is main memory's, a cache is faster
        notes.append("above 100%: the operator's data stayed in a cache, faster than the "
                     "memory the roof measures")
    for k, note in enumerate(notes):
        svg.text(LEFT, HEIGHT - 26 + k * 13, note, size=9, anchor="start", fill="#555")
    return svg.render()


if __name__ == "__main__":  # python -m kuiper.course.roofline [MODEL INPUT_SHAPE]: a new SAMPLE
    import pprint

    from kuiper.demo import DIGITS_PARAM

    arguments = sys.argv[1:] or [str(DIGITS_PARAM), "256x1x8x8"]
    pprint.pprint(measure_sample(*arguments), width=100, sort_dicts=False)
