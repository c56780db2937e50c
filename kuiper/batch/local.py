"""A batch job in this process: files through one Predictor, chunk by chunk, with progress.

    predictor = Predictor("model.pnnx.param")
    report = run_local(predictor, input_files(["photos/"]), write=save_outputs("results/"))

Files are read and run `chunk` at a time (what one Ray worker gets per call, `batch_size`
there); the bar (kuiper/core/progress.py) shows inputs done, inputs per second and the time
left, on a terminal; elsewhere one log line says what runs.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from kuiper.batch.predictor import Predictor
from kuiper.core.errors import KuiperError
from kuiper.core.progress import progress

DEFAULT_CHUNK = 32


@dataclass
class Report:
    """What a batch job did: how many inputs, in how many seconds, where."""

    count: int
    seconds: float
    where: str

    @property
    def per_second(self) -> float:
        return self.count / self.seconds if self.seconds > 0 else float("inf")

    def line(self) -> str:
        return (f"{self.count} input(s) in {self.seconds:.2f} s: {self.per_second:.1f} "
                f"inputs/s ({self.where})")


def run_local(predictor: Predictor, files: Sequence[str],
              write: Callable[[dict[str, np.ndarray]], None] | None = None,
              chunk: int = DEFAULT_CHUNK) -> Report:
    """Run every file through `predictor`, `chunk` files per call, handing each result batch
    (the Predictor's dict: `path`, `out0` ...) to `write`."""
    if chunk < 1:
        raise KuiperError(f"the chunk size must be 1 or more, got {chunk}")
    start = time.perf_counter()
    name = Path(predictor.model).name
    with progress(f"{len(files)} input(s) through {name} on {predictor.backend}", len(files),
                  unit="inputs", label=f"{name.split('.')[0]} ({predictor.backend})") as advance:
        for first in range(0, len(files), chunk):
            names = files[first:first + chunk]
            result = predictor({"path": np.asarray(names)})
            if write is not None:
                write(result)
            advance(len(names))
    return Report(len(files), time.perf_counter() - start,
                  f"{predictor.backend}, 1 process")


def output_name(path: str) -> str:
    """An input's outputs are saved under its file name, with .npy for its suffix."""
    return Path(str(path)).stem


def check_output_names(files: Sequence[str]) -> None:
    """Two inputs whose outputs would be saved under one name (a.npy and a.png): refused
    before anything runs."""
    seen: dict[str, str] = {}
    for path in files:
        other = seen.setdefault(output_name(path), path)
        if other != path:
            raise KuiperError(f"{other} and {path} would both save their outputs as "
                              f"{output_name(path)}.npy: rename one")


def save_outputs(folder: str | Path) -> Callable[[dict[str, np.ndarray]], None]:
    """A `write` for run_local (and for the rows of a Ray job): each input's outputs saved as
    `<folder>/<input's name without suffix>.npy` (one output) or `.npz` (out0, out1 ...)."""
    folder = Path(folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise KuiperError(f"{folder}: cannot create the output folder "
                          f"({e.strerror or e})") from None

    def write(result: dict[str, np.ndarray]) -> None:
        names = [k for k in result if k.startswith("out")]
        for i, path in enumerate(result["path"]):
            stem = folder / output_name(path)
            if len(names) == 1:
                np.save(f"{stem}.npy", result[names[0]][i])
            else:
                np.savez(f"{stem}.npz", **{k: result[k][i] for k in names})

    return write
