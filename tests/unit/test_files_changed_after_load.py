"""A model's files changed after `kuiper.load` change nothing a graph computes (issue 31).

The CPU backend's weights were views of a map of the .pnnx.bin: truncated after the load (a
re-export over a model a process is serving does that), the next inference died of SIGBUS
(exit status 135); rewritten in place, the graph computed silently with bytes whose CRC was
never checked. Now each weight is read into memory of the graph's own and verified there
(parser/binfile.py), and the file is closed after the load.

Each change runs in a child process: were the fix undone, a SIGBUS would take down the child,
not the test session.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SEEDS = ROOT / "kuiper" / "fuzz" / "seeds"
CHANGES = ["truncate", "truncate to nothing", "rewrite in place", "append a second archive",
           "replace", "delete", "rewrite the param"]

SCRIPT = """
import os, shutil, sys, zipfile
import numpy as np
import kuiper
from kuiper.fuzz.sandbox import random_inputs

seeds, work, backend, change = sys.argv[1:5]
for ext in ("param", "bin"):
    shutil.copyfile(os.path.join(seeds, f"residual.pnnx.{ext}"),
                    os.path.join(work, f"m.pnnx.{ext}"))
weights, param = os.path.join(work, "m.pnnx.bin"), os.path.join(work, "m.pnnx.param")
graph = kuiper.load(param, backend=backend)
inputs = random_inputs(graph)
before = [np.array(y, copy=True) for y in graph.forward(*inputs)]
other = open(os.path.join(seeds, "small_cnn.pnnx.bin"), "rb").read()
size = os.path.getsize(weights)
if change == "truncate":
    os.truncate(weights, size // 3)
elif change == "truncate to nothing":
    os.truncate(weights, 0)
elif change == "rewrite in place":  # the same inode: a map of the file would see this
    with open(weights, "r+b") as f:
        f.write(bytes(range(256)) * (size // 256) + bytes(size % 256))
elif change == "append a second archive":
    with open(weights, "ab") as f:
        f.write(other)
elif change == "replace":
    with open(weights + ".new", "wb") as f:
        f.write(other)
    os.replace(weights + ".new", weights)
elif change == "delete":
    os.unlink(weights)
else:
    with open(param, "w") as f:
        f.write("not a model any more")
for run in range(2):
    after = graph.forward(*inputs)
    assert all(np.array_equal(a, b, equal_nan=True) for a, b in zip(after, before)), run
print("same outputs")
"""


@pytest.mark.parametrize("change", CHANGES)
def test_a_change_after_the_load_changes_nothing(tmp_path, backend, change):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(SCRIPT), str(SEEDS),
                             str(tmp_path), backend, change], capture_output=True, text=True,
                            env=env, timeout=300)
    assert result.returncode == 0, (f"{change}: exit status {result.returncode} "
                                    f"(-7 or 135: SIGBUS)\n{result.stderr[-2000:]}")
    assert result.stdout.strip().endswith("same outputs")
