"""Batch inference: many inputs through one model, in one process or on a Ray cluster.

A user with a folder of a million images, or a service with a queue of requests, needs more
than `graph(x)` in a loop: inputs read and prepared alongside, progress and throughput, and a
way past one process and one machine. Kuiper does not schedule work itself: Ray Data
(https://docs.ray.io/en/latest/data/) is what people use to spread a batch job over the
cores of one machine or the machines of a cluster, and Kuiper plugs into it.

- `predictor.py`: `Predictor`, a callable class with Ray Data's `map_batches` contract (a dict
  of NumPy columns in, a dict out). It loads the Kuiper model once per instance (once per Ray
  worker), on the CPU or an OpenCL device, reads the files a batch names, and runs them.
- `local.py`: the same Predictor over a list of files in this process, with a progress bar and
  the throughput: `kuiper batch MODEL FOLDER`.
- `ray_job.py`: the same job on Ray, `ray.data.from_items(files).map_batches(Predictor, ...)`,
  on a local Ray (`ray.init()`) or a cluster (`ray.init(address="auto")`, or RAY_ADDRESS):
  `kuiper batch MODEL FOLDER --ray`.
- `pipeline.py`: `run_on_device`, models in a row on one OpenCL device, each intermediate
  result left on the device (`device_outputs=True`) for the next model to read.

One Predictor class does the reading and the running in both, so the results are the same
arrays: each input runs through the model alone (at the model's own batch size) unless
`model_batch` asks for more per call, exactly as a plain loop of `graph(x)` would run it.
"""
