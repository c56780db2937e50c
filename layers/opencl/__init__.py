"""OpenCL layers, twins of `layers/cpu`, with kernels in `clkernels/<stem>.cl`."""
