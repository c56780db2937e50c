"""Which kernel each convolution, transposed convolution and linear layer of a bound OpenCL
graph runs, and why (forced, tuned by `kuiper tune`, or the cost model's choice), and what it
computes in (fp32; tf32 / fp16 on tensor cores; a weight stored as half): what
`kuiper info --backend opencl` shows under its table."""

from __future__ import annotations

from kuiper.core.table import format_table


def algorithm_rows(graph) -> list[dict]:
    """The selector's decision for every bound convolution, transposed convolution and linear
    layer of an OpenCL graph."""
    from kuiper.layers.opencl_gemm.parameter_sets import describe_params

    rows = []
    for op in graph.order:
        name = getattr(op.layer, "algorithm", "")
        if isinstance(name, str) and name:
            params = op.layer.algorithm_params or {}
            rows.append({"name": op.name, "type": op.type, "algorithm": name,
                         "params": params, "params_text": describe_params(params),
                         "reason": op.layer.algorithm_reason,
                         "computes": getattr(op.layer, "computes", "fp32"),
                         "precision": graph.plan.precision_of(op)})
    return rows


def algorithm_lines(graph) -> list[str]:
    rows = algorithm_rows(graph)
    if not rows:
        return []
    table = [("operator", "type", "algorithm", "params", "why", "computes in")]
    table += [(r["name"], r["type"], r["algorithm"], r["params_text"], r["reason"],
               r["computes"]) for r in rows]
    lines = ["kernels chosen (`kuiper tune MODEL` measures them; 'tuned': from its cache):",
             format_table(table)]
    if graph.plan.precision != "fp32":
        on_cores = sum(r["computes"].startswith(("tf32", "fp16")) for r in rows)
        lines.append(f"precision {graph.plan.precision}: {on_cores} of {len(rows)} on tensor "
                     "cores (the others in fp32: no tensor cores on this device, or faster "
                     "there; kuiper/opencl/device/tensor_cores.py)")
    return lines
