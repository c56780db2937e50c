"""Lesson 12's roofline (kuiper/course/roofline.py): the figure puts the roof and the points
where the numbers say, its points come from a real `kuiper bench --json`, and bad numbers get a
KuiperError instead of a broken drawing."""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from kuiper.core.errors import KuiperError
from kuiper.course import roofline
from kuiper.course.roofline import Point, roofline_svg
from kuiper.demo import DIGITS_PARAM

ROOT = Path(__file__).resolve().parents[2]
SVG = "{http://www.w3.org/2000/svg}"


def parse(svg: str):
    return ET.fromstring(svg)


def roof_corners(root) -> list[tuple[float, float]]:
    (line,) = [p for p in root.iter(f"{SVG}polyline")]
    return [tuple(map(float, xy.split(","))) for xy in line.get("points").split()]


def decade_labels(root, anchor: str) -> dict[str, tuple[float, float]]:
    """Axis labels: "middle"-anchored under the x axis, "end"-anchored left of the y axis."""
    return {t.text: (float(t.get("x")), float(t.get("y"))) for t in root.iter(f"{SVG}text")
            if t.get("text-anchor") == anchor and t.text and re.fullmatch(r"[0-9.]+", t.text)}


def test_the_roof_bends_at_the_ridge_point_and_the_axes_are_logarithmic():
    peak, bandwidth = 400.0, 25.0                        # ridge at 16 FLOP/byte
    points = [Point("low", 2.0, 0.125), Point("high", 100.0, 80.0)]
    root = parse(roofline_svg(points, peak, bandwidth, "a test machine"))
    text = " ".join(t.text or "" for t in root.iter(f"{SVG}text"))
    assert "ridge 16 FLOP/B" in text and "peak 400 GFLOP/s" in text and "25 GB/s" in text
    assert "a test machine" in text
    xs, ys = decade_labels(root, "middle"), decade_labels(root, "end")
    x_decade = xs["1"][0] - xs["0.1"][0]                 # pixels per decade, both axes
    y_decade = ys["1"][1] - ys["10"][1]
    assert xs["10"][0] - xs["1"][0] == pytest.approx(x_decade, abs=0.2)   # logarithmic

    def at(intensity, gflops):                           # where a value pair must be drawn
        return (xs["1"][0] + math.log10(intensity) * x_decade,
                ys["1"][1] - 4 - math.log10(gflops) * y_decade)  # labels sit 4 px low

    start, ridge, end = roof_corners(root)
    assert ridge == pytest.approx(at(16, 400), abs=0.2)
    assert end[1] == pytest.approx(ridge[1]) and end[0] > ridge[0]   # flat after the ridge
    # left of the ridge the roof is bandwidth x intensity: start is on that line
    start_intensity = 10 ** ((start[0] - xs["1"][0]) / x_decade)
    assert start == pytest.approx(at(start_intensity, bandwidth * start_intensity), abs=0.2)
    circles = [(float(c.get("cx")), float(c.get("cy"))) for c in root.iter(f"{SVG}circle")]
    assert circles == [pytest.approx(at(0.125, 2.0), abs=0.2),
                       pytest.approx(at(80.0, 100.0), abs=0.2)]


def test_each_point_says_what_share_of_its_roof_it_reaches():
    points = [Point("memory-bound", 5.0, 0.1), Point("compute-bound", 100.0, 50.0)]
    text = roofline_svg(points, 400.0, 25.0, "m")
    assert "5 GFLOP/s at 0.1 FLOP/B: 200%" in text      # 25 GB/s x 0.1 = 2.5 GFLOP/s roof
    assert "100 GFLOP/s at 50 FLOP/B: 25%" in text      # the flat roof, 400
    assert "stayed in a cache" in text                   # over 100% is explained
    assert "stayed in a cache" not in roofline_svg(points[1:], 400.0, 25.0, "m")


@pytest.mark.parametrize("points, peak, bandwidth, what", [
    ([], 100.0, 10.0, "no points"),
    ([Point("a", 1.0, 1.0)], 0.0, 10.0, "peak"),
    ([Point("a", 1.0, 1.0)], 100.0, -1.0, "bandwidth"),
    ([Point("a", float("nan"), 1.0)], 100.0, 10.0, "gflops"),
    ([Point("a", 1.0, 0.0)], 100.0, 10.0, "intensity"),
])
def test_bad_numbers_are_a_kuiper_error(points, peak, bandwidth, what):
    with pytest.raises(KuiperError, match="roofline") as e:
        roofline_svg(points, peak, bandwidth, "m")
    assert what in str(e.value)


