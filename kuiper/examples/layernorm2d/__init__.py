"""Example plugin: LayerNorm2d, a PyTorch module that Kuiper does not have.

    modules.py      the PyTorch module (what a model uses, and what pnnx keeps whole)
    layers.py       THE PLUGIN: the CPU layer, its OpenCL twin and the PyTorch rebuild;
                    importing it registers the layers
    layernorm2d.cl  the OpenCL kernel

Load it with `kuiper.load(model, plugins=["kuiper.examples.layernorm2d.layers"])`, or
`--plugin kuiper.examples.layernorm2d.layers`. This file imports nothing, so that exporting a
model with the PyTorch module does not register Kuiper's layers behind your back. Course
lesson 14 (course_notes/14_your_operator/notes.md) walks through it.
"""
