"""F.scaled_dot_product_attention and nn.MultiheadAttention against torch on both backends.

MultiheadAttention is tested twice: through run_operator (every combination of layout, key /
value dims and masks, with weights taken from a torch module), and through real pnnx exports,
which is where the input order is scrambled (see layers/common/attention_roles.py) and unused
outputs are dropped.
"""

import contextlib

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import kuiper
from kuiper import KuiperError, OperatorError
from kuiper.testing import assert_close, run_operator

T = torch.from_numpy
SDPA = "F.scaled_dot_product_attention"


def rand(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


# --- scaled_dot_product_attention -----------------------------------------------------------

@pytest.mark.parametrize("q_shape, k_shape, v_shape", [
    ((2, 3, 5, 8), (2, 3, 7, 8), (2, 3, 7, 6)),
    ((2, 3, 5, 8), (1, 3, 7, 8), (2, 1, 7, 6)),   # batch dims broadcast
    ((3, 17, 9), (3, 4, 9), (3, 4, 5)),           # no head dim, L > S
    ((1, 1, 1, 4), (1, 1, 1, 4), (1, 1, 1, 4)),
])
@pytest.mark.parametrize("is_causal, scale", [(False, None), (True, None), (False, 0.3),
                                              (True, 1.7)])
def test_sdpa(backend, rng, q_shape, k_shape, v_shape, is_causal, scale):
    q, k, v = rand(rng, *q_shape), rand(rng, *k_shape), rand(rng, *v_shape)
    params = {"dropout_p": 0.0, "is_causal": is_causal, "attn_mask": None}
    if scale is not None:
        params["scale"] = scale
    (y,) = run_operator(SDPA, [q, k, v], params=params, backend=backend)
    assert_close(y, F.scaled_dot_product_attention(T(q), T(k), T(v), is_causal=is_causal,
                                                   scale=scale).numpy())


@pytest.mark.parametrize("mask_shape", [(5, 7), (2, 1, 5, 7), (1, 3, 1, 7), (2, 3, 5, 7)])
@pytest.mark.parametrize("boolean", [True, False])
def test_sdpa_masks(backend, rng, mask_shape, boolean):
    q, k, v = rand(rng, 2, 3, 5, 8), rand(rng, 2, 3, 7, 8), rand(rng, 2, 3, 7, 6)
    mask = rng.standard_normal(mask_shape) > -0.5 if boolean else rand(rng, *mask_shape)
    (y,) = run_operator(SDPA, [q, k, v, mask], params={"dropout_p": 0.0, "is_causal": False},
                        backend=backend)
    assert_close(y, F.scaled_dot_product_attention(T(q), T(k), T(v),
                                                   attn_mask=T(mask)).numpy())


def test_sdpa_fully_masked_row_gives_zeros(backend, rng):
    q, k, v = rand(rng, 1, 2, 3, 4), rand(rng, 1, 2, 5, 4), rand(rng, 1, 2, 5, 4)
    mask = np.ones((3, 5), dtype=bool)
    mask[1] = False
    (y,) = run_operator(SDPA, [q, k, v, mask], backend=backend)
    expected = F.scaled_dot_product_attention(T(q), T(k), T(v), attn_mask=T(mask)).numpy()
    assert_close(y, expected)
    assert np.all(y[:, :, 1] == 0)


def test_sdpa_grouped_query_attention(backend, rng):
    q, k, v = rand(rng, 2, 6, 5, 8), rand(rng, 2, 2, 7, 8), rand(rng, 2, 2, 7, 3)
    (y,) = run_operator(SDPA, [q, k, v], params={"enable_gqa": True}, backend=backend)
    assert_close(y, F.scaled_dot_product_attention(T(q), T(k), T(v), enable_gqa=True).numpy())


@pytest.mark.slow
def test_sdpa_from_a_pnnx_export(backend, rng, export_model):
    class Attend(torch.nn.Module):
        def forward(self, q, k, v, m):
            return (F.scaled_dot_product_attention(q, k, v, attn_mask=m > 0.5),
                    F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=0.3))

    q, k, v = rand(rng, 2, 3, 5, 8), rand(rng, 2, 3, 7, 8), rand(rng, 2, 3, 7, 6)
    m = rng.random((2, 1, 5, 7)).astype(np.float32)
    module = Attend()
    path = export_model("attention_sdpa", module, [T(q), T(k), T(v), T(m)])
    outputs = kuiper.load(path, backend=backend).forward(q, k, v, m)
    for actual, expected in zip(outputs, module(T(q), T(k), T(v), T(m))):
        assert_close(actual, expected.numpy())


