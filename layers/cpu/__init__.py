"""NumPy reference layers. Every module here is imported by `kuiper.registry.load_layers`."""
