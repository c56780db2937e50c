"""The notes' figures are what kuiper/course/figures.py draws now, and the notes show them."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

from kuiper.course import figures
from kuiper.course.lessons import course_dir

ROOT = Path(__file__).resolve().parents[2]


def test_the_committed_figures_are_what_the_code_draws():
    assert figures.stale(course_dir() / "figures") == [], \
        "run `kuiper course figures` and commit the result"


def test_every_figure_is_well_formed_svg_and_shown_in_the_notes():
    linked = set()
    for md in course_dir().glob("*/notes.md"):
        for target in re.findall(r"!\[[^\]]+\]\(([^)]+\.svg)\)", md.read_text()):
            assert (md.parent / target).resolve().is_file(), f"{md}: {target} not found"
            linked.add(Path(target).name)
    for name in figures.FIGURES:
        root = ET.parse(course_dir() / "figures" / name).getroot()
        assert root.tag == "{http://www.w3.org/2000/svg}svg"
        assert root.find("{http://www.w3.org/2000/svg}title") is not None  # for screen readers
    assert linked == set(figures.FIGURES), "a figure no lesson shows, or a link to none"


def test_the_figures_are_drawn_from_the_code():
    graph = figures.demo_graph()
    for name in ("features.0", "classifier.3", "level 10", "1×16×4×4"):
        assert name in graph
    im2col = figures.im2col_figure()
    # column p0 of the 3x3 patches of a 4x4 arange: 0 1 2 4 5 6 8 9 10
    assert all(f">{v}</text>" in im2col for v in (0, 1, 2, 4, 5, 6, 8, 9, 10))
    assert figures.demo_graph() == graph  # deterministic: the same text every time


def test_kuiper_course_figures_rebuilds_and_checks(tmp_path):
    course = tmp_path / "course_notes"
    course.mkdir()
    env = dict(os.environ, KUIPER_COURSE_DIR=str(course))
    run = [sys.executable, "-m", "kuiper", "course", "figures"]
    stale = subprocess.run(run + ["--check"], cwd=ROOT, env=env, capture_output=True,
                           text=True, timeout=300, check=False)
    assert stale.returncode == 1 and "demo_graph.svg: differs" in stale.stdout, stale.stdout
    built = subprocess.run(run, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
                           check=False)
    assert built.returncode == 0, built.stderr
    assert sorted(p.name for p in (course / "figures").iterdir()) == sorted(figures.FIGURES)
    fresh = subprocess.run(run + ["--check"], cwd=ROOT, env=env, capture_output=True,
                           text=True, timeout=300, check=False)
    assert fresh.returncode == 0 and "figures up to date" in fresh.stdout


def test_the_tap_lowering_figure_tells_the_truth():
    """Its claim, checked with NumPy: on the wide grid, tap (i, j) is the flat padded input
    read from offset i*Wp + j, and the taps' products add up to the convolution."""
    import numpy as np
    import torch

    rng = np.random.default_rng(6)
    c, cout, h, w = 3, 4, 3, 3
    x = rng.standard_normal((c, h, w)).astype(np.float32)
    weight = rng.standard_normal((cout, c, 3, 3)).astype(np.float32)
    hp, wp = h + 2, w + 2
    flat = np.pad(x, ((0, 0), (1, 1), (1, 1))).reshape(c, hp * wp)
    flat = np.concatenate([flat, np.zeros((c, 2), np.float32)], axis=1)  # the last tap's tail
    out = np.zeros((cout, h * wp), np.float32)
    for i in range(3):
        for j in range(3):
            offset = i * wp + j
            out += weight[:, :, i, j] @ flat[:, offset:offset + h * wp]
    got = out.reshape(cout, h, wp)[:, :, :w]  # cut the garbage columns off
    want = torch.nn.functional.conv2d(torch.from_numpy(x[None]), torch.from_numpy(weight),
                                      padding=1)[0].numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    assert "reads positions 7 .. 21" in figures.tap_lowering()


def test_the_attention_figure_shows_the_sizes_the_layer_gives_its_kernel():
    """WG and BK come from layers/opencl/attention.py (fused_parameters), GPU and CPU."""
    from kuiper.course.attention_figure import HEAD, parameters

    gpu, cpu = parameters()
    drawn = figures.attention_tiling()
    assert f"heads of {HEAD}: WG={gpu['WG']} query rows per group, BK={gpu['BK']} keys" in drawn
    assert f"(WG={cpu['WG']}, BK={cpu['BK']} on a CPU device)" in drawn
    assert gpu != cpu, "the figure says the two differ"
    assert gpu["KSPLIT"] == 1, "the figure draws one query row per work-item"
    assert f"{gpu['WG']}×{gpu['BK']}" in drawn    # the tile of scores, in registers
