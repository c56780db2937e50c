"""What no fuzzer of model files reaches (issue 31): the files changing after a load, the
caches, plugins, the API's own arguments, and edge values on both backends.

    changed_files  a seed model loaded and run, then its .bin or .param truncated, rewritten
                   in place, replaced, extended by a second archive or deleted: the next run
                   must give the same outputs, bit for bit (the graph owns what it verified)
    caches         a FIFO, /dev/zero, a folder, a link loop, a huge, deeply nested or
                   hostile file in place of a cache file (the tuning cache, the vector-width
                   cache, a conversion's entry or its pnnx.log): a load ends "ok" or with a
                   KuiperError, never in a hang or a bare exception
    plugins        a plugin that fails (at import, by clashing with Kuiper's layers, in its
                   layer's from_operator, infer or forward, a forward returning None or too
                   few values); afterwards a load without it must still work
    arguments      kuiper.load and a graph's call with an argument of a wrong type or value
    edges          CPU against OpenCL: one function of the expression language at NaN,
                   infinities, signed zeros and float32's extremes, inputs and literals

Each case runs in a sandboxed child like a file case (sandbox.py) and is named by its number
("seed:i"), from which it is made again: `run(name, number, seed_param, backend)`. A case
returns None when all is well, or an Outcome "wrong" for a silently different value.
"""

from __future__ import annotations

import random
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np

from kuiper.fuzz.sandbox import Outcome, classify, random_inputs
from kuiper.fuzz.scenario_files import changed_files, damaged_caches


def run(name: str, number: str, param_path: str, backend: str) -> Outcome:
    """Scenario `name`, case `number`, from the seed model `param_path`, in this process."""
    rng = random.Random(f"{name}:{number}")
    work = Path(tempfile.mkdtemp(prefix="kuiper-scenario-"))
    try:
        return classify(lambda: SCENARIOS[name](rng, Path(param_path), backend, work))
    finally:
        shutil.rmtree(work, ignore_errors=True)


def target(name: str, number: str) -> Callable[[str, str], Outcome]:
    """The sandbox's target for one scenario case."""
    return lambda param_path, backend: run(name, number, param_path, backend)


# --- plugins -------------------------------------------------------------------------------------
PLUGIN_HEAD = """
import numpy as np
import kuiper

@kuiper.register("fuzz.Op")
class Op(kuiper.ElementwiseLayer):
    def forward(self, inputs):
        return [inputs[0] * 2]
"""
FAILURES = {
    "import": "raise ValueError('a plugin that fails at import')\n",
    "clash": "\n@kuiper.register('nn.ReLU')\nclass Clash(Op):\n    pass\n",
    "from_operator": "\nOp.from_operator = classmethod(lambda cls, op: 1 / 0)\n",
    "infer_none": "\nOp.infer = lambda self, inputs: None\n",
    "infer_raises": "\nOp.infer = lambda self, inputs: [][1]\n",
    "forward_none": "\nOp.forward = lambda self, inputs: None\n",
    "forward_empty": "\nOp.forward = lambda self, inputs: []\n",
    "forward_array": "\nOp.forward = lambda self, inputs: inputs[0]\n",
    "forward_object": "\nOp.forward = lambda self, inputs: [object()]\n",
    "forward_raises": "\nOp.forward = lambda self, inputs: {}['x']\n",
}
PLUGIN_MODEL = """7767517
3 2
pnnx.Input in0 0 1 0 #0=(2,3)f32
fuzz.Op op 1 1 0 1 #0=(2,3)f32 #1=(2,3)f32
pnnx.Output out0 1 0 1
"""


def plugins(rng: random.Random, seed: Path, backend: str, work: Path) -> Outcome | None:
    from kuiper.core.errors import KuiperError
    from kuiper.graph.load import load

    failure = rng.choice(sorted(FAILURES))
    plugin = work / f"fuzz_plugin_{failure}.py"
    plugin.write_text(PLUGIN_HEAD + FAILURES[failure])
    model = work / "plugin.pnnx.param"
    model.write_text(PLUGIN_MODEL)
    try:
        load(model, backend=backend, plugins=[plugin])(np.ones((2, 3), np.float32))
    except KuiperError:
        pass  # the failure named: what a plugin's bug should give
    graph = load(seed, backend=backend)  # ... and the registry is as it was
    try:
        graph.forward(*random_inputs(graph))
    except KuiperError as e:
        return Outcome("wrong", "registry", f"after a plugin failing in {failure}, a load "
                                            f"without it fails: {str(e)[:200]}")
    return None


