"""Layers: one class per operator family; `cpu/` NumPy reference, `opencl/` device twins."""