@pytest.mark.parametrize("shapes, params, message", [
    (((1, 2, 3, 4), (1, 2, 5, 4), (1, 2, 5, 4), (3, 5)), {"is_causal": True}, "is_causal"),
    (((1, 6, 3, 4), (1, 4, 5, 4), (1, 4, 5, 4)), {"enable_gqa": True}, "multiple"),
    (((1, 2, 3, 4), (1, 2, 5, 6), (1, 2, 5, 4)), {}, "key"),
    (((1, 2, 3, 4), (1, 2, 5, 4), (1, 2, 5, 4), (4, 5)), {}, "attn_mask"),
])
def test_sdpa_bad_inputs_raise(rng, shapes, params, message):
    with pytest.raises(OperatorError, match=message):
        run_operator(SDPA, [rand(rng, *s) for s in shapes], params=params)


# --- nn.MultiheadAttention through run_operator ---------------------------------------------

E, HEADS, N, L, S = 12, 3, 2, 5, 6


def mha_module(**kwargs):
    torch.manual_seed(0)
    module = torch.nn.MultiheadAttention(E, HEADS, **kwargs).eval()
    with torch.no_grad():   # non-zero biases, so that bias handling is tested too
        for name, p in module.named_parameters():
            if "bias" in name:
                p.uniform_(-0.5, 0.5)
    return module


def mha_params_and_weights(module):
    params = {"embed_dim": module.embed_dim, "num_heads": module.num_heads,
              "kdim": module.kdim, "vdim": module.vdim,
              "batch_first": module.batch_first, "bias": module.in_proj_bias is not None,
              "add_bias_kv": False, "add_zero_attn": False}
    weights = {k: v.detach().numpy() for k, v in module.state_dict().items()}
    return params, weights


def sequence(rng, module, length, width):
    shape = (N, length, width) if module.batch_first else (length, N, width)
    return rand(rng, *shape)


@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("kind", ["self", "kv", "qkv", "kdim_vdim"])
@pytest.mark.parametrize("masks", [(), ("am_float",), ("am_bool",), ("am_3d",), ("kpm_bool",),
                                   ("kpm_float",), ("kpm_bool", "am_float")])
def test_mha(backend, rng, batch_first, kind, masks):
    kdims = {"kdim": 7, "vdim": 9} if kind == "kdim_vdim" else {}
    module = mha_module(batch_first=batch_first, **kdims)
    params, weights = mha_params_and_weights(module)
    source = L if kind == "self" else S
    q = sequence(rng, module, L, E)
    k = q if kind == "self" else sequence(rng, module, S, module.kdim)
    v = k if kind in ("self", "kv") else sequence(rng, module, S, module.vdim)
    data = {"self": [q], "kv": [q, k]}.get(kind, [q, k, v])
    am = kpm = None
    if "am_float" in masks:
        am = rand(rng, L, source)
    if "am_bool" in masks:
        am = rng.random((L, source)) < 0.3
        am[:, 0] = False   # keep one key per row: fully masked rows are NaN in torch
    if "am_3d" in masks:
        am = rand(rng, N * HEADS, L, source)
    if "kpm_bool" in masks:
        kpm = rng.random((N, source)) < 0.3
        kpm[:, 0] = False
    if "kpm_float" in masks:
        kpm = rand(rng, N, source)
    # Inputs in the order pnnx writes them: bool masks, the data, then float masks.
    first = [m for m in (kpm, am) if m is not None and m.dtype == np.bool_]
    last = [m for m in (am, kpm) if m is not None and m.dtype != np.bool_]
    outputs = run_operator("nn.MultiheadAttention", first + data + last, params=params,
                           weights=weights, n_outputs=2, backend=backend)
    with torch.no_grad():
        expected = module(T(q), T(k), T(v), attn_mask=None if am is None else T(am),
                          key_padding_mask=None if kpm is None else T(kpm))
    assert_close(outputs[0], expected[0].numpy(), what="attention output")
    assert_close(outputs[1], expected[1].numpy(), what="attention weights")


