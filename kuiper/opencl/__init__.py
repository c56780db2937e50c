"""The OpenCL backend: device choice, program cache, layer base class and graph executor."""
