"""Fixtures of the end-to-end model tests (the pnnx.export route's `export_model` is in
tests/conftest.py; this adds the ONNX route with the same caching rules)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def export_onnx_model(export_dir):
    """export_onnx_model(name, module, example_inputs) -> path of <name>.pnnx.param (cached),
    made by torch.onnx.export(dynamo=False) and the pnnx command line."""
    cache: dict[str, Path] = {}

    def export(name: str, module, inputs) -> Path:
        if name not in cache:
            ready = export_dir / name / "model.pnnx.param"
            if os.environ.get("KUIPER_EXPORTS") and ready.exists():
                cache[name] = ready
            else:
                from tests.models.onnx_export import export_with_onnx
                cache[name] = export_with_onnx(export_dir / name, module, inputs)
        return cache[name]

    return export
