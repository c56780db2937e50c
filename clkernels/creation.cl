// Tensors made from a few numbers: Tensor.fill and torch.arange.
// Build with -DT=<output type>, -DTV=<type of the fill value> (fill) and
// -DTS=<type start and step are given in> (arange: long for integers, float otherwise).

// y[i] = value[0] (converted to T): the value is a one-element device buffer, so a value the
// model computes at run time needs no trip to the host.
__kernel void fill(__global const TV *value, __global T *y, const int n)
{
    const int i = get_global_id(0);
    if (i < n)
        y[i] = (T)value[0];
}

// y[i] = start + i * step; the host computed the length n from the three values.
__kernel void arange(__global T *y, const TS start, const TS step, const int n)
{
    const int i = get_global_id(0);
    if (i < n)
        y[i] = (T)(start + (TS)i * step);
}
