"""Example Kuiper plugin: importing it registers the layers of `kuiper_swish.modules.Swish2`."""

from kuiper_swish import layers  # noqa: F401 - the import registers the layers
