"""Kuiper's version, stated once: pyproject.toml reads it, `kuiper --version` prints it."""

__version__ = "0.1.0"
