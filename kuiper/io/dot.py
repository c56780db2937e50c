"""The graph as Graphviz DOT (`kuiper info MODEL --dot [FILE]`).

Operators are nodes (name, type, output shape); operands are edges from the operator that makes
them to each operator that reads them, labelled with the operand's name and shape. Render with
`dot -Tsvg model.dot -o model.svg`. (Netron, https://netron.app, opens a .pnnx.param directly
too; this view shows Kuiper's inferred shapes and which operators fall back to the CPU.)
"""

from __future__ import annotations

from kuiper.io.trace import shapes_of

# Fill colours: where the data enters and leaves, and operators the backend runs elsewhere.
INPUT_COLOUR = "#d8ecd8"
OUTPUT_COLOUR = "#dde6f5"
FALLBACK_COLOUR = "#fbe3c0"
FOLDED_TYPES = ("pnnx.Attribute",)


def quote(text: str) -> str:
    """A DOT string literal: backslashes and quotes escaped, newlines as DOT's centred \\n."""
    return '"' + str(text).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def to_dot(graph) -> str:
    fallback = {op.name for op in graph.fallbacks}
    lines = ["digraph kuiper {", "  rankdir=TB;",
             '  node [shape=box, style="rounded,filled", fillcolor=white, fontname="Helvetica"];',
             '  edge [fontname="Helvetica", fontsize=10];']
    ids = {op.name: f"op{i}" for i, op in enumerate(graph.operators)}
    for op in graph.operators:
        shapes = ", ".join(shapes_of(graph, op.outputs))
        label = f"{op.name}\n{op.type}" + (f"\n{shapes}" if shapes else "")
        attrs = [f"label={quote(label)}"]
        if op.type == "pnnx.Input":
            attrs.append(f'fillcolor="{INPUT_COLOUR}"')
        elif op.type == "pnnx.Output":
            attrs.append(f'fillcolor="{OUTPUT_COLOUR}"')
        elif op.name in fallback:
            attrs.append(f'fillcolor="{FALLBACK_COLOUR}", tooltip="runs on the CPU (fallback)"')
        elif op.type in FOLDED_TYPES:
            attrs.append('style="rounded,dashed"')
        lines.append(f"  {ids[op.name]} [{', '.join(attrs)}];")
    for op in graph.operators:
        for operand in op.outputs:
            shape = shapes_of(graph, [operand])[0]
            for consumer in dict.fromkeys(operand.consumers):
                if consumer.name in ids:
                    lines.append(f"  {ids[op.name]} -> {ids[consumer.name]} "
                                 f"[label={quote(f'{operand.name}: {shape}')}];")
    lines.append("}")
    return "\n".join(lines) + "\n"
