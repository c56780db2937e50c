"""The two scenarios of kuiper/fuzz/scenarios.py about files on disk: a model's files changed
after its load (`changed_files`), and hostile files in place of Kuiper's caches
(`damaged_caches`). Each takes (rng, seed model, backend, work folder) and returns None when
all is well, or an Outcome "wrong"; a KuiperError it raises counts as "refused".
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import random
import shutil
from pathlib import Path

import numpy as np

from kuiper.fuzz.sandbox import Outcome, random_inputs

SEEDS = Path(__file__).resolve().parent / "seeds"


def _copy_model(seed: Path, work: Path, name: str = "model") -> Path:
    param = work / f"{name}.pnnx.param"
    shutil.copyfile(seed, param)
    weights = seed.with_name(seed.name.replace(".param", ".bin"))
    if weights.exists():
        shutil.copyfile(weights, param.with_name(f"{name}.pnnx.bin"))
    return param


# --- a model's files changed after the load ------------------------------------------------------
def _change(rng: random.Random, path: Path, other: bytes) -> str:
    """Change `path` as a re-export, an editor or an attacker would; says what was done."""
    what = rng.choice(["truncate", "rewrite", "append an archive", "replace", "delete"])
    if not path.exists():
        path.write_bytes(other)
        return f"create {path.name}"
    size = path.stat().st_size
    if what == "truncate":
        os.truncate(path, rng.randrange(size + 1))
    elif what == "rewrite":  # in place, same file: a mapping of it would see the new bytes
        with open(path, "r+b") as f:
            for _ in range(rng.randint(1, 50)):
                f.seek(rng.randrange(max(size, 1)))
                f.write(bytes([rng.randrange(256)]))
    elif what == "append an archive":
        with open(path, "ab") as f:
            f.write(other)
    elif what == "replace":
        new = path.with_name(path.name + ".new")
        new.write_bytes(other)
        os.replace(new, path)
    else:
        path.unlink()
    return f"{what} {path.name}"


def changed_files(rng: random.Random, seed: Path, backend: str, work: Path) -> Outcome | None:
    """Load and run, change the files, run again: the outputs must not change at all."""
    from kuiper.graph.load import load
    from kuiper.testing import edge_mismatch

    param = _copy_model(seed, work)
    graph = load(param, backend=backend)
    inputs = random_inputs(graph)
    before = [np.array(v, copy=True) for v in graph.forward(*inputs)]
    other = rng.choice(sorted(SEEDS.glob("*.pnnx.bin"))).read_bytes()
    targets = [param.with_name("model.pnnx.bin")] + ([param] if rng.random() < 0.3 else [])
    changes = [_change(rng, path, other) for path in targets]
    for run in range(2):
        for i, (now, then) in enumerate(zip(graph.forward(*inputs), before)):
            why = edge_mismatch(now, then, rtol=0.0)
            if why is not None:
                return Outcome("wrong", "changed", f"after {', '.join(changes)}, run {run + 1}: "
                                                   f"output {i} changed: {why[:200]}")
    return None


# --- hostile cache files -------------------------------------------------------------------------
DAMAGE = ["fifo", "dev_zero", "folder", "dangling link", "link loop", "huge", "deep", "digits",
          "garbage", "empty", "wrong types"]
WRONG_ENTRIES = [{"algorithm": ["direct"], "params": {}}, {"algorithm": "direct", "params": 5},
                 {"algorithm": "direct", "params": {"nv": [[[1]]]}},
                 {"algorithm": "direct", "params": {"nv": 10 ** 40}}, "fast", None, 3]


def _damage(rng: random.Random, path: Path, kind: str, wrong_types: str) -> None:
    """Put something hostile of `kind` where the cache file or folder `path` belongs."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif os.path.lexists(path):
        path.unlink()
    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "dev_zero":
        path.symlink_to("/dev/zero")
    elif kind == "folder":
        path.mkdir()
    elif kind == "dangling link":
        path.symlink_to(path.parent / "nowhere")
    elif kind == "link loop":
        path.symlink_to(path)
    elif kind == "huge":  # sparse: 17 MB on paper, above any cache file's bound, no disk used
        with open(path, "wb") as f:
            f.truncate(17 << 20)
    else:
        path.write_text({"deep": "[" * 100_000,
                         "digits": '{"version": 1, "devices": {"x": ' + "9" * 5000 + "}}",
                         "garbage": "".join(chr(rng.randrange(1, 0x2FF)) for _ in range(200)),
                         "empty": "", "wrong types": wrong_types}[kind], errors="replace")


def _tuning_entries(rng: random.Random, seed: Path, backend: str) -> str:
    """A tuning cache for this device whose entries, for this model's own problems, are of
    the wrong types (the keys are found by a clean load first)."""
    if backend != "opencl":
        return json.dumps({"version": 1, "devices": {"x": {"conv:x": rng.choice(WRONG_ENTRIES)}}})
    from kuiper.graph.load import load
    from kuiper.opencl.device.tuning_cache import device_key
    from kuiper.opencl.execution.tuner import collect_problems

    graph = load(seed, backend="opencl")
    entries = {p.key: rng.choice(WRONG_ENTRIES) for p in collect_problems(graph)}
    return json.dumps({"version": 1, "devices": {
        device_key(graph.executor.runtime.device): entries}})


def damaged_caches(rng: random.Random, seed: Path, backend: str, work: Path) -> Outcome | None:
    """Load with a hostile file in one cache: "ok" or a KuiperError, nothing else."""
    from kuiper.graph import convert
    from kuiper.graph.load import load
    from kuiper.opencl.device import vector_width

    cache = work / "cache"
    os.environ["KUIPER_CACHE_DIR"] = str(cache)
    which = rng.choice(["tuning.json", "vector_width.json", "conversion", "pnnx.log"])
    kind = rng.choice(DAMAGE)
    if which in ("tuning.json", "vector_width.json"):
        os.environ.pop(vector_width.ENV, None)  # read the file, not the parent's answer
        vector_width._probe = lambda device, key: True  # (the probe, a process, is not fuzzed)
        wrong = (_tuning_entries(rng, seed, backend) if which == "tuning.json"
                 else json.dumps({"x": rng.choice(WRONG_ENTRIES)}))
        _damage(rng, cache / which, kind, wrong)
        graph = load(seed, backend=backend)
    else:
        source = work / "m.onnx"  # converted before: its entry holds the seed model
        source.write_bytes(b"not a model %d" % rng.randrange(1 << 30))
        entry = convert.cache_entry(source, None)
        entry.mkdir(parents=True)
        _copy_model(seed, entry, "m")
        (entry / convert.COMPLETE).write_text("pnnx fuzz\n")
        (entry / convert.LOG_NAME).write_text("pnnx's log\n")
        if which == "pnnx.log":
            os.environ["KUIPER_PNNX_LOG"] = "1"
            target = entry / convert.LOG_NAME
        else:
            target = rng.choice([entry, entry / "m.pnnx.param", entry / "m.pnnx.bin",
                                 entry / convert.COMPLETE])
        _damage(rng, target, kind, "7767517\n")
        with contextlib.redirect_stderr(io.StringIO()):  # the cached log, if shown
            graph = load(source, backend=backend)
    graph.forward(*random_inputs(graph))
    return None
