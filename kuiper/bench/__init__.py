"""Benchmarks (`kuiper bench`, lesson 11): how fast is a model on each backend, where does the time
go, and how does that compare with PyTorch and onnxruntime on the same machine, in the same run?

Method (what makes the numbers worth writing down):
- the same seeded input for every column; `--warmup` untimed runs first (OpenCL compiles and
  binds, caches warm up), then `--repeat` timed runs of one whole inference each;
- the timed runs are *interleaved*: `--rounds` rounds, each giving every column a block of its
  runs. A shared or virtual machine speeds up and slows down by tens of percent over seconds;
  timing all of one column and then all of the next would pin such a phase on one framework.
  Before each block the machine idles for a moment, because every framework's worker threads
  keep spinning a while after their last task (OpenBLAS: ~0.1 s) and would slow the next one;
- that pause lets every framework's threads (and the CPU's clocks) go idle, and frameworks
  come back up to speed at different rates: on the 2-core VM of the README, PyTorch's second
  MobileNetV2 run after a 0.25 s pause is at full speed, PoCL's fourth. So after the pause each
  column runs untimed for `REWARM_SECONDS` (at least once) before its timed block: the medians
  are steady-state times for everyone. The first run after each pause is kept apart and shown
  as "after idle" (the latency of an occasional single inference);
- we report the median (typical) and the min (best case, least disturbed by other processes)
  rather than the mean, which one hiccup can move; p90/p99 show the tail (p99 of 20 runs is
  about the slowest run: ask for more runs, or --seconds, before trusting it); throughput is
  1 / median inferences per second, times the batch size for items per second;
- `--seconds S` times each column for about S seconds instead of `--repeat` runs, still in
  interleaved rounds (S / rounds per column per round, at least one run each);
- every column is checked against the first one (max |diff|), so a fast wrong answer shows;
- PyTorch and onnxruntime get `--threads` threads (default 2), and so do NumPy's BLAS calls
  (through threadpoolctl): ratios are only fair at equal thread counts;
- per operator (after the same pause): on the CPU each layer is timed through
  `graph.forward(observer=...)`; on OpenCL the kernels are timed on the device from profiling
  events (`event.profile.start/end`), so the host's enqueue overhead is not counted there;
  the line under the table shows the kernel launches per inference, their time, and the
  time between them (no kernel running: what merging small kernels can save);
- by kind of operator (depthwise, 1x1 and other convolutions, matrix products, ...): the same
  profiles summed by kind, beside onnxruntime's own (`SessionOptions.enable_profiling`, a
  second session), whose fused nodes do not match Kuiper's operators one to one
  (`kuiper/bench/kinds.py`).

Output: `--json` prints one JSON document instead of the tables; `--trace FILE.json` writes one
profiled run per Kuiper backend as a Chrome trace (ui.perfetto.dev, chrome://tracing);
`--plot FILE.png` draws the per-operator times (needs matplotlib).

References and model code: `--against torch` (and torch-cuda) runs pnnx's `<stem>_pnnx.py`,
Python code from the model's folder, so ask for it only for a model you trust. `--against
onnxruntime` runs a plain `<stem>.onnx` beside the model; when there is none, it exports one
from `<stem>_pnnx.py` only if you add `--trust-model-code`. Nothing else runs code from there.
"""
