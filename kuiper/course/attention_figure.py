"""Lesson 16's figure: one work-group of the fused attention kernel, drawn from its parameters.

clkernels/attention_fused.cl gives a work-group WG query rows of one head and walks the keys
in tiles of BK: a tile of K and of V goes to local memory, each work-item computes its row's
BK scores in registers, folds them into its running max, sum and output (the online softmax),
and the tile is gone. The sizes are `fused_parameters` of layers/opencl/attention.py, asked
for a GPU and for a CPU device (a stand-in device object: the figure must not depend on the
machine that draws it). kuiper/course/figures.py lists it with the others.
"""

from __future__ import annotations

from types import SimpleNamespace

from kuiper.course.svg import Svg

HEAD = 64          # head size of the drawing: ViT-S's and BERT-base's
TILES = 8          # key tiles drawn across S
GROUPS = 4         # work-groups drawn down L
EXAMPLE = 1024     # L = S of the memory arithmetic under the drawing
ROWS = 16 * EXAMPLE  # query rows over all heads: 16 heads of EXAMPLE tokens, one row per item


def parameters() -> tuple[dict, dict]:
    """fused_parameters for a GPU and for a CPU device, for ROWS query rows (with few
    rows a GPU shares each row among KSPLIT work-items; the figure draws the many-row case)."""
    import pyopencl as cl

    from kuiper.layers.opencl.attention import fused_parameters

    gpu = fused_parameters(SimpleNamespace(type=cl.device_type.GPU), HEAD, HEAD, ROWS)
    cpu = fused_parameters(SimpleNamespace(type=cl.device_type.CPU), HEAD, HEAD, ROWS)
    return gpu, cpu


def attention_tiling() -> str:
    gpu, cpu = parameters()
    wg, bk = gpu["WG"], gpu["BK"]
    tile_w, group_h, head_px = 40, 44, 56       # pixels: a tile of keys, a group, a head
    sx, sy = 190, 150                           # top-left of the L x S scores
    s_w, s_h = TILES * tile_w, GROUPS * group_h
    tile, group = 3, 1                          # the tile and the work-group drawn dark
    tx, gy = sx + tile * tile_w, sy + group * group_h
    svg = Svg(840, 500, "attention_fused.cl: one work-group, keys in tiles, scores in registers")
    svg.text(420, 24, "Fused attention: one work-group of clkernels/attention_fused.cl",
             size=14, weight="bold")
    svg.text(420, 42, f"heads of {HEAD}: WG={wg} query rows per group, BK={bk} keys per tile "
             f"on a GPU (WG={cpu['WG']}, BK={cpu['BK']} on a CPU device): fused_parameters",
             size=10, fill="#555")
    # K^T above the scores: one column per key; the current tile staged in local memory
    ky = sy - head_px - 16
    svg.rect(sx, ky, s_w, head_px, fill="#f7f7f7", stroke="#999")
    svg.rect(tx, ky, tile_w, head_px, fill="#c6dbef", stroke="#3182bd", width=1.5)
    svg.text(sx + s_w / 2, ky - 8, f"K^T ({HEAD} × S): a tile of {bk} keys to local memory",
             size=11)
    # Q left of the scores: the group's rows, one per work-item, in registers
    qx = sx - head_px - 16
    svg.rect(qx, sy, head_px, s_h, fill="#f7f7f7", stroke="#999")
    svg.rect(qx, gy, head_px, group_h, fill="#9ecae1", stroke="#3182bd", width=1.5)
    svg.text(qx - 8, gy + group_h / 2 - 4, f"Q: {wg} rows,", size=11, anchor="end")
    svg.text(qx - 8, gy + group_h / 2 + 10, "one per work-item", size=11, anchor="end")
    # the L x S scores: never written; the group's current tile lives in registers
    svg.rect(sx, sy, s_w, s_h, fill="#fbfbfb", stroke="#bbb", dash="5 4")
    for i in range(1, TILES):
        x = sx + i * tile_w
        svg.parts.append(f'<line x1="{x}" y1="{sy}" x2="{x}" y2="{sy + s_h}" stroke="#e5e5e5"/>')
    svg.rect(sx, gy, s_w, group_h, fill="#fff5eb", stroke="#fdae6b", dash="5 4")
    svg.rect(tx, gy, tile_w, group_h, fill="#fd8d3c", stroke="#a63603", width=1.5, dash="3 2")
    svg.text(sx + s_w / 2, sy + s_h + 16, "scores, L × S per head: never written to memory",
             size=11, fill="#666")
    svg.text(tx + tile_w / 2, gy - 6, f"{wg}×{bk}", size=10, fill="#a63603")
    # V below, transposed so that key j stays column j: the same tile staged
    vy = sy + s_h + 30
    svg.rect(sx, vy, s_w, head_px, fill="#f7f7f7", stroke="#999")
    svg.rect(tx, vy, tile_w, head_px, fill="#c6dbef", stroke="#3182bd", width=1.5)
    svg.text(sx + s_w / 2, vy + head_px + 16, f"V, drawn as V^T ({HEAD} × S): the same "
             f"{bk} keys", size=11)
    # the running state of the group's rows: O (acc), m and total, in registers
    ox = sx + s_w + 40
    svg.rect(ox, gy, head_px, group_h, fill="#a1d99b", stroke="#31a354", width=1.5)
    svg.rect(ox + head_px + 8, gy, 10, group_h, fill="#a1d99b", stroke="#31a354")
    svg.rect(ox + head_px + 22, gy, 10, group_h, fill="#a1d99b", stroke="#31a354")
    svg.text(ox + head_px / 2, gy - 6, f"acc ({wg}×{HEAD})", size=10)
    svg.text(ox + head_px + 13, gy + group_h + 13, "m", size=10)
    svg.text(ox + head_px + 27, gy + group_h + 26, "total", size=10)
    svg.arrow(tx + tile_w + 2, gy + group_h / 2, ox - 2, gy + group_h / 2, colour="#a63603")
    notes = ["per tile, each work-item (a query row):",
             "  s = its q · each key of the tile  (BK scores)",
             "  m' = max(m, max s);  r = e^(m - m')",
             "  total = total·r + Σ e^(s - m')",
             "  acc = acc·r + Σ e^(s - m') v",
             "then the tile is forgotten; at the end",
             "  out = acc / total"]
    for i, line in enumerate(notes):
        svg.text(ox - 30, sy + s_h - 34 + i * 17, line, size=11, anchor="start",
                 fill="#222" if not line.startswith(" ") else "#555")
    # what it saves, in numbers from the same sizes
    per_head = EXAMPLE * EXAMPLE * 4
    lines = [f"At L = S = {EXAMPLE}, the unfused chain writes {per_head // 2**20} MiB of scores "
             "per head, rewrites them in the softmax, and reads them again for P V.",
             f"The fused kernel keeps {HEAD} + 2 floats per query row in registers, and reads "
             f"each tile of K and V once per group of {wg} rows."]
    for i, line in enumerate(lines):
        svg.text(420, vy + head_px + 50 + i * 18, line, size=11, fill="#333")
    return svg.render()
