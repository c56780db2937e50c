"""The batch job on Ray Data: the same Predictor, spread over Ray's workers.

    import ray
    from kuiper.batch.ray_job import ray_dataset

    ray.init()                                   # a local Ray; a cluster: ray.init("auto")
    ds = ray_dataset("model.pnnx.param", files, backend="cpu", workers=4)
    for row in ds.iter_rows(): ...               # {"path": ..., "out0": ...}

What happens: `ray.data.from_items(files)` makes a dataset of paths; `map_batches(Predictor,
concurrency=workers, ...)` starts `workers` Ray actors, each of which builds ONE Predictor
(loads the model once) and then gets `batch_size` paths per call, reads them where it runs
and returns the outputs. Ray Data schedules the batches, streams them, retries failed
workers and shows its own progress; Kuiper schedules nothing.

On a cluster of several machines, the same code runs unchanged once `ray.init` connects to
it (`ray start --head` on one machine, `ray start --address=HEAD:6379` on the others, then
`ray.init(address="auto")` or RAY_ADDRESS=HEAD:6379 on the head). Each machine needs Kuiper
installed and the files at the same path (a shared file system, or object storage that
`ray.data.read_binary_files` reads: then pass an `input` column instead of paths). `backend=
"opencl"` with `num_gpus=1` per worker puts one worker on each GPU; on PoCL, give each worker
the cores it should use (`num_cpus`), as PoCL uses every core it sees.

Ray is an extra: `pip install "kuiper-engine[ray]"`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from kuiper.batch.predictor import Predictor
from kuiper.core.errors import KuiperError

RAY_HINT = ('Ray is not installed: `pip install "kuiper-engine[ray]"` (or `pip install '
            '"ray[data]"`)')


def import_ray():
    try:
        import ray
        import ray.data  # noqa: F401 - Ray Data is the part Kuiper uses
    except ImportError:
        raise KuiperError(RAY_HINT) from None
    return ray


def ray_dataset(model: str, files: Sequence[str], backend: str = "cpu", workers: int = 2,
                batch_size: int = 32, task: str | None = None, model_batch: int = 1,
                num_cpus: float | None = None, num_gpus: float | None = None,
                **load_options: Any):
    """A lazy Ray dataset of the Predictor's results for `files` (module docstring): one row
    per file, `path` and `out0`, `out1` .... Ray must be initialised (`ray.init`)."""
    ray = import_ray()
    resources = {k: v for k, v in (("num_cpus", num_cpus), ("num_gpus", num_gpus))
                 if v is not None}
    return ray.data.from_items([{"path": str(f)} for f in files]).map_batches(
        Predictor, fn_constructor_kwargs={"model": str(model), "backend": backend,
                                          "task": task, "model_batch": model_batch,
                                          **load_options},
        batch_size=batch_size, batch_format="numpy", concurrency=workers, **resources)


def run_on_ray(model: str, files: Sequence[str], write=None, **options: Any) -> int:
    """Run the job and hand each result batch to `write` (kuiper/batch/local.save_outputs),
    in the order of `files`; returns how many inputs ran. Connects to the Ray cluster that
    RAY_ADDRESS names, else starts a local one (and shuts it down after)."""
    ray = import_ray()
    started = not ray.is_initialized()
    if started:
        ray.init(log_to_driver=False, include_dashboard=False)
    try:
        done = 0
        for batch in ray_dataset(model, files, **options).iter_batches(
                batch_size=options.get("batch_size", 32), batch_format="numpy"):
            done += len(batch["path"])
            if write is not None:
                write(batch)
    finally:
        if started:
            ray.shutdown()
    if done != len(files):
        raise KuiperError(f"the Ray job returned {done} result(s) for {len(files)} input(s)")
    return done


def collect(dataset, files: Sequence[str]) -> dict[str, np.ndarray]:
    """Every row of a ray_dataset as columns, stacked in the order of `files` (Ray Data may
    hand the blocks back in another order than they went in)."""
    position = {str(f): i for i, f in enumerate(files)}
    rows = sorted(dataset.take_all(), key=lambda row: position[str(row["path"])])
    return {key: np.stack([row[key] for row in rows]) for key in rows[0]} if rows else {}