@pytest.mark.parametrize("kind", ["self", "qkv"])
@pytest.mark.parametrize("masks", [(), ("am_bool",), ("kpm_float",), ("kpm_all",)])
def test_mha_output_only(backend, rng, kind, masks):
    """The output alone (need_weights=False, what pnnx exports keep): the NumPy layer divides
    by the softmax's sums after the product with V, and self-attention projects Q, K and V in
    one GEMM. A batch whose keys are all masked is NaN, as PyTorch's need_weights=True gives
    (and Kuiper's weights path): the graph does not say whether the model asked for weights,
    and PyTorch's need_weights=False path gives the output projection's bias there instead."""
    module = mha_module(batch_first=True)
    params, weights = mha_params_and_weights(module)
    source = L if kind == "self" else S
    q = sequence(rng, module, L, E)
    k, v = (q, q) if kind == "self" else (sequence(rng, module, S, E), sequence(rng, module, S, E))
    am = kpm = None
    if "am_bool" in masks:
        am = rng.random((L, source)) < 0.3
        am[:, 0] = False
    if "kpm_float" in masks:
        kpm = rand(rng, N, source)
    if "kpm_all" in masks:
        kpm = np.zeros((N, source), bool)
        kpm[0] = True       # every key of the first batch element masked
    data = [q] if kind == "self" else [q, k, v]
    first = [m for m in (kpm, am) if m is not None and m.dtype == np.bool_]
    last = [m for m in (am, kpm) if m is not None and m.dtype != np.bool_]
    (out,) = run_operator("nn.MultiheadAttention", first + data + last, params=params,
                          weights=weights, n_outputs=1, backend=backend)
    with torch.no_grad():
        expected = module(T(q), T(k), T(v), need_weights=False,
                          attn_mask=None if am is None else T(am),
                          key_padding_mask=None if kpm is None else T(kpm))[0].numpy()
    if "kpm_all" in masks:
        with torch.no_grad():
            weighted = module(T(q), T(k), T(v), key_padding_mask=T(kpm))[0].numpy()
        assert np.isnan(out[0]).all() and np.isnan(weighted[0]).all()
        out, expected = out[1:], expected[1:]
    assert_close(out, expected, what="attention output")


@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("bias_kv, zero_attn", [(True, False), (False, True), (True, True)])
@pytest.mark.parametrize("kind, masks", [("self", ()), ("kdim_vdim", ()),
                                         ("self", ("kpm_bool",)), ("kdim_vdim", ("am_float",))])
def test_mha_extra_key_positions(backend, rng, batch_first, bias_kv, zero_attn, kind, masks):
    """add_bias_kv / add_zero_attn: one more key/value position each, attended by every query
    (the weights get S + 1 or S + 2 columns). With masks, OpenCL runs the CPU layer."""
    kdims = {"kdim": 7, "vdim": 9} if kind == "kdim_vdim" else {}
    module = mha_module(batch_first=batch_first, add_bias_kv=bias_kv, add_zero_attn=zero_attn,
                        **kdims)
    params, weights = mha_params_and_weights(module)
    params.update(add_bias_kv=bias_kv, add_zero_attn=zero_attn)
    source = L if kind == "self" else S
    q = sequence(rng, module, L, E)
    k = q if kind == "self" else sequence(rng, module, S, module.kdim)
    v = q if kind == "self" else sequence(rng, module, S, module.vdim)
    am = rand(rng, L, source) if "am_float" in masks else None
    kpm = None
    if "kpm_bool" in masks:
        kpm = rng.random((N, source)) < 0.3
        kpm[:, 0] = False
    data = [q] if kind == "self" else [q, k, v]
    inputs = ([kpm] if kpm is not None else []) + data + ([am] if am is not None else [])
    outputs = run_operator("nn.MultiheadAttention", inputs, params=params, weights=weights,
                           n_outputs=2, backend=backend, allow_fallback=bool(masks))
    with torch.no_grad():
        expected = module(T(q), T(k), T(v), attn_mask=None if am is None else T(am),
                          key_padding_mask=None if kpm is None else T(kpm))
    assert outputs[1].shape[-1] == source + bias_kv + zero_attn
    assert_close(outputs[0], expected[0].numpy(), what="attention output")
    assert_close(outputs[1], expected[1].numpy(), what="attention weights")


