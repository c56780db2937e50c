"""nn.LSTM, nn.GRU and nn.RNN against torch on both backends.

run_operator covers the parameter grid (cell, layers, directions, layout, initial states,
projection, bias, unbatched input) with weights taken from a torch module; real pnnx exports
cover which outputs pnnx keeps when only some are used.
"""

import tempfile
from pathlib import Path

import numpy as np
import pytest
import torch

import kuiper
from kuiper import OperatorError
from kuiper.testing import assert_close, run_operator, write_operator_model
from tests.conftest import opencl_available

T = torch.from_numpy
STEPS, BATCH, INPUT, HIDDEN = 4, 3, 5, 7
CELLS = {"lstm": (torch.nn.LSTM, {}), "gru": (torch.nn.GRU, {}),
         "rnn_tanh": (torch.nn.RNN, {"nonlinearity": "tanh"}),
         "rnn_relu": (torch.nn.RNN, {"nonlinearity": "relu"})}


def make(cell: str, **kwargs):
    cls, extra = CELLS[cell]
    torch.manual_seed(0)
    return cls(INPUT, HIDDEN, **extra, **kwargs).eval()


def params_and_weights(module):
    params = {"input_size": module.input_size, "hidden_size": module.hidden_size,
              "num_layers": module.num_layers, "bias": module.bias,
              "batch_first": module.batch_first, "bidirectional": module.bidirectional}
    if isinstance(module, torch.nn.LSTM):
        params["proj_size"] = module.proj_size
    if type(module) is torch.nn.RNN:
        params["nonlinearity"] = module.nonlinearity
    weights = {k: v.detach().numpy() for k, v in module.state_dict().items()}
    return params, weights


def run_both(module, backend, x, states):
    """Kuiper's outputs and torch's, as lists in the order (y, h_n[, c_n])."""
    params, weights = params_and_weights(module)
    is_lstm = isinstance(module, torch.nn.LSTM)
    outputs = run_operator(f"nn.{type(module).__name__}", [x] + states,
                           params=params, weights=weights, n_outputs=3 if is_lstm else 2,
                           backend=backend)
    with torch.no_grad():
        hx = None
        if states:
            hx = tuple(T(s) for s in states) if is_lstm else T(states[0])
        y, h = module(T(x), hx)
    expected = [y] + (list(h) if is_lstm else [h])
    return outputs, [e.numpy() for e in expected]


def initial_states(rng, module, batch: int | None):
    layers = module.num_layers * (2 if module.bidirectional else 1)
    lead = (layers,) if batch is None else (layers, batch)
    out = getattr(module, "proj_size", 0) or HIDDEN
    shapes = [lead + (out,)] + ([lead + (HIDDEN,)] if isinstance(module, torch.nn.LSTM) else [])
    return [rng.standard_normal(s).astype(np.float32) for s in shapes]


@pytest.mark.parametrize("cell", list(CELLS))
@pytest.mark.parametrize("num_layers", [1, 2])
@pytest.mark.parametrize("bidirectional", [False, True])
@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("with_states", [False, True])
def test_recurrent_grid(backend, rng, cell, num_layers, bidirectional, batch_first,
                        with_states):
    module = make(cell, num_layers=num_layers, bidirectional=bidirectional,
                  batch_first=batch_first)
    shape = (BATCH, STEPS, INPUT) if batch_first else (STEPS, BATCH, INPUT)
    x = rng.standard_normal(shape).astype(np.float32)
    states = initial_states(rng, module, BATCH) if with_states else []
    outputs, expected = run_both(module, backend, x, states)
    for name, actual, ref in zip(("y", "h_n", "c_n"), outputs, expected):
        assert_close(actual, ref, what=name)


@pytest.mark.parametrize("num_layers, bidirectional, with_states", [
    (1, False, False), (2, True, False), (2, False, True), (1, True, True)])
def test_lstm_projection(backend, rng, num_layers, bidirectional, with_states):
    module = make("lstm", num_layers=num_layers, bidirectional=bidirectional, proj_size=3)
    x = rng.standard_normal((STEPS, BATCH, INPUT)).astype(np.float32)
    states = initial_states(rng, module, BATCH) if with_states else []
    outputs, expected = run_both(module, backend, x, states)
    for name, actual, ref in zip(("y", "h_n", "c_n"), outputs, expected):
        assert_close(actual, ref, what=name)