# --- API arguments ---------------------------------------------------------------------------
WRONG = [None, 0, -1, 1.5, float("nan"), float("inf"), 10**40, True, "", "x" * 5000, "a\0b",
         b"bytes", [], [None], [[1, "a"]], [[1, 2], [3]], {}, {"a": 1}, object(),
         np.zeros(3), np.float32(1), (1, 2), lambda: 0, "cpu", "0", ["out0"]]
LOAD_ARGUMENTS = ["param_path", "bin_path", "backend", "input_shapes", "plugins", "params",
                  "limits", "passes", "fuse", "threads", "memory", "device", "runtime",
                  "out_of_order", "profiling", "no_such_option"]
CALL_ARGUMENTS = ["input", "outputs", "observer", "return_dict"]


def arguments(rng: random.Random, seed: Path, backend: str, work: Path) -> Outcome | None:
    from kuiper.graph.load import load

    value = rng.choice(WRONG)
    if rng.random() < 0.5:
        kwargs = {"backend": backend, rng.choice(LOAD_ARGUMENTS): value}
        path = kwargs.pop("param_path", seed)
        graph = load(path, **kwargs)
        graph.forward(*random_inputs(graph))
        return None
    graph = load(seed, backend=backend)
    inputs = random_inputs(graph)
    argument = rng.choice(CALL_ARGUMENTS)
    if argument == "input":
        inputs[rng.randrange(len(inputs))] = value
        graph(*inputs)
    else:
        graph.forward(*inputs, **{argument: value})
    return None


# --- edge values, CPU against OpenCL -------------------------------------------------------------
EXACT = ("add", "sub", "mul", "neg", "abs")  # exactly rounded on both: no ulp to tell apart


def edges(rng: random.Random, seed: Path, backend: str, work: Path) -> Outcome | None:
    from kuiper.graph.load import load
    from kuiper.parser.expression import FUNCTIONS
    from kuiper.testing import EDGE_FLOATS, EDGE_LITERALS, edge_mismatch, write_expression_model

    name = rng.choice([n for n, f in FUNCTIONS.items() if f.kind not in ("size", "bitwise",
                                                                         "shift")])
    x = rng.sample(list(EDGE_FLOATS), rng.randint(1, len(EDGE_FLOATS)))
    y = np.array(rng.sample(list(EDGE_FLOATS), rng.randint(1, len(EDGE_FLOATS))), np.float32)
    inputs = [np.array(x, np.float32).reshape(-1, 1), y.reshape(1, -1)]

    def operand(k: int) -> str:  # an input, maybe through an exact operation with a literal
        if rng.random() < 0.5:
            return f"@{k}"
        inner = rng.choice(EXACT)
        return f"{inner}(@{k})" if inner in ("neg", "abs") else \
            f"{inner}(@{k},{rng.choice(EDGE_LITERALS)})"

    if FUNCTIONS[name].min_args == 1:
        expr = f"{name}({operand(rng.randrange(2))})"
    elif rng.random() < 0.3:
        expr = f"{name}({rng.choice(EDGE_LITERALS)},{operand(1)})"
    else:
        expr = f"{name}({operand(0)},{operand(1)})"
    # One function on exact operands: a second inexact step could turn the few ulps that the
    # backends' math libraries may differ by into a large difference (cancellation), which
    # would be reported as a bug that is not one.
    results = []
    for on in ("cpu", "opencl"):
        folder = work / on
        folder.mkdir()
        graph = load(write_expression_model(folder, inputs, [expr]), backend=on)
        results.append(graph.forward(*inputs)[0])
    why = edge_mismatch(results[1], results[0])
    if why is not None:
        return Outcome("wrong", "edges", f"{expr}: OpenCL against the CPU: {why[:200]}")
    return None


SCENARIOS: dict[str, Callable[..., Outcome | None]] = {
    "changed_files": changed_files, "caches": damaged_caches, "plugins": plugins,
    "arguments": arguments, "edges": edges,
}
NEEDS_OPENCL = ("edges",)  # (it runs both backends, whatever the case's backend)
