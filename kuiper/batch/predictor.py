"""`Predictor`: a Kuiper model behind Ray Data's `map_batches` contract (a class, so that each
worker loads the model once, in `__init__`, and reuses it for every batch it is given).

    predictor = Predictor("resnet18.pnnx.param", backend="opencl")
    out = predictor({"path": np.array(["a.npy", "b.png"])})   # {"path": ..., "out0": (2, ...)}

A batch is a dict of NumPy columns, as Ray Data passes one with `batch_format="numpy"`:

- `path`: the files to read: `.npy` arrays (one input each, with or without its batch
  dimension of 1) or images, prepared as `kuiper run` prepares them for `task`
  (kuiper/io/preprocess.py); or
- `input`: the inputs themselves, stacked along dimension 0.

It returns the batch's own columns and one column per model output (`out0`, `out1` ...),
stacked along dimension 0 in the batch's order. The inputs run through the model
`model_batch` at a time (default 1: each alone, as a plain loop of `graph(x)` runs them, so
that the results are the same arrays; more per call is faster for small models and equal
within float32 rounding).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from kuiper.core.errors import InputError, KuiperError
from kuiper.io.files import is_image

TASKS_FOR_IMAGES = ("classify", "detect", "raw")


class Predictor:
    """One Kuiper model, loaded once, run on batches of files or arrays (module docstring).

    `model`: a .pnnx.param (or an .onnx/.pt to convert); `backend`: "cpu" or "opencl";
    `task`: how images are prepared (classify, detect, raw: kuiper/io/preprocess.py), needed
    only for images; `model_batch`: inputs per model call; `load_options`: kuiper.load's
    (device=, threads=, ...). Everything is a plain value, so Ray can send the arguments to
    each worker (`fn_constructor_kwargs`)."""

    def __init__(self, model: str, backend: str = "cpu", task: str | None = None,
                 model_batch: int = 1, **load_options: Any):
        from kuiper.graph.load import load

        if model_batch < 1:
            raise KuiperError(f"model_batch must be 1 or more, got {model_batch}")
        self.model, self.backend, self.task, self.model_batch = model, backend, task, model_batch
        self.graph = load(model, backend=backend, **load_options)
        if len(self.graph.inputs) != 1:
            raise KuiperError(f"{model}: batch inference feeds one input, and the model has "
                              f"{len(self.graph.inputs)}")
        self.port = self.graph.inputs[0]
        self._prep = None

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        if "input" in batch:
            inputs = np.asarray(batch["input"])
        elif "path" in batch:
            inputs = np.concatenate([self.read(str(p)) for p in batch["path"]])
        else:
            raise KuiperError(f"a batch needs a 'path' or an 'input' column, got "
                              f"{sorted(batch)}")
        outputs = self.run(inputs)
        result = dict(batch)
        result.pop("input", None)  # the inputs are not results: do not carry them along
        for i, y in enumerate(outputs):
            result[f"out{i}"] = y
        return result

    def run(self, inputs: np.ndarray) -> list[np.ndarray]:
        """The model's outputs for `inputs` (N, ...), `model_batch` rows per call, stacked."""
        if len(inputs) == 0:
            return [np.empty((0, *p.shape[1:]), p.dtype) for p in self.graph.outputs]
        pieces: list[list[np.ndarray]] = []
        for start in range(0, len(inputs), self.model_batch):
            out = self.graph(inputs[start:start + self.model_batch])
            pieces.append([np.asarray(y) for y in (out if isinstance(out, tuple) else (out,))])
        return [np.concatenate(column) for column in zip(*pieces)]

    def read(self, path: str) -> np.ndarray:
        """One input file as a batch of 1 for the model's input."""
        from kuiper.io.inputs import load_input

        if is_image(path):
            check_task([path], self.task)
            return load_input(path, self.port, self.preprocessing())
        x = load_input(path, self.port)
        if x.ndim == len(self.port.shape) - 1:  # one sample without its batch dimension
            x = x[None]
        if x.ndim != len(self.port.shape) or x.shape[0] != 1:
            raise InputError(f"{path}: holds an array of shape {x.shape}; each file is one "
                             f"input of the model, {self.port} (its batch dimension of 1 "
                             "may be left out)")
        return x

    def preprocessing(self):
        if self._prep is None:
            from kuiper.io.preprocess import Preprocessing

            shape = self.port.shape
            channels = shape[1] if len(shape) == 4 and shape[1] is not None else 3
            self._prep = Preprocessing.for_task(self.task, channels)
        return self._prep


def check_task(files: Sequence[str], task: str | None) -> None:
    """Images are prepared for a task (resize, normalisation): refuse them without one."""
    image = next((f for f in files if is_image(f)), None)
    if image is not None and task is None:
        raise InputError(f"{image}: images are prepared for the model's task (resize, "
                         f"normalisation): give one of {', '.join(TASKS_FOR_IMAGES)} "
                         "(--task on the command line)")


def input_files(folder_or_files: Sequence[str]) -> list[str]:
    """The inputs named: files as given, a folder as its .npy and image files, sorted."""
    from pathlib import Path

    files: list[str] = []
    for item in map(Path, folder_or_files):
        if item.is_dir():
            found = sorted(str(p) for p in item.iterdir()
                           if p.is_file() and (p.suffix.lower() == ".npy" or is_image(p)))
            if not found:
                raise InputError(f"{item}: a folder with no input in it (looked for .npy "
                                 "files and images)")
            files += found
        elif item.is_file():
            files.append(str(item))
        else:
            raise InputError(f"{item}: no such file or folder")
    return files