@pytest.mark.parametrize("cell", ["lstm", "gru", "rnn_tanh"])
def test_without_bias(backend, rng, cell):
    module = make(cell, bias=False, bidirectional=True)
    x = rng.standard_normal((STEPS, BATCH, INPUT)).astype(np.float32)
    outputs, expected = run_both(module, backend, x, [])
    for actual, ref in zip(outputs, expected):
        assert_close(actual, ref)


@pytest.mark.parametrize("cell", ["lstm", "gru"])
@pytest.mark.parametrize("with_states", [False, True])
def test_unbatched_input(backend, rng, cell, with_states):
    module = make(cell, num_layers=2, bidirectional=True)
    x = rng.standard_normal((STEPS, INPUT)).astype(np.float32)
    states = initial_states(rng, module, None) if with_states else []
    outputs, expected = run_both(module, backend, x, states)
    for actual, ref in zip(outputs, expected):
        assert_close(actual, ref)


def test_single_step_and_long_sequence(backend, rng):
    for steps in (1, 33):
        module = make("gru", bidirectional=True)
        x = rng.standard_normal((steps, 2, INPUT)).astype(np.float32)
        outputs, expected = run_both(module, backend, x, [])
        for actual, ref in zip(outputs, expected):
            assert_close(actual, ref)


@pytest.mark.skipif(not opencl_available(), reason="no OpenCL device")
@pytest.mark.parametrize("cell, proj", [("lstm", 0), ("lstm", 3), ("gru", 0)])
def test_opencl_binds_the_same_kernels_for_any_sequence_length(rng, cell, proj):
    """One kernel object per kernel, whatever the length: the step number is set per launch
    (a kernel object per time step took 175 s and 1 GB to bind 100,000 steps)."""
    from kuiper.layers.opencl_base import Steps

    module = make(cell, **({"proj_size": proj} if proj else {}))
    params, weights = params_and_weights(module)
    kernels = {}
    for steps in (10, 10_000):
        x = rng.standard_normal((steps, 1, INPUT)).astype(np.float32)
        with tempfile.TemporaryDirectory() as folder:
            path = write_operator_model(folder, f"nn.{type(module).__name__}", [x],
                                        params=params, weights=weights,
                                        n_outputs=3 if cell == "lstm" else 2)
            graph = kuiper.load(path, backend="opencl")
        layer = next(op.layer for op in graph.order if op.name == "op0")
        loops = [item for item in layer.launches if isinstance(item, Steps)]
        assert [loop.count for loop in loops] == [steps]
        kernels[steps] = len(layer.launches) + sum(len(loop.launches) - 1 for loop in loops)
        if steps == 10_000:  # and the long sequence still computes what PyTorch does
            with torch.no_grad():
                expected = module(T(x))[0].numpy()
            assert_close(graph(x)[0], expected)
    assert kernels[10] == kernels[10_000] == (3 if proj else 2)


# --- which outputs pnnx keeps -----------------------------------------------------------------

class Pick(torch.nn.Module):
    """Run a recurrent module and return some of y, h_n, c_n."""

    def __init__(self, module, pick: str):
        super().__init__()
        self.rnn, self.pick = module, pick

    def forward(self, x, *states):
        hx = (tuple(states) if len(states) == 2 else states[0]) if states else None
        y, h = self.rnn(x, hx)
        h_n, c_n = h if isinstance(h, tuple) else (h, None)
        values = [{"y": y, "h": h_n, "c": c_n}[p] for p in self.pick]
        return values[0] if len(values) == 1 else tuple(values)


def export(export_model, export_dir, name, module, inputs) -> Path:
    """pnnx writes the .param, then fails re-loading its own Python for some output subsets
    (e.g. an LSTM returning (h_n, c_n)); the .param is what we need."""
    try:
        return export_model(name, module, inputs)
    except Exception:
        path = export_dir / name / "model.pnnx.param"
        if not path.exists():
            raise
        return path


