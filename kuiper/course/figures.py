"""The course's figures, drawn by code from the real engine, as SVG: `kuiper course figures`.

Each figure is computed from what it shows (the demo model's graph and level schedule come
from kuiper/graph/topo.py; the im2col matrix from layers/cpu_helpers/im2col.py), so it cannot drift
from the code: tests/course/test_figures.py checks that the committed files are exactly what
this module draws now. SVG is text: a change to a figure is a readable diff, and no plotting
library is needed. Output is deterministic (fixed rounding, no timestamps, no random ids).
"""

from __future__ import annotations

from collections.abc import Callable
from html import escape
from pathlib import Path

import numpy as np

from kuiper.course.svg import FONT, Svg, _n

# One colour per operator family (the figures use the same colours in every lesson).
FAMILY_COLOURS = {
    "pnnx.Input": "#e0e0e0", "pnnx.Output": "#e0e0e0", "nn.Conv2d": "#9ecae1",
    "nn.ReLU": "#a1d99b", "nn.MaxPool2d": "#fdd0a2", "torch.flatten": "#dadaeb",
    "nn.Linear": "#fcbba1",
}
# Patch colours of the im2col figure: output pixel p's patch and its column share a colour.
PATCH_COLOURS = ["#6baed6", "#fd8d3c", "#74c476", "#9e9ac8"]


def _shape(operand) -> str:
    return "×".join("?" if d is None else str(d) for d in operand.shape or ())


def demo_graph() -> str:
    """The demo model's operators, one row per level of the level schedule (lesson 4):
    operators of one level wait for nothing in that level, arrows are operands with shapes."""
    from kuiper.demo import DIGITS_PARAM
    from kuiper.graph import topo
    from kuiper.graph.runtime_graph import RuntimeGraph

    graph = RuntimeGraph(DIGITS_PARAM).init()
    levels = topo.level_schedule(graph.operators)
    box_w, box_h, row_h, top = 190, 34, 58, 66
    widest = max(len(level) for level in levels)
    width = max(560, widest * (box_w + 30) + 200)
    left = (width - widest * (box_w + 30) + 30) / 2
    svg = Svg(width, top + len(levels) * row_h + 10,
              "the demo model (kuiper/demo/digits.pnnx.param) by level")
    svg.text(width / 2, 24, "The demo model, one row per level of its schedule", size=14,
             weight="bold")
    svg.text(width / 2, 42, "kuiper/demo/digits.pnnx.param, levels from kuiper/graph/topo.py "
             "(level_schedule)", size=10, fill="#555")
    centre: dict[str, tuple[float, float]] = {}
    for k, level in enumerate(levels):
        y = top + k * row_h
        svg.text(left - 80, y + box_h / 2 + 4, f"level {k}", size=12, anchor="start",
                 fill="#666")
        for i, op in enumerate(level):
            x = left + i * (box_w + 30)
            svg.rect(x, y, box_w, box_h, fill=FAMILY_COLOURS.get(op.type, "#f0f0f0"), rx=6)
            svg.text(x + box_w / 2, y + 15, op.type, size=12, weight="bold")
            svg.text(x + box_w / 2, y + 28, op.name, size=10, fill="#444")
            centre[op.name] = (x + box_w / 2, y)
    for op in graph.operators:
        for operand in op.inputs:
            if operand.producer is None:
                continue
            x1, y1 = centre[operand.producer.name]
            x2, y2 = centre[op.name]
            svg.arrow(x1, y1 + box_h, x2, y2 - 1)
            svg.text(max(x1, x2) + 8, (y1 + box_h + y2) / 2 + 4, _shape(operand), size=10,
                     anchor="start", fill="#555")
    return svg.render()


