"""Progress on long work: a bar on a terminal, one log line elsewhere.

    with progress("building OpenCL kernels for 52 operators", total=52) as advance:
        for op in ops:
            ...
            advance()        # or advance(n)

What shows depends on who is watching, and a library must not print on its own
(kuiper/core/log.py):

- the `kuiper` logger shows INFO (the command line sets that up; in Python,
  `logging.basicConfig(level=logging.INFO)`) and stderr is a terminal: a rich progress bar on
  stderr (done/total, rate, elapsed, time left), removed when the work ends;
- the logger shows INFO but stderr is a file or a pipe (CI logs, `2> log.txt`): the INFO line
  "<description>..." when the work starts: no bar redrawn into a file;
- otherwise nothing.
Under -v (DEBUG) a line at the end says how long it took.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import time
from collections.abc import Callable, Iterator

logger = logging.getLogger("kuiper.progress")


def shows_bar() -> bool:
    """Whether a bar would show now: INFO enabled for the kuiper logger, stderr a terminal."""
    return logger.isEnabledFor(logging.INFO) and sys.stderr.isatty()


@contextlib.contextmanager
def progress(description: str, total: int, unit: str = "steps",
             log: logging.Logger | None = None, level: int = logging.INFO,
             label: str | None = None) -> Iterator[Callable[[int], None]]:
    """Yields `advance(n=1)`; see the module docstring for what shows. `log` is the logger of
    the module doing the work (its name then shows in -v output); `level` that of its line
    (DEBUG: work the user was told about already, shown under -v only, never as a bar);
    `label` what the bar says, when `description` is too long for a terminal's line."""
    log = log or logger
    start = time.perf_counter()
    done = 0
    bar = (_rich_bar(label or description, total, unit)
           if level >= logging.INFO and shows_bar() and total > 0 else None)
    if bar is None:
        log.log(level, "%s...", description)
    try:
        if bar is None:
            def advance(n: int = 1) -> None:
                nonlocal done
                done += n
            yield advance
        else:
            with bar as (rich_progress, task):
                def advance(n: int = 1) -> None:
                    nonlocal done
                    done += n
                    rich_progress.advance(task, n)
                yield advance
    finally:
        seconds = time.perf_counter() - start
        if done:  # the time it took: under -v (the start line, or the bar, said what runs)
            log.debug("%s: %d %s in %.1f s", description, done, unit, seconds)


@contextlib.contextmanager
def _rich_bar(description: str, total: int, unit: str):
    """(progress, task) of a transient rich bar on stderr."""
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        ProgressColumn,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )
    from rich.text import Text

    class Rate(ProgressColumn):
        """'12.3 inputs/s' once rich has measured a speed."""

        def render(self, task) -> Text:
            return Text(f"{task.speed:.1f} {unit}/s" if task.speed else f"- {unit}/s")

    columns = [TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), Rate(),
               TimeElapsedColumn(), TextColumn("left"), TimeRemainingColumn()]
    with Progress(*columns, console=Console(stderr=True), transient=True) as rich_progress:
        yield rich_progress, rich_progress.add_task(description, total=total)
