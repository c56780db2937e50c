"""eliminate_noops: operators whose output is their input, unchanged, do not run."""

from __future__ import annotations

from kuiper.passes.fold_constants import _count
from kuiper.passes.plan import PassReport, Plan

# Operators that only ever change the shape or the dtype of their input 0: when they change
# neither, their output *is* their input (no engine writes into a tensor after producing it,
# so sharing is safe; an epilogue writes only into its producer's fresh output).
RESHAPES = ("Tensor.reshape", "Tensor.view", "torch.reshape", "torch.flatten", "Tensor.flatten",
            "nn.Flatten", "torch.squeeze", "Tensor.squeeze", "Tensor.unflatten",
            "torch.unflatten", "nn.Unflatten", "Tensor.reshape_as", "Tensor.view_as",
            "Tensor.expand", "Tensor.expand_as")
COPIES = ("Tensor.to", "Tensor.type", "Tensor.type_as", "Tensor.contiguous", "torch.clone",
          "Tensor.clone", "Tensor.detach", "torch.detach")
# Modules that are the identity at inference (pnnx usually drops them itself).
IDENTITIES = ("nn.Identity", "nn.Dropout", "nn.Dropout1d", "nn.Dropout2d", "nn.Dropout3d",
              "nn.AlphaDropout", "F.dropout", "F.dropout1d", "F.dropout2d", "F.dropout3d",
              "F.alpha_dropout")
NOOP_TYPES = frozenset(RESHAPES + COPIES + IDENTITIES)


def eliminate_noops(graph, plan: Plan) -> PassReport:
    """An identity reshape, view or flatten (to the shape it already has), `contiguous`,
    `clone`, `detach`, a `to` / `type_as` to the dtype it already has, an `expand` to the
    shape it already has, nn.Identity and dropout at inference: the output is an alias of the
    input and no step runs (on OpenCL not even a view is made). Only with static shapes: a
    data-dependent size may differ from run to run."""
    specs = graph.specs
    removed = []
    for op in plan.order:
        if op.type not in NOOP_TYPES or not plan.runs(op) or not op.inputs \
                or len(op.outputs) != 1:
            continue
        x, y = specs[op.inputs[0].name], specs[op.outputs[0].name]
        if x.dynamic or y.dynamic or x.shape != y.shape or x.dtype != y.dtype:
            continue
        plan.noops.add(op.name)
        plan.aliases[op.outputs[0].name] = plan.resolve(op.inputs[0].name)
        removed.append(f"{op.name} ({op.type}): '{op.outputs[0].name}' is "
                       f"'{op.inputs[0].name}'")
    return PassReport("eliminate_noops", f"{_count(len(removed))} removed (output = input)",
                      removed, len(removed))
