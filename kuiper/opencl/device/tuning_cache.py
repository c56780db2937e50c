"""The tuning cache: which algorithm and parameter set `kuiper tune` measured fastest.

One JSON file, `<cache dir>/tuning.json` (the cache dir of kuiper/graph/convert.py:
$KUIPER_CACHE_DIR, else $XDG_CACHE_HOME/kuiper, else ~/.cache/kuiper):

    {"version": 1,
     "devices": {"NVIDIA CUDA / NVIDIA H100 80GB HBM3 | 580.159.04": {
         "conv:n1c64o64g1_i1x56x56_k1x3x3_...": {"algorithm": "im2col_gemm",
             "params": {"kernel": "gemm_tiled", "TILE_M": 64, ...}, "seconds": 8.1e-05},
         "gemm:m2n1000k512z1_tb": {...}}}}

A device's entry is keyed by its name *and* driver version: a new driver may change which
kernel is fastest, so its measurements start afresh. Problems are keyed by their shapes
(ConvProblem.key, or gemm_key for the product of a linear layer or a transposed convolution),
and by their precision where it is not fp32 (kuiper.load(precision=...)).

Every load of a model looks its layers up here (conv_select.py); the file is read once per
process and again only when it changed on disk. A corrupt or unreadable file (not a regular
file, too large, not JSON, nested too deep, a 5,000-digit number) is ignored with a warning,
never an error: the cost model still works. So is an entry of the wrong shape inside a good
file (`well_formed`), and the selector uses a stored parameter set only if it is one of the
algorithm's own for the problem (layers/opencl_conv/selector.py, `matching`). Writing needs
a writable cache dir; if it is not, `kuiper tune` fails with a TuningError that says how to
fix it.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from kuiper.core.cache import cache_dir, read_cache_file
from kuiper.core.errors import KuiperError
from kuiper.core.log import warn

VERSION = 1
FILE_NAME = "tuning.json"


class TuningError(KuiperError):
    """The tuning cache cannot be written (or `kuiper tune` cannot run on this model)."""


def cache_path() -> Path:
    return cache_dir() / FILE_NAME


def device_key(device: Any) -> str:
    """'platform / device | driver version': what a measurement is valid for."""
    return (f"{device.platform.name} / {device.name.strip()} | "
            f"{device.driver_version.strip()}")


def gemm_key(m: int, n: int, k: int, z: int = 1, trans_a: bool = False,
             trans_b: bool = False, precision: str = "fp32") -> str:
    """'gemm:m64n1000k512z1_tb', with '_tf32' / '_fp16' for a GEMM computed in another
    precision than fp32 (its winners differ: the tensor-core kernels compete)."""
    flags = ("ta" if trans_a else "") + ("tb" if trans_b else "")
    return (f"gemm:m{m}n{n}k{k}z{z}" + (f"_{flags}" if flags else "")
            + (f"_{precision}" if precision != "fp32" else ""))


def conv_key(problem) -> str:
    return f"conv:{problem.key}"


# path -> (mtime_ns, size, data): the file as last read in this process
_loaded: dict[str, tuple[int, int, dict]] = {}


def _empty() -> dict:
    return {"version": VERSION, "devices": {}}


def load(path: Path | None = None) -> dict:
    """The whole cache (an empty one if the file is missing, unreadable or corrupt)."""
    path = Path(path) if path is not None else cache_path()
    try:
        stat = path.stat()
    except OSError:
        return _empty()
    known = _loaded.get(str(path))
    if known is not None and known[:2] == (stat.st_mtime_ns, stat.st_size):
        return known[2]
    data = _read(path)
    _loaded[str(path)] = (stat.st_mtime_ns, stat.st_size, data)
    return data


def _read(path: Path) -> dict:
    try:  # not a regular file, too large, not JSON, nested too deep, a 5,000-digit number ...
        data = json.loads(read_cache_file(path))
    except (OSError, ValueError, RecursionError) as e:
        warn(f"the tuning cache {path} cannot be read ({e}): it is ignored, the cost model "
             "chooses the kernels; run `kuiper tune MODEL` to write a new one")
        return _empty()
    if (not isinstance(data, dict) or data.get("version") != VERSION
            or not isinstance(data.get("devices"), dict)
            or not all(isinstance(v, dict) for v in data["devices"].values())):
        warn(f"the tuning cache {path} is not a version-{VERSION} Kuiper tuning file: it is "
             "ignored, the cost model chooses the kernels; run `kuiper tune MODEL` to write "
             "a new one")
        return _empty()
    devices = {device: {key: entry for key, entry in entries.items() if well_formed(entry)}
               for device, entries in data["devices"].items()}
    dropped = sum(len(e) for e in data["devices"].values()) - sum(len(e) for e in
                                                                  devices.values())
    if dropped:
        warn(f"the tuning cache {path} holds {dropped} entr{'y' if dropped == 1 else 'ies'} "
             "that `kuiper tune` did not write (not an algorithm name with its parameters): "
             "ignored, the cost model chooses those kernels; run `kuiper tune MODEL` to "
             "measure them again")
    return {"version": VERSION, "devices": devices}


MAX_PARAM_INT = 1 << 31  # a tile size, a vector width: anything larger is not a parameter


def well_formed(entry: Any) -> bool:
    """Whether `entry` is what `store` writes: {"algorithm": name, "params": {name: value},
    "seconds": number}, with each value None, a short string, a bool, a number (an int of a
    sane size), a short list of such values, or one level of {name: such value} (a GPU's
    Winograd keeps its GEMM's set under "gemm"). A hand-edited or hostile file
    could put anything there, and the selector compares it with its own parameter sets."""
    if not isinstance(entry, dict) or not isinstance(entry.get("algorithm"), str):
        return False
    params, seconds = entry.get("params", {}), entry.get("seconds", 0.0)
    if not isinstance(params, dict) or isinstance(seconds, bool) or \
            not isinstance(seconds, (int, float)):
        return False
    return all(isinstance(k, str) and _parameter(v, nested=True) for k, v in params.items())


def _parameter(value: Any, nested: bool = False) -> bool:
    if isinstance(value, dict):  # one level only, of a size a parameter set has
        return nested and len(value) <= 32 and all(
            isinstance(k, str) and len(k) <= 64 and _parameter(v) for k, v in value.items())
    if isinstance(value, list):
        return len(value) <= 16 and all(not isinstance(v, (list, dict)) and _parameter(v)
                                        for v in value)
    if isinstance(value, str):
        return len(value) <= 200
    if value is None or isinstance(value, (bool, float)):  # (None: "the driver decides")
        return True
    return isinstance(value, int) and abs(value) < MAX_PARAM_INT


def lookup(device: Any, key: str, path: Path | None = None) -> dict | None:
    """The stored winner {"algorithm", "params", "seconds"} for `key` on `device`, or None."""
    entry = load(path)["devices"].get(device_key(device), {}).get(key)
    return entry if well_formed(entry) else None


def store(device: Any, winners: dict[str, dict], path: Path | None = None) -> Path:
    """Add `winners` (key -> {"algorithm", "params", "seconds"}) for `device` and write the
    file atomically (a reader never sees half a file). Returns its path."""
    path = Path(path) if path is not None else cache_path()
    data = load(path)
    data = {"version": VERSION, "devices": dict(data["devices"])}
    entries = dict(data["devices"].get(device_key(device), {}))
    entries.update(winners)
    data["devices"][device_key(device)] = entries
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".tuning-", suffix=".json", dir=path.parent)
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, indent=1, sort_keys=True)
        os.replace(tmp, path)
    except OSError as e:
        raise TuningError(f"cannot write the tuning cache {path} ({e.strerror or e}): set "
                          "KUIPER_CACHE_DIR to a writable folder") from None
    _loaded.pop(str(path), None)
    return path
