"""Kuiper's fuzzer: the promise "every bad file gives a clear KuiperError, and nothing crashes",
checked rather than hoped.

- `seeds/`: real pnnx exports of small modules (`make_seeds.py` writes them).
- `param_mutations.py`, `bin_mutations.py`, `expressions.py`: what a hostile or broken file
  looks like, one damaged field at a time.
- `scenarios.py` (and `scenario_files.py`): what no model file reaches: files changed after a
  load, hostile cache files, failing plugins, wrong API arguments, edge values on both
  backends.
- `sandbox.py`: each case in a forked child with a time and a memory limit.
- `campaign.py`: many cases, a summary, failures saved as a replayable corpus.

    kuiper fuzz --cases 2000              # the same: python -m kuiper fuzz --cases 2000
"""