def im2col_figure() -> str:
    """A 4x4 input, a 3x3 kernel at stride 1: its four patches become the four columns of a
    9x4 matrix (lesson 6), and the convolution is one row of weights times that matrix."""
    from kuiper.layers.cpu_helpers.im2col import im2col

    x = np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4)
    cols = im2col(x, (3, 3), (1, 1), (1, 1), (2, 2))[0, 0]  # (K=9, P=4), real code
    cell = 30
    svg = Svg(720, 375, "im2col: the patches of a 3x3 convolution become matrix columns")
    svg.text(360, 24, "im2col: each output pixel's 3×3 patch becomes one column "
             "(layers/cpu_helpers/im2col.py)", size=13, weight="bold")
    # the input, with each patch outlined in its colour (offset so that outlines stay apart)
    gx, gy = 40, 70
    svg.text(gx, gy - 12, "input x (4×4), values = flat index", size=11, anchor="start")
    for r in range(4):
        for c in range(4):
            svg.rect(gx + c * cell, gy + r * cell, cell, cell, fill="#f7f7f7", stroke="#999")
            svg.text(gx + c * cell + cell / 2, gy + r * cell + 19, int(x[0, 0, r, c]), size=12)
    for p in range(4):
        oy, ox = divmod(p, 2)
        inset = 2 + p * 1.5
        svg.rect(gx + ox * cell + inset, gy + oy * cell + inset, 3 * cell - 2 * inset,
                 3 * cell - 2 * inset, stroke=PATCH_COLOURS[p], width=2.5, rx=3)
    # the output grid: pixel p in its patch's colour
    outx, outy = 40, 250
    svg.text(outx + cell, outy - 12, "output (2×2)", size=11)
    for p in range(4):
        oy, ox = divmod(p, 2)
        svg.rect(outx + ox * cell, outy + oy * cell, cell, cell, fill=PATCH_COLOURS[p])
        svg.text(outx + ox * cell + cell / 2, outy + oy * cell + 19, f"p{p}", size=11)
    svg.text(outx, outy + 2 * cell + 24, "p = y·OW + x", size=11, anchor="start", fill="#555")
    # the column matrix, computed by the real im2col
    mx, my = 300, 70
    svg.text(mx + 2 * cell, my - 12, "cols (K = 9 rows, P = 4 columns)", size=11)
    for k in range(cols.shape[0]):
        i, j = divmod(k, 3)
        svg.text(mx - 8, my + k * cell + 19, f"k={k} (i={i}, j={j})", size=10, anchor="end",
                 fill="#666")
        for p in range(cols.shape[1]):
            svg.rect(mx + p * cell, my + k * cell, cell, cell, fill=PATCH_COLOURS[p])
            svg.text(mx + p * cell + cell / 2, my + k * cell + 19, int(cols[k, p]), size=12)
    for p in range(4):
        svg.text(mx + p * cell + cell / 2, my + 9 * cell + 16, f"p{p}", size=10)
    svg.arrow(gx + 4 * cell + 10, gy + 1.5 * cell, mx - 95, gy + 1.5 * cell)
    # the GEMM that finishes the convolution
    gx2 = mx + 4 * cell + 40
    svg.text(gx2, my + 20, "then the convolution is one GEMM:", size=12, anchor="start")
    svg.text(gx2, my + 44, "weight (Cout × 9) @ cols (9 × 4)", size=12, anchor="start")
    svg.text(gx2, my + 64, "= output (Cout × 4) → (Cout, 2, 2)", size=12, anchor="start")
    svg.text(gx2, my + 104, "cols[k, p] = x[y·sh + i·dh, x·sw + j·dw]", size=11,
             anchor="start", fill="#555")
    svg.text(gx2, my + 124, "k = (c·kh + i)·kw + j,  p = y·OW + x", size=11, anchor="start",
             fill="#555")
    svg.text(gx2, my + 164, "neighbouring patches overlap:", size=11, anchor="start",
             fill="#555")
    svg.text(gx2, my + 182, "x is copied up to 9 times,", size=11, anchor="start", fill="#555")
    svg.text(gx2, my + 200, "the price of one big fast GEMM", size=11, anchor="start",
             fill="#555")
    return svg.render()