@pytest.fixture(scope="module")
def bench_document():
    """A real `kuiper bench --json` of the demo model on the CPU backend (no device needed)."""
    proc = subprocess.run([sys.executable, "-m", "kuiper", "bench", str(DIGITS_PARAM),
                           "--backends", "cpu", "--input-shape", "64x1x8x8", "--repeat", "3",
                           "--warmup", "1", "--rounds", "1", "--json"], cwd=ROOT,
                          capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout)


def test_bench_points_turn_a_bench_profile_into_rates_and_intensities(bench_document):
    points = {p.label: p for p in roofline.bench_points(bench_document, str(DIGITS_PARAM),
                                                        column="kuiper cpu")}
    # a ReLU does 1 FLOP per element and moves 8 bytes (read 4, write 4): 1/8 FLOP per byte
    assert points["features.1 (nn.ReLU)"].intensity == pytest.approx(0.125)
    # a 3x3 convolution re-uses every input 9 x Cout times: far more arithmetic per byte
    assert points["features.2 (nn.Conv2d)"].intensity > 10
    assert not any("flatten" in label for label in points)   # a view: no arithmetic, no point
    profile = {e["operator"]: e["ms"] for e in bench_document["columns"][0]["profile_ms"]}
    import kuiper
    from kuiper.graph.summary import operator_rows

    graph = kuiper.load(DIGITS_PARAM, input_shapes=[(64, 1, 8, 8)])
    flops = {r["name"]: r["flops"] for r in operator_rows(graph)}
    conv = points["features.2 (nn.Conv2d)"]
    assert conv.gflops == pytest.approx(flops["features.2"] / profile["features.2"] / 1e6)
    roofline_svg(list(points.values()), 100.0, 20.0, "this machine")  # draws without error


def test_bench_points_names_the_missing_column(bench_document):
    with pytest.raises(KuiperError, match="'kuiper opencl'.*'kuiper cpu"):
        roofline.bench_points(bench_document, str(DIGITS_PARAM))


def test_the_committed_sample_names_its_machine_and_every_point():
    svg = roofline.sample_figure()
    assert roofline.SAMPLE["machine"] in svg and "2-core" in svg
    for p in roofline.SAMPLE["points"]:
        assert p["label"] in svg
    # lesson 12's two kernels: the same product, so the same intensity, tiled higher up
    naive, tiled = (next(p for p in roofline.SAMPLE["points"] if p["label"].startswith(name))
                    for name in ("gemm_naive", "gemm_tiled"))
    assert naive["intensity"] == tiled["intensity"] and tiled["gflops"] > 1.5 * naive["gflops"]


def test_the_cpu_roof_and_the_gemm_points_are_measured():
    peak, bandwidth = roofline.measure_cpu_roof(size=128, megabytes=8)
    assert peak > 0.1 and bandwidth > 0.1
    from kuiper.course.lessons import require_opencl

    require_opencl()
    from kuiper.opencl.device.runtime import OpenCLRuntime

    naive, tiled = roofline.gemm_points(OpenCLRuntime(profiling=True))
    # an n^3 product moves at least 3 n^2 floats: 2n^3 / 12n^2 = n/6 FLOP per byte, n >= 256
    assert naive.intensity == tiled.intensity >= 256 / 6
    assert tiled.gflops > naive.gflops


@pytest.mark.slow  # a bench in a subprocess, the GEMM speed-up and a roof measurement
def test_measure_sample_gives_what_the_figure_draws():
    from kuiper.course.lessons import require_opencl

    require_opencl()
    sample = roofline.measure_sample(str(DIGITS_PARAM), "16x1x8x8", roof_tries=1)
    assert sample["peak_gflops"] > 0 and sample["bandwidth_gbs"] > 0
    labels = [p["label"] for p in sample["points"]]
    assert "features.2 (nn.Conv2d)" in labels and any("gemm_tiled" in x for x in labels)
    points = [Point(**p) for p in sample.pop("points")]
    assert "<svg" in roofline_svg(points, **sample)


def test_what_lesson_12_says_about_the_sample_is_what_it_shows():
    from kuiper.course.lessons import lessons

    notes = " ".join((lessons()[12] / "notes.md").read_text().split())
    pool = next(p for p in roofline.SAMPLE["points"] if "MaxPool2d" in p["label"])
    share = pool["gflops"] / (roofline.SAMPLE["bandwidth_gbs"] * pool["intensity"])
    assert f"max-pooling kernel reaches {share:.0%} of its memory roof" in notes
    relu = next(p for p in roofline.SAMPLE["points"] if "ReLU" in p["label"])
    assert relu["gflops"] > roofline.SAMPLE["bandwidth_gbs"] * relu["intensity"]  # passes it
