"""OpenCL kernel sources (package data). `KERNEL_DIR` is passed to the compiler with -I."""

from pathlib import Path

KERNEL_DIR = Path(__file__).resolve().parent


def source(stem: str) -> str:
    """The OpenCL C text of `clkernels/<stem>.cl`, the file OpenCLRuntime.program compiles."""
    return (KERNEL_DIR / f"{stem}.cl").read_text()
