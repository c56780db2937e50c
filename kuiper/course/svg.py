"""A small SVG writer for the course's figures (kuiper/course/figures.py, roofline.py).

SVG is text: a change to a figure is a readable diff, and no plotting library is needed. Output is
deterministic (fixed rounding, no timestamps, no random ids).
"""

from __future__ import annotations

from html import escape

FONT = "font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\""

def _n(value: float) -> str:
    """A coordinate: at most one decimal, no trailing zeros (stable, short text)."""
    text = f"{value:.1f}".rstrip("0").rstrip(".")
    return "0" if text == "-0" else text


class Svg:
    """A small SVG writer: shapes in the order they are added, later ones on top."""

    def __init__(self, width: float, height: float, title: str):
        self.width, self.height, self.parts = width, height, []
        self.parts.append(f"<title>{escape(title)}</title>")
        self.parts.append(
            '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" '
            'markerHeight="7" orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z" '
            'fill="#555"/></marker></defs>')
        self.rect(0, 0, width, height, fill="white", stroke="none")

    def rect(self, x, y, w, h, fill="none", stroke="#333", rx=0, width=1.0, dash=""):
        """`dash`: an SVG stroke-dasharray ("4 3"): a dashed outline, for what never exists
        in memory."""
        dashed = f' stroke-dasharray="{dash}"' if dash else ""
        self.parts.append(f'<rect x="{_n(x)}" y="{_n(y)}" width="{_n(w)}" height="{_n(h)}" '
                          f'rx="{_n(rx)}" fill="{fill}" stroke="{stroke}" '
                          f'stroke-width="{_n(width)}"{dashed}/>')

    def text(self, x, y, content, size=12, anchor="middle", weight="normal", fill="#222"):
        self.parts.append(f'<text x="{_n(x)}" y="{_n(y)}" font-size="{_n(size)}" {FONT} '
                          f'text-anchor="{anchor}" font-weight="{weight}" fill="{fill}">'
                          f'{escape(str(content))}</text>')

    def arrow(self, x1, y1, x2, y2, colour="#555", width=1.2):
        self.parts.append(f'<line x1="{_n(x1)}" y1="{_n(y1)}" x2="{_n(x2)}" y2="{_n(y2)}" '
                          f'stroke="{colour}" stroke-width="{_n(width)}" '
                          'marker-end="url(#arrow)"/>')

    def render(self) -> str:
        head = (f'<svg xmlns="http://www.w3.org/2000/svg" width="{_n(self.width)}" '
                f'height="{_n(self.height)}" viewBox="0 0 {_n(self.width)} {_n(self.height)}">')
        return "\n".join([head, *self.parts, "</svg>"]) + "\n"
