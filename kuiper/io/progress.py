"""A progress bar for long commands (`kuiper bench`, `kuiper tune`): rich's, on stderr.

Only on a terminal: a bar redrawn into a log file or a pipe is noise, so elsewhere the caller
gets None and says how far it got in log lines instead.
"""

from __future__ import annotations

from typing import Any


def progress_bar() -> Any:
    """A rich Progress on stderr when stderr is a terminal; None otherwise (or without rich)."""
    try:
        from rich.console import Console
        from rich.progress import Progress
    except ImportError:
        return None
    console = Console(stderr=True)
    if not console.is_terminal:
        return None
    return Progress(console=console, transient=True)
