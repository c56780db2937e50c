"""The device probes' answers on disk, for tensor_cores.py and vector_width.py.

Each probe asks a device a question once, in a child process, and keeps the answer in one JSON
file of Kuiper's cache folder, {probe key: answer}, the key naming the device and driver (and
whatever else the answer depends on). The probe checks each answer's type itself; this module
only reads and writes the file, the same way for both.
"""

from __future__ import annotations

import json
from pathlib import Path

from kuiper.core.cache import cache_dir, read_cache_file


def path(file_name: str) -> Path:
    return cache_dir() / file_name


def load(file_name: str) -> tuple[dict, str | None]:
    """The stored answers {probe key: answer} and, where the file cannot be used, why not
    (None for a good or missing file). A cache file Kuiper did not write (a FIFO, /dev/zero,
    a huge or deeply nested file, a 5,000-digit number, JSON that is not an object) gives no
    answers: the device is asked again, and the answer written over it."""
    try:
        data = json.loads(read_cache_file(path(file_name)))
    except FileNotFoundError:
        return {}, None
    except (OSError, ValueError, RecursionError) as e:
        return {}, str(e)[:200]
    if not isinstance(data, dict):
        return {}, "not a JSON object"
    return data, None


def save(file_name: str, answers: dict) -> None:
    """Write `answers` (all of them: load's, with the new one added) to the file."""
    try:
        target = path(file_name)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(answers, indent=1, sort_keys=True))
    except OSError:   # a read-only cache folder: asked again next time, nothing worse
        pass