def gemm_tiling() -> str:
    """clkernels/gemm.h's blocking, with its default sizes (clkernels/tile_sizes.h): a
    work-group's tile of C, the slabs of A and B it stages in local memory, and one
    work-item's register block."""
    import re

    from kuiper.clkernels import KERNEL_DIR

    header = (KERNEL_DIR / "tile_sizes.h").read_text()
    size = {name: int(value) for name, value in
            re.findall(r"#define (TILE_[MNK]|WPT_[MN])\s+(\d+)", header)}
    tm, tn, tk, wm, wn = (size[k] for k in ("TILE_M", "TILE_N", "TILE_K", "WPT_M", "WPT_N"))
    lm, ln = tm // wm, tn // wn  # work-items per group along M and N
    unit, slabs = 160 / max(tm, tn), 4  # pixels per element; K drawn as 4 slabs
    k_px = slabs * tk * unit
    bx, by = 270, 70                    # B's band: K rows x TILE_N columns, above C
    ax, ay = bx - k_px - 20, by + k_px + 20  # A's band: TILE_M rows x K columns, left of C
    cx, cy = bx, ay
    svg = Svg(740, cy + tm * unit + 40, "gemm.h: local-memory tiling and register blocking")
    svg.text(370, 24, "Tiling and register blocking in clkernels/gemm.h", size=14,
             weight="bold")
    svg.text(370, 42, f"TILE_M={tm} TILE_N={tn} TILE_K={tk} WPT_M={wm} WPT_N={wn} "
             "(the header's own #defines)", size=10, fill="#555")
    # the bands of A and B this work-group reads, one slab of each highlighted
    svg.rect(bx, by, tn * unit, k_px, fill="#f7f7f7", stroke="#999")
    svg.rect(ax, ay, k_px, tm * unit, fill="#f7f7f7", stroke="#999")
    svg.rect(bx, by + tk * unit, tn * unit, tk * unit, fill="#c6dbef", stroke="#3182bd")
    svg.rect(ax + tk * unit, ay, tk * unit, tm * unit, fill="#c6dbef", stroke="#3182bd")
    svg.text(bx + tn * unit / 2, by - 8, f"B: a {tk}×{tn} slab to local memory", size=11)
    svg.text(ax + k_px / 2, ay - 8, f"A: a {tm}×{tk} slab", size=11)
    # C's tile: one cell per work-item; one work-item's register block highlighted
    svg.rect(cx, cy, tn * unit, tm * unit, fill="#fff5eb", stroke="#333")
    for i in range(1, lm):
        svg.parts.append(f'<line x1="{_n(cx)}" y1="{_n(cy + i * wm * unit)}" '
                         f'x2="{_n(cx + tn * unit)}" y2="{_n(cy + i * wm * unit)}" '
                         'stroke="#fdd0a2" stroke-width="0.6"/>')
    for j in range(1, ln):
        svg.parts.append(f'<line x1="{_n(cx + j * wn * unit)}" y1="{_n(cy)}" '
                         f'x2="{_n(cx + j * wn * unit)}" y2="{_n(cy + tm * unit)}" '
                         'stroke="#fdd0a2" stroke-width="0.6"/>')
    wi, wj = lm // 3, (2 * ln) // 3  # one work-item, off-centre
    svg.rect(cx + wj * wn * unit, cy + wi * wm * unit, wn * unit, wm * unit, fill="#e6550d",
             stroke="#a63603")
    # the rows of A and columns of B that work-item reads, in the staged slabs
    svg.rect(ax + tk * unit, ay + wi * wm * unit, tk * unit, wm * unit, fill="#e6550d",
             stroke="none")
    svg.rect(bx + wj * wn * unit, by + tk * unit, wn * unit, tk * unit, fill="#e6550d",
             stroke="none")
    svg.text(cx + tn * unit / 2, cy + tm * unit + 18,
             f"C: a {tm}×{tn} tile per work-group of {lm}×{ln} = {lm * ln} work-items",
             size=11)
    # the arithmetic, in numbers from the same sizes
    tx = cx + tn * unit + 30
    lines = [
        ("one work-group, per slab of K:", "#222"),
        (f"  loads {tm}×{tk} + {tk}×{tn} = {tm * tk + tk * tn} values", "#555"),
        (f"  for {tm}×{tn}×{tk} = {tm * tn * tk} multiply-adds", "#555"),
        (f"  1 global load per {tm * tn * tk // (tm * tk + tk * tn)} multiply-adds", "#555"),
        ("  (a naive kernel: 2 loads per multiply-add)", "#555"),
        ("", "#222"),
        ("one work-item (dark), per k:", "#222"),
        (f"  {wm} values of A + {wn} of B from local memory", "#555"),
        (f"  feed {wm}×{wn} = {wm * wn} accumulators in registers", "#555"),
    ]
    for i, (line, colour) in enumerate(lines):
        svg.text(tx, by + 14 + i * 19, line, size=11, anchor="start", fill=colour)
    return svg.render()


