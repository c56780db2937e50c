"""`kuiper devices`: the OpenCL devices of this machine, and the one Kuiper picks."""

from __future__ import annotations

import argparse

from kuiper.core.errors import OpenCLUnavailableError
from kuiper.core.table import print_table
from kuiper.io.jsonout import add_json_option, emit
from kuiper.memory.plan_memory import short_bytes


def add_parser(sub) -> None:
    p = sub.add_parser("devices", help="list OpenCL devices and the one Kuiper picks")
    add_json_option(p)
    p.set_defaults(func=cmd_devices)


def device_kind(cl, device) -> str:
    names = [n for n in ("GPU", "CPU", "ACCELERATOR") if device.type & getattr(cl.device_type, n)]
    return "/".join(names) or "other"


def cmd_devices(args: argparse.Namespace) -> int:
    from kuiper.opencl.device.runtime import INSTALL_HINT, _cl, choose_device, list_devices

    cl = _cl()
    rows = list_devices()
    if not rows:
        raise OpenCLUnavailableError(f"no OpenCL platform found: {INSTALL_HINT}")
    try:
        default = choose_device()
    except OpenCLUnavailableError as e:
        default, why = None, str(e)
    table = [("", "device", "platform / name", "type", "units", "memory")]
    found = []
    for index, label, dev in rows:
        mark = "*" if default is not None and dev == default else ""
        kind = "simulator" if "oclgrind" in label.lower() else device_kind(cl, dev)
        table.append((mark, index, label.rsplit(" (", 1)[0], kind, str(dev.max_compute_units),
                      f"{dev.global_mem_size / 2**30:.1f} GiB"))
        found.append({"index": index, "name": label.rsplit(" (", 1)[0], "type": kind,
                      "compute_units": dev.max_compute_units,
                      "memory_bytes": dev.global_mem_size, "default": bool(mark)})
    caches = kernel_caches()
    if args.json:
        emit({"devices": found, "default": next((d["index"] for d in found if d["default"]),
                                                None),
              "no_default_reason": None if default is not None else why,
              "kernel_caches": caches})
        return 0
    print_table(table)
    if default is None:
        print(f"\nno default device: {why}")
    else:
        print("\n* = the device Kuiper uses by default; choose another with --device P:D, "
              "--device NAME or the PYOPENCL_CTX environment variable")
    print("\ncompiled kernels are kept in (delete any of them to start cold):")
    print_table([("cache", "folder", "files", "size")]
                + [(c["what"], c["path"], str(c["files"]), short_bytes(c["bytes"]))
                   for c in caches])
    return 0


def kernel_caches() -> list[dict]:
    """Each kernel cache folder (kuiper/opencl/device/binary_cache.py) with what it holds."""
    from kuiper.opencl.device.binary_cache import cache_folders, usage

    rows = []
    for what, path in cache_folders():
        files, size = usage(path)
        rows.append({"what": what, "path": str(path), "files": files, "bytes": size})
    return rows
