"""prim::TupleUnpack: the operator that returned the tuple writes its items itself.

pnnx keeps some modules' tuple results whole. `nn.AdaptiveMaxPool2d(..., return_indices=True)`
comes out as two lines:

    nn.AdaptiveMaxPool2d  amp      1 1 x t  output_size=(2,3) return_indices=True
    prim::TupleUnpack     pnnx_42  1 2 t values indices

Kuiper's operands are tensors, never tuples (the OpenCL executor gives each one a device
buffer). So, when the graph is linked, the producer takes over the unpack's outputs, exactly as
if pnnx had written `nn.AdaptiveMaxPool2d amp 1 2 x values indices` (which is what it writes for
`F.adaptive_max_pool2d` and `nn.MaxPool2d`), and the unpack and the tuple operand disappear.
The producer's layer then sees its two outputs, on every backend, with no copy.

That needs the tuple to come straight from one operator with a single output, read by nothing
but the unpack; anything else is a GraphError naming the line.
"""

from __future__ import annotations

from kuiper.core.errors import GraphError
from kuiper.core.ir import RuntimeOperand, RuntimeOperator

UNPACK = "prim::TupleUnpack"


def splice_tuple_unpacks(operators: list[RuntimeOperator], operands: dict[str, RuntimeOperand],
                         path: str) -> None:
    """Fold every prim::TupleUnpack into the operator producing its tuple (in place)."""
    for unpack in [op for op in operators if op.type == UNPACK]:
        producer = _tuple_producer(unpack, path)
        tuple_operand = unpack.inputs[0]
        producer.outputs = list(unpack.outputs)
        for item in unpack.outputs:
            item.producer = producer
        del operands[tuple_operand.name]
        operators.remove(unpack)


def _tuple_producer(unpack: RuntimeOperator, path: str) -> RuntimeOperator:
    where = f"{path}, line {unpack.line}: operator '{unpack.name}' ({UNPACK})"
    if len(unpack.inputs) != 1 or not unpack.outputs:
        raise GraphError(f"{where} has {len(unpack.inputs)} input(s) and "
                         f"{len(unpack.outputs)} output(s); expected 1 input (the tuple) and "
                         "at least 1 output")
    tuple_operand = unpack.inputs[0]
    producer = tuple_operand.producer
    if producer is None:
        raise GraphError(f"{where}: its tuple '{tuple_operand.name}' is produced by no operator "
                         "(dangling operand)")
    if (len(producer.outputs) != 1 or tuple_operand.consumers != [unpack]
            or producer.type.startswith(("pnnx.", "prim::"))):
        raise GraphError(f"{where}: unpacking is supported only for a tuple returned by one "
                         f"operator and read by nothing else; '{tuple_operand.name}' comes from "
                         f"'{producer.name}' ({producer.type}, {len(producer.outputs)} "
                         f"output(s)) and is read by {len(tuple_operand.consumers)} operator(s)")
    return producer