def tap_lowering() -> str:
    """layers/cpu_helpers/tap_gemm.py's trick on a 3x3 input padded to 5x5: on an output grid
    as wide as the padded input, tap (i, j) reads the flat input at one constant offset
    i*Wp + j, a view, so the convolution is one GEMM per tap with no im2col copy."""
    h = w = 3
    hp, wp = h + 2, w + 2            # padding 1
    ti, tj = 1, 2                    # the tap drawn
    offset = ti * wp + tj
    grid = h * wp                    # output positions on the wide grid
    cell = 28
    valid, garbage = "#e6550d", "#fdd0a2"
    svg = Svg(760, 350, "tap lowering: one GEMM per kernel tap, reading the input in place")
    svg.text(380, 24, "Convolution by taps (layers/cpu_helpers/tap_gemm.py): no im2col copy",
             size=14, weight="bold")
    svg.text(380, 42, f"a {h}×{w} input padded to {hp}×{wp}, kernel 3×3; drawn: tap (i, j) = "
             f"({ti}, {tj}), offset i·Wp + j = {offset}", size=10, fill="#555")
    # the padded input, flat indices, cells read by the drawn tap coloured
    px, py = 40, 80
    svg.text(px, py - 10, f"padded input ({hp}×{wp}), flat index", size=11, anchor="start")
    for r in range(hp):
        for c in range(wp):
            flat = r * wp + c
            read = flat - offset
            fill = "#f0f0f0" if r in (0, hp - 1) or c in (0, wp - 1) else "white"
            if 0 <= read < grid:
                fill = valid if read % wp < w else garbage
            svg.rect(px + c * cell, py + r * cell, cell, cell, fill=fill, stroke="#999")
            svg.text(px + c * cell + cell / 2, py + r * cell + 18, flat, size=11)
    # the wide output grid
    ox, oy = 260, 80
    svg.text(ox, oy - 10, f"output on a {h}×{wp} grid", size=11, anchor="start")
    for r in range(h):
        for c in range(wp):
            fill = valid if c < w else garbage
            svg.rect(ox + c * cell, oy + r * cell, cell, cell, fill=fill, stroke="#999")
            svg.text(ox + c * cell + cell / 2, oy + r * cell + 18, r * wp + c, size=11)
    svg.text(ox, oy + h * cell + 18, f"last {wp - w} columns: garbage, cut off",
             size=10, anchor="start", fill="#555")
    # the flat input as one strip, with the tap's view bracketed
    sx, sy = 40, 300
    svg.text(sx, sy - 30, f"the same input, flat: tap ({ti}, {tj}) reads positions "
             f"{offset} .. {offset + grid - 1}, a view (no copy)", size=11, anchor="start")
    for k in range(hp * wp):
        read = k - offset
        fill = "white"
        if 0 <= read < grid:
            fill = valid if read % wp < w else garbage
        svg.rect(sx + k * cell, sy, cell, cell, fill=fill, stroke="#999")
        svg.text(sx + k * cell + cell / 2, sy + 18, k, size=10)
    svg.arrow(sx + offset * cell, sy - 10, sx + (offset + grid) * cell, sy - 10)
    # the arithmetic
    tx = 420
    lines = [
        "output pixel p = y·Wp + x reads input p + i·Wp + j:",
        "one constant offset per tap, so for every tap",
        "    out += W_ij (Cout × C) @ X_ij (C × pixels)",
        "with X_ij = the flat input from that offset on.",
        "",
        f"offsets of the 9 taps (Wp = {wp}):",
        "    " + "  ".join(str(i * wp + j) for i in range(3) for j in range(3)),
        "",
        "9 GEMMs with K = C instead of one with K = 9·C,",
        f"for (Wp − W)/W extra columns: {wp - w}/{w} here,",
        "4% at 56×56",
    ]
    for k, line in enumerate(lines):
        svg.text(tx, 86 + k * 17, line, size=11, anchor="start",
                 fill="#222" if k in (0, 5, 8) else "#555")
    return svg.render()


def roofline() -> str:
    """Lesson 12's roofline: kuiper/course/roofline.py draws its SAMPLE, measured on the course's
    machine (a student draws their own with the same function)."""
    from kuiper.course.roofline import sample_figure

    return sample_figure()