class BiasKV(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.MultiheadAttention(16, 4, add_bias_kv=True)
        self.b = torch.nn.MultiheadAttention(16, 2, add_bias_kv=True, add_zero_attn=True,
                                             batch_first=True, kdim=12, vdim=10)

    def forward(self, x, k, v):
        y, w = self.a(x, x, x)
        z, w2 = self.b(x.transpose(0, 1), k, v)
        return y, w, z, w2


@pytest.mark.slow
def test_mha_add_bias_kv_pnnx_export(backend, rng, export_model):
    torch.manual_seed(0)
    module = BiasKV().eval()
    inputs = [T(rand(rng, *s)) for s in [(5, 3, 16), (3, 7, 12), (3, 7, 10)]]
    graph = kuiper.load(export_model("mha_bias_kv", module, inputs), backend=backend)
    assert not graph.fallbacks
    with torch.no_grad():
        expected = module(*inputs)
    for got, want in zip(graph.forward(*[t.numpy() for t in inputs]), expected):
        assert_close(got, want.numpy())


def test_mha_inputs_in_any_order_are_found_by_shape(backend, rng):
    module = mha_module(batch_first=True)
    params, weights = mha_params_and_weights(module)
    q, kv = rand(rng, N, L, E), rand(rng, N, S, E)
    kpm = rand(rng, N, S)
    am = rand(rng, L, S)
    (y,) = run_operator("nn.MultiheadAttention", [kpm, q, am, kv], params=params,
                        weights=weights, backend=backend)
    with torch.no_grad():
        expected = module(T(q), T(kv), T(kv), attn_mask=T(am), key_padding_mask=T(kpm))[0]
    assert_close(y, expected.numpy())


def test_mha_single_output_declared_as_weights(backend, rng):
    module = mha_module(batch_first=True, bias=False)
    params, weights = mha_params_and_weights(module)
    x = rand(rng, N, L, E)
    (w,) = run_operator("nn.MultiheadAttention", [x], params=params, weights=weights,
                        backend=backend, output_specs=[((N, L, L), np.float32)])
    with torch.no_grad():
        expected = module(T(x), T(x), T(x))[1]
    assert_close(w, expected.numpy())


# --- nn.MultiheadAttention from real pnnx exports -------------------------------------------

class MHACall(torch.nn.Module):
    def __init__(self, call, **kwargs):
        super().__init__()
        self.mha = mha_module(**kwargs)
        self.call = call

    def forward(self, *args):
        return self.call(self.mha, *args)


EXPORTS = {
    # name: (call, module kwargs, input shapes)
    "self_both": (lambda m, x: m(x, x, x), {}, [(L, N, E)]),
    "output_only": (lambda m, x: m(x, x, x)[0], {"batch_first": True}, [(N, L, E)]),
    "weights_only": (lambda m, x: m(x, x, x)[1], {"batch_first": True, "bias": False},
                     [(N, L, E)]),
    "per_head_weights": (lambda m, x: m(x, x, x, average_attn_weights=False),
                         {"batch_first": True}, [(N, L, E)]),
    "separate_kdim_vdim": (lambda m, q, k, v: m(q, k, v),
                           {"batch_first": True, "kdim": 7, "vdim": 9},
                           [(N, L, E), (N, S, 7), (N, S, 9)]),
    "float_attn_mask": (lambda m, x, a: m(x, x, x, attn_mask=a), {"batch_first": True},
                        [(N, L, E), (L, L)]),
    "bool_attn_mask": (lambda m, x, a: m(x, x, x, attn_mask=a > 0.7)[0], {},
                       [(L, N, E), (L, L)]),
    "bool_padding_mask": (lambda m, x, p: m(x, x, x, key_padding_mask=p > 0.7),
                          {"batch_first": True}, [(N, L, E), (N, L)]),
    "float_padding_mask": (lambda m, x, p: m(x, x, x, key_padding_mask=p)[0], {},
                           [(L, N, E), (N, L)]),
    "both_bool": (lambda m, x, a, p: m(x, x, x, attn_mask=a > 0.7, key_padding_mask=p > 0.7),
                  {"batch_first": True}, [(N, L, E), (L, L), (N, L)]),
    "both_float": (lambda m, x, a, p: m(x, x, x, attn_mask=a, key_padding_mask=p),
                   {"batch_first": True}, [(N, L, E), (L, L), (N, L)]),
    # batch == target length: a lone 2-D mask could be either mask; it is taken as attn_mask
    "square_batch_attn_mask": (lambda m, x, a: m(x, x, x, attn_mask=a)[0], {"batch_first": True},
                               [(L, L, E), (L, L)]),
    "cross_3d_mask_bool_padding": (
        lambda m, q, k, v, a, p: m(q, k, v, attn_mask=a, key_padding_mask=p > 0.7),
        {"batch_first": True}, [(N, L, E), (N, S, E), (N, S, E), (N * HEADS, L, S), (N, S)]),
}


@pytest.mark.parametrize("name", list(EXPORTS))
def test_mha_from_pnnx_exports(backend, rng, export_model, name):
    call, kwargs, shapes = EXPORTS[name]
    module = MHACall(call, **kwargs).eval()
    inputs = [rng.random(s).astype(np.float32) for s in shapes]
    path = export_model(f"attention_mha_{name}", module, [T(x) for x in inputs])
    outputs = kuiper.load(path, backend=backend).forward(*inputs)
    with torch.no_grad():
        expected = module(*[T(x) for x in inputs])
    expected = expected if isinstance(expected, tuple) else (expected,)
    assert len(outputs) == len(expected)
    for actual, ref in zip(outputs, expected):
        assert_close(actual, ref.numpy())


def test_mha_export_runs_at_other_sizes(backend, rng, export_model):
    call, kwargs, shapes = EXPORTS["both_bool"]
    module = MHACall(call, **kwargs).eval()
    inputs = [rng.random(s).astype(np.float32) for s in shapes]
    graph = kuiper.load(export_model("attention_mha_both_bool", module, [T(x) for x in inputs]),
                        backend=backend)
    for n, length in [(N, L), (3, 8)]:
        inputs = [rng.random(s).astype(np.float32)
                  for s in [(n, length, E), (length, length), (n, length)]]
        with torch.no_grad():
            expected = module(*[T(x) for x in inputs])
        for actual, ref in zip(graph.forward(*inputs), expected):
            assert_close(actual, ref.numpy())


def test_mha_bad_params_raise(rng):
    module = mha_module()
    params, weights = mha_params_and_weights(module)
    x = rand(rng, L, N, E)
    with pytest.raises(OperatorError, match="bias_k"):   # add_bias_kv needs its weights
        run_operator("nn.MultiheadAttention", [x], params={**params, "add_bias_kv": True},
                     weights=weights)
    with pytest.raises(OperatorError, match="multiple of num_heads"):
        run_operator("nn.MultiheadAttention", [x], params={**params, "num_heads": 5},
                     weights=weights)
    with pytest.raises(OperatorError, match="in_proj_weight"):
        run_operator("nn.MultiheadAttention", [x], params={**params, "embed_dim": 6},
                     weights=weights)
    with pytest.raises(OperatorError, match="cannot match inputs"):
        run_operator("nn.MultiheadAttention", [x, rand(rng, 3, 3)], params=params,
                     weights=weights)


# --- every OpenCL path, each forced on its own ------------------------------------------------
# The two fused kernels (attention_rows of clkernels/attention_fused.cl, picked on GPUs, and
# attention_blocks of clkernels/attention_blocks.cl, picked on CPU devices) and the unfused chain
# (bgemm + masked_softmax) are all picked by layers/opencl/attention.py; each is checked here
# against torch on awkward shapes: head sizes that are not multiples of 4 (scalar loads) and
# wide ones, one token, token counts that leave a partial tile of keys, a partial vector of
# keys and a partial group or block of queries.

PATHS = ["fused_rows", "fused_blocks", "unfused"]

def opencl_path(path):
    from tests.conftest import opencl_available

    if not opencl_available():
        pytest.skip("no OpenCL device")
    from kuiper.layers.opencl.attention import forced_path

    return forced_path(path)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("head, value_head", [(32, 32), (64, 64), (80, 80), (128, 128), (3, 5),
                                              (12, 20)])
@pytest.mark.parametrize("length, source", [(1, 1), (13, 13), (67, 33), (5, 70)])
def test_sdpa_each_opencl_path(rng, path, head, value_head, length, source):
    q, k = rand(rng, 2, 3, length, head), rand(rng, 2, 3, source, head)
    v = rand(rng, 2, 3, source, value_head)
    with opencl_path(path):
        (y,) = run_operator(SDPA, [q, k, v], params={"dropout_p": 0.0, "is_causal": False},
                            backend="opencl")
    assert_close(y, F.scaled_dot_product_attention(T(q), T(k), T(v)).numpy())


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("mask", ["causal", "bool", "float", "bool_broadcast", "fully_masked",
                                  "gqa", "causal_long"])
def test_sdpa_masks_on_each_opencl_path(rng, path, mask):
    q, k, v = rand(rng, 2, 4, 37, 16), rand(rng, 2, 4, 41, 16), rand(rng, 2, 4, 41, 24)
    if mask == "causal_long":   # blocks of rows whose diagonal ends tiles early, L > S
        q, k, v = rand(rng, 1, 3, 83, 32), rand(rng, 1, 3, 75, 32), rand(rng, 1, 3, 75, 40)
    params = {"dropout_p": 0.0, "is_causal": mask.startswith("causal")}
    inputs, torch_mask = [q, k, v], None
    if mask == "gqa":   # two K/V heads serve four query heads
        k, v = k[:, :2], v[:, :2]
        inputs = [q, k, v]
        params["enable_gqa"] = True
    elif mask in ("bool", "bool_broadcast", "fully_masked"):
        shape = (2, 4, 37, 41) if mask == "bool" else (37, 41)
        m = rng.random(shape) > 0.3
        if mask == "fully_masked":
            m[5] = False   # every key of query 5 forbidden: SDPA gives zeros there
        inputs.append(m)
        torch_mask = T(m)
    elif mask == "float":
        m = rand(rng, 1, 4, 37, 41)
        inputs.append(m)
        torch_mask = T(m)
    with opencl_path(path):
        (y,) = run_operator(SDPA, inputs, params=params, backend="opencl")
    expected = F.scaled_dot_product_attention(T(q), T(k), T(v), attn_mask=torch_mask,
                                              is_causal=mask.startswith("causal"),
                                              enable_gqa=mask == "gqa")
    assert_close(y, torch.nan_to_num(expected).numpy())


def test_sdpa_nan_in_a_row_is_nan_on_each_opencl_path(rng):
    q, k, v = rand(rng, 1, 1, 4, 8), rand(rng, 1, 1, 70, 8), rand(rng, 1, 1, 70, 8)
    k[0, 0, 50, 3] = np.nan   # in the second tile of keys: every query's row sees it
    expected = F.scaled_dot_product_attention(T(q), T(k), T(v)).numpy()
    for path in PATHS:
        with opencl_path(path):
            (y,) = run_operator(SDPA, [q, k, v], params={"dropout_p": 0.0, "is_causal": False},
                                backend="opencl")
        assert np.isnan(expected).all() and np.isnan(y).all(), path


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("kind", ["self", "kv", "qkv"])
@pytest.mark.parametrize("masks", [(), ("am_float",), ("am_bool",), ("am_3d",), ("kpm_bool",),
                                   ("kpm_float",)])
def test_mha_output_only_on_each_opencl_path(rng, path, batch_first, kind, masks):
    """MultiheadAttention without its weights output: what the fused path serves (Q, K, V in
    one GEMM for self-attention), and what the unfused chain must agree with."""
    module = mha_module(batch_first=batch_first)
    params, weights = mha_params_and_weights(module)
    source = L if kind == "self" else S
    q = sequence(rng, module, L, E)
    k = q if kind == "self" else sequence(rng, module, S, E)
    v = k if kind in ("self", "kv") else sequence(rng, module, S, E)
    data = {"self": [q], "kv": [q, k]}.get(kind, [q, k, v])
    am = kpm = None
    if "am_float" in masks:
        am = rand(rng, L, source)
    if "am_bool" in masks:
        am = rng.random((L, source)) < 0.3
        am[:, 0] = False
    if "am_3d" in masks:
        am = rand(rng, N * HEADS, L, source)
    if "kpm_bool" in masks:
        kpm = rng.random((N, source)) < 0.3
        kpm[:, 0] = False
    if "kpm_float" in masks:
        kpm = rand(rng, N, source)
    first = [m for m in (kpm, am) if m is not None and m.dtype == np.bool_]
    last = [m for m in (am, kpm) if m is not None and m.dtype != np.bool_]
    with opencl_path(path):
        (y,) = run_operator("nn.MultiheadAttention", first + data + last, params=params,
                            weights=weights, n_outputs=1, backend="opencl")
    with torch.no_grad():
        expected = module(T(q), T(k), T(v), attn_mask=None if am is None else T(am),
                          key_padding_mask=None if kpm is None else T(kpm),
                          need_weights=False)[0]
    assert_close(y, expected.numpy(), what=f"attention output ({path})")


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("embed, heads, tokens", [(384, 6, 197), (96, 3, 1), (160, 2, 31)])
def test_mha_vit_like_shapes_on_each_opencl_path(rng, path, embed, heads, tokens):
    """ViT-S/16's attention (197 tokens, 6 heads of 64), a single token, heads of 80."""
    module = torch.nn.MultiheadAttention(embed, heads, batch_first=True).eval()
    params, weights = mha_params_and_weights(module)
    x = rand(rng, 2, tokens, embed)
    with opencl_path(path):
        (y,) = run_operator("nn.MultiheadAttention", [x], params=params, weights=weights,
                            n_outputs=1, backend="opencl")
    with torch.no_grad():
        expected = module(T(x), T(x), T(x), need_weights=False)[0]
    assert_close(y, expected.numpy(), what=f"ViT-like attention ({path})")


# --- kuiper.fused_attention: what fuse_attention puts in place of a hand-written attention ----

@pytest.mark.parametrize("q_shape, s, ev", [((2, 3, 13, 16), 13, 16), ((1, 2, 67, 80), 33, 24),
                                            ((3, 1, 5), 70, 5), ((1, 4, 1, 3), 1, 7)])
@pytest.mark.parametrize("masked", [False, True])
def test_fused_attention_operator(backend, rng, q_shape, s, ev, masked):
    q = rand(rng, *q_shape)
    batch, e = q_shape[:-2], q_shape[-1]
    kt = rand(rng, *batch, e, s)                 # K^T, as the model's first matmul reads it
    v = rand(rng, *batch, s, ev)
    inputs = [q, kt, v]
    scores = T(q) @ T(kt) * 0.3
    if masked:
        mask = np.where(rng.random((*batch[:1], *([1] * (len(batch) - 1)), 1, s)) < 0.2,
                        -1e4, 0.0).astype(np.float32)   # a padding mask, broadcast over rows
        inputs.append(mask)
        scores = scores + T(mask)
    (y,) = run_operator("kuiper.fused_attention", inputs,
                        params={"scale": 0.3, "masked": masked}, backend=backend)
    assert_close(y, (torch.softmax(scores, dim=-1) @ T(v)).numpy())


# --- every parameter set of the fused kernel, forced on whatever device runs the tests ------

def fused_variant(params):
    from tests.conftest import opencl_available

    if not opencl_available():
        pytest.skip("no OpenCL device")
    from kuiper.layers.opencl.attention import forced_parameters, forced_path

    @contextlib.contextmanager
    def both():   # attention_rows (a CPU device would take attention_blocks) with these sets
        with forced_path("fused_rows"), forced_parameters(params):
            yield

    return both()


def variant_ids(params):
    return f"wg{params['WG']}_bk{params['BK']}_ksplit{params['KSPLIT']}"


def fused_variants():
    from kuiper.layers.opencl.attention import FUSED_VARIANTS

    return FUSED_VARIANTS


@pytest.mark.parametrize("params", fused_variants(), ids=variant_ids)
@pytest.mark.parametrize("head, value_head, length, source", [
    (32, 32, 1, 1), (80, 80, 67, 33), (3, 5, 5, 70), (128, 128, 19, 41)])
def test_sdpa_each_fused_opencl_variant(rng, params, head, value_head, length, source):
    """Rows per group, keys per tile, work-items per row (KSPLIT: partial softmaxes merged):
    partial groups of rows, partial tiles of keys, fewer keys than work-items per row."""
    q, k = rand(rng, 2, 3, length, head), rand(rng, 2, 3, source, head)
    v = rand(rng, 2, 3, source, value_head)
    with fused_variant(params):
        (y,) = run_operator(SDPA, [q, k, v], params={"dropout_p": 0.0, "is_causal": False},
                            backend="opencl")
    assert_close(y, F.scaled_dot_product_attention(T(q), T(k), T(v)).numpy())


@pytest.mark.parametrize("params", fused_variants(), ids=variant_ids)
def test_masks_and_nan_on_each_fused_opencl_variant(rng, params):
    """Causal rows (the first query sees one key: most parts of a split row see none), a
    fully masked row (zeros for SDPA), a NaN key (NaN rows, whichever part met it)."""
    q, k, v = rand(rng, 1, 2, 37, 16), rand(rng, 1, 2, 41, 16), rand(rng, 1, 2, 41, 24)
    m = rng.random((37, 41)) > 0.3
    m[5] = False
    with fused_variant(params):
        (causal,) = run_operator(SDPA, [q, k, v], params={"dropout_p": 0.0, "is_causal": True},
                                 backend="opencl")
        (masked,) = run_operator(SDPA, [q, k, v, m],
                                 params={"dropout_p": 0.0, "is_causal": False},
                                 backend="opencl")
        k_nan = k.copy()
        k_nan[0, 1, 40, 3] = np.nan
        (with_nan,) = run_operator(SDPA, [q, k_nan, v],
                                   params={"dropout_p": 0.0, "is_causal": False},
                                   backend="opencl")
    assert_close(causal, F.scaled_dot_product_attention(T(q), T(k), T(v),
                                                        is_causal=True).numpy())
    expected = F.scaled_dot_product_attention(T(q), T(k), T(v), attn_mask=T(m))
    assert_close(masked, torch.nan_to_num(expected).numpy())
    assert np.isnan(with_nan[0, 1]).all() and not np.isnan(with_nan[0, 0]).any()


@pytest.mark.parametrize("moves", ["all", "q_and_output", "k_only"])
def test_fused_attention_operator_reads_through_permutes(backend, rng, moves):
    """The permutes fuse_attention absorbs (q_perm, k_perm, v_perm, o_perm): Q, K and V given
    as the (batch, tokens, heads, dim) tensors a head split permuted, the result written as
    the permute back to (batch, tokens, heads, dim) would have."""
    b, t, s, h, d = 2, 11, 13, 3, 8
    x_q, x_k, x_v = rand(rng, b, t, h, d), rand(rng, b, s, h, d), rand(rng, b, s, h, d)
    q, kt, v = x_q.transpose(0, 2, 1, 3), x_k.transpose(0, 2, 3, 1), x_v.transpose(0, 2, 1, 3)
    params = {"scale": 0.25, "masked": False}
    inputs = [np.ascontiguousarray(a) for a in (q, kt, v)]
    if moves in ("all", "q_and_output"):
        inputs[0], params["q_perm"] = x_q, [0, 2, 1, 3]
        params["o_perm"] = [0, 2, 1, 3]
    if moves in ("all", "k_only"):
        inputs[1], params["k_perm"] = x_k, [0, 2, 3, 1]
    if moves == "all":
        inputs[2], params["v_perm"] = x_v, [0, 2, 1, 3]
    (y,) = run_operator("kuiper.fused_attention", inputs, params=params, backend=backend)
    expected = torch.softmax(T(q) @ T(kt) * 0.25, dim=-1) @ T(v)
    if "o_perm" in params:
        expected = expected.permute(0, 2, 1, 3)
    assert_close(y, expected.numpy(), what=f"{moves} on {backend}")


@pytest.mark.parametrize("biases", ["all", "none", "k_only"])
def test_fused_attention_operator_with_its_projections(backend, rng, biases):
    """`projected`: Q, K and V computed inside from x by the three linear layers the pass
    absorbed (one GEMM with the weights side by side on OpenCL), split into heads of different
    widths for V (Ev = 12, E = 8), through the head-split permutes, with a padding mask."""
    b, t, h, e, ev, width = 2, 13, 3, 8, 12, 20
    x = rand(rng, b, t, width)
    w = {"q": rand(rng, h * e, width), "k": rand(rng, h * e, width), "v": rand(rng, h * ev, width)}
    bias = {r: rand(rng, len(w[r])) for r in "qkv"
            if biases == "all" or (biases == "k_only" and r == "k")}
    mask = np.where(rng.random((b, 1, 1, t)) < 0.2, -1e4, 0.0).astype(np.float32)
    params = {"scale": 0.3, "masked": True, "projected": True, "q_perm": [0, 2, 1, 3],
              "k_perm": [0, 2, 3, 1], "v_perm": [0, 2, 1, 3], "o_perm": [0, 2, 1, 3],
              "q_shape": [b, t, h, e], "k_shape": [b, t, h, e], "v_shape": [b, t, h, ev]}
    weights = {f"{r}_weight": w[r] for r in "qkv"} | {f"{r}_bias": bias[r] for r in bias}
    (y,) = run_operator("kuiper.fused_attention", [x, mask], params=params, weights=weights,
                        backend=backend)
    proj = {r: T(x) @ T(w[r]).T + (T(bias[r]) if r in bias else 0.0) for r in "qkv"}
    q = proj["q"].reshape(b, t, h, e).permute(0, 2, 1, 3)
    k = proj["k"].reshape(b, t, h, e).permute(0, 2, 1, 3)
    v = proj["v"].reshape(b, t, h, ev).permute(0, 2, 1, 3)
    expected = torch.softmax(q @ k.transpose(-1, -2) * 0.3 + T(mask), dim=-1) @ v
    assert_close(y, expected.permute(0, 2, 1, 3).numpy(), what=f"{biases} on {backend}")


def test_fused_attention_projections_that_do_not_fit_x(rng):
    """A q_shape that x cannot be projected to is a clear error naming the role."""
    x = rand(rng, 1, 5, 8)
    params = {"scale": 1.0, "masked": False, "projected": True, "q_shape": [1, 5, 2, 3],
              "k_shape": [1, 5, 2, 4], "v_shape": [1, 5, 2, 4]}
    weights = {"q_weight": rand(rng, 8, 8), "k_weight": rand(rng, 8, 8),
               "v_weight": rand(rng, 8, 8)}
    with pytest.raises(KuiperError, match="q_shape"):
        run_operator("kuiper.fused_attention", [x], params=params, weights=weights)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("q_shape, s, ev", [((1, 2, 67, 64), 197, 64), ((2, 3, 13, 80), 13, 80),
                                            ((1, 2, 9, 128), 33, 128), ((3, 1, 5), 70, 5)])
@pytest.mark.parametrize("masked", [False, True])
def test_fused_attention_operator_on_each_opencl_path(rng, path, q_shape, s, ev, masked):
    """K^T read in place (no transposed copy) by each fused kernel, padding masks included."""
    q = rand(rng, *q_shape)
    batch, e = q_shape[:-2], q_shape[-1]
    kt, v = rand(rng, *batch, e, s), rand(rng, *batch, s, ev)
    inputs = [q, kt, v]
    scores = T(q) @ T(kt) * 0.125
    if masked:
        mask = np.where(rng.random((*batch[:1], *([1] * (len(batch) - 1)), 1, s)) < 0.2,
                        -1e4, 0.0).astype(np.float32)
        inputs.append(mask)
        scores = scores + T(mask)
    with opencl_path(path):
        (y,) = run_operator("kuiper.fused_attention", inputs,
                            params={"scale": 0.125, "masked": masked}, backend="opencl")
    assert_close(y, (torch.softmax(scores, dim=-1) @ T(v)).numpy())
