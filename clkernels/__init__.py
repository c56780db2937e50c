"""OpenCL kernel sources (package data). `KERNEL_DIR` is passed to the compiler with -I."""

from pathlib import Path

KERNEL_DIR = Path(__file__).resolve().parent
