"""`kuiper bench --plot FILE`: the per-operator profile as a bar chart (needs matplotlib).

matplotlib is optional: `require_matplotlib()` runs before any timing, so a missing install is
reported at once with the command that fixes it, not after minutes of benchmarking.
"""

from __future__ import annotations

import os
from pathlib import Path

from kuiper.core.errors import KuiperError

PLOT_SUFFIXES = (".png", ".svg", ".pdf", ".jpg", ".jpeg")
MATPLOTLIB_HINT = "--plot needs matplotlib, which is not installed: pip install matplotlib"


def require_matplotlib(path: str | os.PathLike) -> None:
    if not str(path).lower().endswith(PLOT_SUFFIXES):
        raise KuiperError(f"--plot {path}: use a file name ending in "
                          f"{', '.join(PLOT_SUFFIXES)}")
    if not Path(path).parent.is_dir():
        raise KuiperError(f"--plot {path}: the folder {Path(path).parent} does not exist")
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise KuiperError(MATPLOTLIB_HINT) from None


def plot_profile(path: str | os.PathLike, profiles: dict[str, dict[str, float]],
                 types: dict[str, str], top: int = 25) -> None:
    """Horizontal bars: the `top` slowest operators (by the first profile), one bar per column.

    `profiles`: column label -> {operator name: seconds}; `types`: operator name -> type.
    """
    require_matplotlib(path)
    import matplotlib

    matplotlib.use("Agg")  # no window: write the file, also on a machine without a display
    import matplotlib.pyplot as plt

    first = next(iter(profiles.values()))
    names = sorted(first, key=lambda n: -first[n])[:top][::-1]  # slowest at the top
    height = 0.8 / max(1, len(profiles))
    fig, ax = plt.subplots(figsize=(9, 1.5 + 0.3 * len(names) * len(profiles)))
    for k, (label, profile) in enumerate(profiles.items()):
        ax.barh([i + k * height for i in range(len(names))],
                [profile.get(n, 0.0) * 1e3 for n in names], height=height, label=label)
    ax.set_yticks([i + height * (len(profiles) - 1) / 2 for i in range(len(names))])
    ax.set_yticklabels([f"{n} ({types.get(n, '?')})" for n in names], fontsize=8)
    ax.set_xlabel("time per inference (ms)")
    ax.set_title("Kuiper: time per operator")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