PICKS = {
    # name: (cell, module kwargs, outputs used, with initial states)
    "lstm_y": ("lstm", {"num_layers": 2, "bidirectional": True, "batch_first": True}, "y",
               False),
    "lstm_h": ("lstm", {}, "h", False),
    "lstm_hc": ("lstm", {"bias": False}, "hc", False),
    "lstm_yhc_states": ("lstm", {"num_layers": 2}, "yhc", True),
    "lstm_proj_c": ("lstm", {"proj_size": 3}, "c", False),
    "lstm_proj_yc": ("lstm", {"proj_size": 3, "bidirectional": True}, "yc", False),
    "lstm_proj_h": ("lstm", {"proj_size": 3}, "h", False),
    "gru_y_states": ("gru", {"batch_first": True}, "y", True),
    "gru_h": ("gru", {"num_layers": 2}, "h", False),
    "gru_yh": ("gru", {"bidirectional": True}, "yh", False),
    "rnn_h": ("rnn_relu", {"bidirectional": True}, "h", False),
}


@pytest.mark.parametrize("name", list(PICKS))
def test_output_subsets_from_pnnx_exports(backend, rng, export_model, export_dir, name):
    cell, kwargs, pick, with_states = PICKS[name]
    module = Pick(make(cell, **kwargs), pick).eval()
    batch_first = kwargs.get("batch_first", False)
    x = rng.standard_normal((BATCH, STEPS, INPUT) if batch_first else (STEPS, BATCH, INPUT))
    inputs = [x.astype(np.float32)]
    if with_states:
        inputs += initial_states(rng, module.rnn, BATCH)
    path = export(export_model, export_dir, f"rnn_{name}", module, [T(a) for a in inputs])
    outputs = kuiper.load(path, backend=backend).forward(*inputs)
    with torch.no_grad():
        expected = module(*[T(a) for a in inputs])
    expected = expected if isinstance(expected, tuple) else (expected,)
    assert len(outputs) == len(expected) == len(pick)
    for actual, ref in zip(outputs, expected):
        assert_close(actual, ref.numpy())


def test_export_runs_at_other_sizes(backend, rng, export_model, export_dir):
    # Exported at T=4, N=3; nothing in the layer may depend on those sizes.
    module = Pick(make("lstm", num_layers=2, bidirectional=True), "yhc").eval()
    x = rng.standard_normal((STEPS, BATCH, INPUT)).astype(np.float32)
    graph = kuiper.load(export(export_model, export_dir, "rnn_resize", module, [T(x)]),
                        backend=backend)
    for shape in [(STEPS, BATCH, INPUT), (9, 2, INPUT)]:
        x = rng.standard_normal(shape).astype(np.float32)
        with torch.no_grad():
            expected = module(T(x))
        for actual, ref in zip(graph.forward(x), expected):
            assert_close(actual, ref.numpy())


def test_lstm_c_alone_cannot_be_told_from_h_alone(rng, export_model, export_dir):
    # Without a projection h_n and c_n have the same shape, and pnnx writes the very same file
    # for "only h_n used" and "only c_n used": no reader can tell them apart, so a lone state
    # output is read as h_n (likewise (y, c_n) reads as (y, h_n)). With proj_size the shapes
    # differ and test_output_subsets_from_pnnx_exports checks that c_n is found.
    x = T(rng.standard_normal((STEPS, BATCH, INPUT)).astype(np.float32))
    texts = [export(export_model, export_dir, f"rnn_ambiguous_{p}",
                    Pick(make("lstm"), p).eval(), [x]).read_text() for p in ("h", "c")]
    assert texts[0] == texts[1]


def test_bad_params_raise(rng):
    module = make("lstm")
    params, weights = params_and_weights(module)
    x = rng.standard_normal((STEPS, BATCH, INPUT)).astype(np.float32)
    with pytest.raises(OperatorError, match="proj_size"):
        run_operator("nn.LSTM", [x], params={**params, "proj_size": 9}, weights=weights)
    with pytest.raises(OperatorError, match="weight_ih_l1"):
        run_operator("nn.LSTM", [x], params={**params, "num_layers": 2}, weights=weights)
    with pytest.raises(OperatorError, match="input should be"):
        run_operator("nn.LSTM", [x[..., :4]], params=params, weights=weights)
    with pytest.raises(OperatorError, match="initial state h0"):
        run_operator("nn.LSTM", [x, np.zeros((1, BATCH, 3), np.float32),
                                 np.zeros((1, BATCH, HIDDEN), np.float32)],
                     params=params, weights=weights, n_outputs=3)
    gru_params, gru_weights = params_and_weights(make("rnn_tanh"))
    with pytest.raises(OperatorError, match="nonlinearity"):
        run_operator("nn.RNN", [x], params={**gru_params, "nonlinearity": "gelu"},
                     weights=gru_weights)
