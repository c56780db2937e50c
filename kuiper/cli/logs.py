"""`kuiper -v / -vv / -q`: how much the `kuiper` logger says on stderr.

The engine logs through `logging.getLogger("kuiper")` (and its children, e.g. `kuiper.tools`),
and stays silent by default as a library should: what to show is the application's choice. The
command line is such an application; it attaches one handler to that logger:

    (default)  progress, warnings and errors (INFO: "building OpenCL kernels...": a first
               OpenCL build takes seconds, and a silent pause looks like a hang)
    -v, -vv    + details for debugging (DEBUG)
    -q         errors only

Messages read `kuiper: warning: ...`, like the `kuiper: error: ...` line of a failed command.
"""

from __future__ import annotations

import logging
import sys
import warnings
from collections.abc import Callable

from kuiper.core.log import KuiperWarning

LOGGER_NAME = "kuiper"


class StderrHandler(logging.StreamHandler):
    """A StreamHandler that writes to whatever `sys.stderr` is *now* (pytest's capsys and
    contextlib.redirect_stderr replace it after the handler is made)."""

    def __init__(self):
        super().__init__(sys.stderr)

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, _value):  # StreamHandler.__init__ assigns it; we always look it up
        pass


def level_for(verbose: int, quiet: bool) -> int:
    if quiet:
        return logging.ERROR
    return logging.INFO if verbose == 0 else logging.DEBUG


def configure(verbose: int = 0, quiet: bool = False) -> Callable[[], None]:
    """Point the `kuiper` logger at stderr at the level the flags ask for; returns `undo`.

    `main()` calls `undo` when the command ends, so calling it many times in one process (the
    tests do) neither stacks handlers, which would print every line twice, nor leaves the
    logger at -q's level for whoever logs next. Propagation to the root logger is left on: an
    application (or pytest's caplog) that listens there still hears Kuiper.
    """
    logger = logging.getLogger(LOGGER_NAME)
    old_level = logger.level
    for handler in list(logger.handlers):
        if isinstance(handler, StderrHandler):
            logger.removeHandler(handler)
    handler = StderrHandler()
    handler.setFormatter(logging.Formatter("kuiper: %(levelname_lower)s: %(message)s",
                                           defaults={"levelname_lower": ""}))
    handler.addFilter(_lowercase_level)
    logger.addHandler(handler)
    logger.setLevel(level_for(verbose, quiet))
    # Kuiper's own warnings (kuiper.KuiperWarning: operators falling back to the host) read
    # `kuiper: warning: ...` like the rest, not Python's "file:line: KuiperWarning" form.
    old_showwarning = warnings.showwarning

    def showwarning(message, category, filename, lineno, file=None, line=None):
        if issubclass(category, KuiperWarning):
            logger.warning("%s", message)
        else:
            old_showwarning(message, category, filename, lineno, file, line)

    warnings.showwarning = showwarning

    def undo() -> None:
        logger.removeHandler(handler)
        logger.setLevel(old_level)
        warnings.showwarning = old_showwarning

    return undo


def _lowercase_level(record: logging.LogRecord) -> bool:
    record.levelname_lower = record.levelname.lower()
    return True
