"""NumPy reference layers. Every module here is imported by `kuiper.core.registry.load_layers`."""
