"""Examples that ship with Kuiper, written the way a user of Kuiper writes them.

- `kuiper.examples.layernorm2d`: a plugin (kuiper/PLUGINS.md) for a PyTorch module that Kuiper
  does not have, `LayerNorm2d`, which pnnx keeps as one operator when a model is exported with
  `moduleop`. Its CPU layer, its OpenCL twin, its kernel and its PyTorch module are four small
  files; course lesson 14 (course_notes/14_your_operator/) builds them step by step. Load it
  with `kuiper.load(model, plugins=["kuiper.examples.layernorm2d.layers"])`,
  or `--plugin kuiper.examples.layernorm2d.layers` on the command line.

Nothing here is imported by Kuiper itself, and the layers here count as a plugin's, not as
Kuiper's own (`kuiper.core.registry.is_kuipers`): they are what you would write in a package of your
own.
"""