def memory_plan_figure(param_path: str | None = None, strategy: str = "greedy_by_size",
                       input_shapes=None) -> str:
    """The memory plan as a lifetime chart (kuiper/memory/): x = the execution step, y = the
    offset in the arena, one rectangle per tensor, from the step that writes it to the last
    one that reads it. Rectangles never overlap: tensors alive at the same time never share a
    byte. Default: the demo model on the CPU backend, after the graph passes."""
    from kuiper.demo import DIGITS_PARAM
    from kuiper.graph.load import load
    from kuiper.memory import plan
    from kuiper.memory.plan_memory import short_bytes

    path = param_path or DIGITS_PARAM
    with load(path, input_shapes=input_shapes) as graph:
        steps = graph.executor.plan.steps
        tensors = list(graph.executor.lifetimes)
        producer = {o.name: op for op in steps for o in op.outputs}
        result = plan(tensors, strategy)
        names = [op.name for op in steps]
    left, top, chart_w, chart_h = 80, 70, 620, 300
    step_w = chart_w / max(len(names), 1)
    scale = chart_h / max(result.total, 1)
    svg = Svg(left + chart_w + 40, top + chart_h + 130,
              f"memory plan ({strategy}) of {Path(path).name} as a lifetime chart")
    svg.text((left + chart_w + 40) / 2, 24, f"Memory plan ({strategy}): a rectangle per "
             "tensor, from its writer to its last reader", size=13, weight="bold")
    naive = sum(t.size for t in tensors)
    svg.text((left + chart_w + 40) / 2, 42,
             f"{Path(path).name}: arena {short_bytes(result.total)}, lower bound "
             f"{short_bytes(result.lower_bound)}, a buffer per tensor {short_bytes(naive)} "
             "(kuiper/memory/)", size=10, fill="#555")
    svg.rect(left, top, chart_w, chart_h, fill="#fbfbfb", stroke="#999")
    palette = ["#9ecae1", "#a1d99b", "#fdd0a2", "#dadaeb", "#fcbba1", "#c7e9c0", "#fdae6b"]
    for k, t in enumerate(sorted(tensors, key=lambda t: (t.first, t.name))):
        x = left + t.first * step_w
        w = (t.last - t.first + 1) * step_w
        y = top + chart_h - (result.offsets[t.name] + t.size) * scale
        h = t.size * scale
        op = producer.get(t.name)
        fill = FAMILY_COLOURS.get(op.type, palette[k % len(palette)]) if op else "#e0e0e0"
        svg.rect(x + 1, y, w - 2, h, fill=fill, stroke="#333", rx=2, width=0.8)
        if h >= 12 and w >= 60:  # room for a label
            svg.text(x + w / 2, y + h / 2 + 4, f"{t.name}: {short_bytes(t.size)}", size=9)
    bound_y = top + chart_h - result.lower_bound * scale
    svg.parts.append(f'<line x1="{_n(left)}" y1="{_n(bound_y)}" x2="{_n(left + chart_w)}" '
                     f'y2="{_n(bound_y)}" stroke="#d62728" stroke-width="1" '
                     'stroke-dasharray="5,3"/>')
    svg.text(left + chart_w - 4, bound_y - 4, "lower bound: the most bytes alive at once",
             size=9, anchor="end", fill="#d62728")
    svg.text(left - 8, top + 10, short_bytes(result.total), size=9, anchor="end")
    svg.text(left - 8, top + chart_h, "0", size=9, anchor="end")
    svg.text(left - 8, top + chart_h / 2, "offset", size=11, anchor="end")
    for i, name in enumerate(names):  # each step's operator, written downwards
        x, y = left + (i + 0.5) * step_w, top + chart_h + 8
        svg.parts.append(f'<text x="{_n(x)}" y="{_n(y)}" font-size="9" {FONT} '
                         f'text-anchor="end" fill="#444" transform="rotate(-60 {_n(x)} '
                         f'{_n(y)})">{escape(f"{i}: {name}")}</text>')
    svg.text(left + chart_w / 2, top + chart_h + 120, "execution step (the operators that "
             "run, after the graph passes)", size=11)
    return svg.render()


def attention_tiling() -> str:
    """Lesson 16's fused attention: kuiper/course/attention_figure.py draws one work-group of
    clkernels/attention_fused.cl with the sizes layers/opencl/attention.py gives it."""
    from kuiper.course.attention_figure import attention_tiling as draw

    return draw()


def precision_error() -> str:
    """Lesson 17's precisions: kuiper/course/precision_figure.py measures how far emulated tf32
    and fp16 GEMMs land from float32 as K grows, under the bounds of kuiper/core/precision.py."""
    from kuiper.course.precision_figure import precision_error as draw

    return draw()


FIGURES: dict[str, Callable[[], str]] = {
    "demo_graph.svg": demo_graph,
    "im2col.svg": im2col_figure,
    "tap_lowering.svg": tap_lowering,
    "gemm_tiling.svg": gemm_tiling,
    "roofline.svg": roofline,
    "memory_plan.svg": memory_plan_figure,
    "attention_tiling.svg": attention_tiling,
    "precision_error.svg": precision_error,
}


def build(folder: Path) -> list[Path]:
    """Write every figure into `folder` (course_notes/figures/); returns the paths."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name, draw in FIGURES.items():
        path = folder / name
        path.write_text(draw(), encoding="utf-8")
        written.append(path)
    return written


def stale(folder: Path) -> list[str]:
    """Figures whose committed file differs from what the code draws now (or is missing)."""
    folder = Path(folder)
    return [name for name, draw in FIGURES.items()
            if not (folder / name).is_file()
            or (folder / name).read_text(encoding="utf-8") != draw()]
