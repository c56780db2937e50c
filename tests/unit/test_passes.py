"""The graph passes (kuiper/passes/), each on its own, on both backends.

A pass that changes no arithmetic (folding, dead and no-op elimination) must give the same
outputs *bit for bit* with and without it; its report must say what it changed. Fusion changes
where the arithmetic happens, so it is checked against the unfused run and PyTorch within the
tolerance (tests/models/test_fusion_matrix.py pairs every producer with every activation).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import kuiper
from kuiper.cli.main import main
from kuiper.graph.pipeline import PASS_NAMES
from kuiper.testing import assert_close
from tests.conftest import skip_without_opencl
from tests.unit.test_graph import write_model

X = "pnnx.Input in 0 1 x #x=(2,3,4,5)f32"

DEAD = [
    X,
    "torch.max mx 1 2 x mv mi dim=1 keepdim=False",   # dead: values and indices both unused
    "torch.unbind ub 1 3 x u0 u1 u2 dim=1",           # runs for u0; u1 and u2 unused
    "nn.ReLU r1 1 1 x a",                             # dead: only the dead sigmoid reads it
    "nn.Sigmoid s1 1 1 a b",                          # dead
    "F.relu r2 1 1 u0 c",
    "pnnx.Output out 1 0 c",
]

NOOPS = [
    X,
    "nn.ReLU r 1 1 x a",
    "Tensor.reshape rs 1 1 a b shape=(2,3,4,5)",       # the shape it has: a no-op
    "Tensor.contiguous ct 1 1 b c",                    # a no-op
    "Tensor.to to 1 1 c d copy=False dtype=torch.float",  # the dtype it has: a no-op
    "Tensor.expand ex 1 1 d e sizes=(2,3,4,5)",        # the shape it has: a no-op
    "torch.clone cl 1 1 e f",                          # a no-op
    "Tensor.view vw 1 1 f g shape=(6,20)",             # another shape: runs
    "Tensor.to tl 1 1 f h copy=False dtype=torch.double",  # another dtype: runs
    "pnnx.Output out 3 0 g h e",
]

FOLD = [
    X,
    "pnnx.Attribute w 0 1 k @data=(5)f32",
    "pnnx.Expression shape 1 1 x s expr=[size(@0,0),-1]",   # known from the shape: folded
    "Tensor.reshape rs 2 1 x s y",
    "pnnx.Expression mul 2 1 x k z expr=mul(@0,@1)",
    "pnnx.Output out 2 0 y z",
]

CONV = ("bias=True dilation=(1,1) groups=1 in_channels=3 kernel_size=(3,3) out_channels=3 "
        "padding=(1,1) padding_mode=zeros stride=(1,1) @weight=(3,3,3,3)f32 @bias=(3)f32")
FUSE = [
    X,
    "pnnx.Input in_r 0 1 r #r=(2,3,4,5)f32",
    f"nn.Conv2d conv_a 1 1 x a {CONV}",
    "pnnx.Expression add_a 2 1 r a ar expr=add(@0,@1)",   # residual first, either operand order
    "nn.ReLU relu_a 1 1 ar ra",                          # conv_a <- + r, relu
    f"nn.Conv2d conv_b 1 1 ra b {CONV}",
    "nn.SiLU silu_b 1 1 b sb",
    "pnnx.Expression add_b 2 1 sb ra br expr=add(@0,@1)",  # conv_b <- silu, + ra
    f"nn.Conv2d conv_c 1 1 br c {CONV}",
    "nn.ReLU relu_c 1 1 c rc",                           # not fused: c is a model output
    f"nn.Conv2d conv_d 1 1 rc d {CONV}",
    f"nn.Conv2d conv_e 1 1 rc e {CONV}",
    "pnnx.Expression add_de 2 1 d e de expr=add(@0,@1)",  # the later conv <- + the other
    "pnnx.Output out 3 0 rc c de",
]


def conv_weights(rng) -> dict[str, np.ndarray]:
    return {f"{name}.{key}": rng.standard_normal(shape).astype(np.float32)
            for name in ("conv_a", "conv_b", "conv_c", "conv_d", "conv_e")
            for key, shape in (("weight", (3, 3, 3, 3)), ("bias", (3,)))}


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    folder = tmp_path_factory.mktemp("passes")
    rng = np.random.default_rng(11)
    weights = conv_weights(rng)
    return {"dead": write_model(folder, DEAD, name="dead"),
            "noops": write_model(folder, NOOPS, name="noops"),
            "fold": write_model(folder, FOLD, {"w.data": np.arange(5, dtype=np.float32)},
                                name="fold"),
            "fuse": (write_model(folder, FUSE, weights, name="fuse"), weights)}


def inputs(n: int = 1) -> list[np.ndarray]:
    rng = np.random.default_rng(3)
    return [rng.standard_normal((2, 3, 4, 5)).astype(np.float32) for _ in range(n)]


def same_bits(a, b) -> None:
    assert len(a) == len(b)
    for u, v in zip(a, b):
        assert u.dtype == v.dtype and u.shape == v.shape
        np.testing.assert_array_equal(u, v)


def report(graph, name: str):
    return next(r for r in graph.plan.reports if r.name == name)


# --- choosing passes ----------------------------------------------------------------------------
def test_the_passes_run_in_order_and_each_reports(models):
    graph = kuiper.load(models["dead"])
    assert graph.passes == PASS_NAMES
    assert [r.name for r in graph.plan.reports] == list(PASS_NAMES)
    assert kuiper.load(models["dead"], passes=["eliminate_dead", "fold_constants"]).plan.passes \
        == ("fold_constants", "eliminate_dead")  # pipeline order, whatever the list's
    assert kuiper.load(models["dead"], passes=[]).plan.reports == []


@pytest.mark.parametrize("passes", [["fold", "eliminate_dead"], "dead_code", ["FUSE_EPILOGUES"]])
def test_an_unknown_pass_is_refused_with_the_list(models, passes):
    with pytest.raises(kuiper.KuiperError) as error:
        kuiper.load(models["dead"], passes=passes)
    message = str(error.value)
    assert "unknown pass" in message and all(name in message for name in PASS_NAMES)


# --- each pass on its own -----------------------------------------------------------------------
def test_fold_constants(models, backend):
    graph = kuiper.load(models["fold"], backend=backend, passes=["fold_constants"])
    assert graph.plan.folded == {"w", "shape"}
    assert report(graph, "fold_constants").changed == 2
    assert "w (pnnx.Attribute)" in report(graph, "fold_constants").details
    assert {op.name for op in graph.plan.steps} == {"rs", "mul"}
    if backend == "cpu":  # the CPU executor no longer runs them either: their values are handed on
        assert {op.name for op in graph.executor.steps} == {"rs", "mul"}
    (x,) = inputs()
    same_bits(graph.forward(x), kuiper.load(models["fold"], backend=backend,
                                            passes=[]).forward(x))
    assert_close(graph.forward(x)[1], x * np.arange(5, dtype=np.float32))


def test_eliminate_dead(models, backend):
    graph = kuiper.load(models["dead"], backend=backend)
    assert graph.plan.dead == {"mx", "r1", "s1"}
    dead = report(graph, "eliminate_dead")
    assert dead.changed == 3 and dead.summary.startswith("3 operators removed")
    assert "2 unused output(s)" in dead.summary
    assert "unused: u1 of ub (torch.unbind)" in dead.details
    assert [op.name for op in graph.plan.steps] == ["ub", "r2"]
    (x,) = inputs()
    same_bits(graph.forward(x), kuiper.load(models["dead"], backend=backend,
                                            passes=["fold_constants"]).forward(x))
    # a dead operator's value asked for by name: the run uses the unoptimized plan
    b, mi = graph.forward(x, outputs=["b", "mi"])
    assert_close(b, 1 / (1 + np.exp(-np.maximum(x, 0))))
    np.testing.assert_array_equal(mi, x.argmax(axis=1))


def test_eliminate_noops(models, backend):
    graph = kuiper.load(models["noops"], backend=backend)
    assert graph.plan.noops == {"rs", "ct", "to", "ex", "cl"}
    assert graph.plan.resolve("f") == "a" and graph.plan.resolve("e") == "a"
    assert {op.name for op in graph.plan.steps} == {"r", "vw", "tl"}
    assert report(graph, "eliminate_noops").changed == 5
    (x,) = inputs()
    got = graph.forward(x)
    same_bits(got, kuiper.load(models["noops"], backend=backend,
                               passes=["fold_constants"]).forward(x))
    np.testing.assert_array_equal(got[0], np.maximum(x, 0).reshape(6, 20))
    assert got[1].dtype == np.float64
    # an eliminated operator's output by name is its input's value
    np.testing.assert_array_equal(graph.forward(x, outputs="c")[0], np.maximum(x, 0))


def expected_fuse(weights, x, r) -> list[np.ndarray]:
    t = {k: torch.from_numpy(v) for k, v in weights.items()}

    def conv(name, y):
        return F.conv2d(y, t[f"{name}.weight"], t[f"{name}.bias"], padding=1)

    x, r = torch.from_numpy(x), torch.from_numpy(r)
    ra = F.relu(r + conv("conv_a", x))
    br = F.silu(conv("conv_b", ra)) + ra
    c = conv("conv_c", br)
    rc = F.relu(c)
    return [o.numpy() for o in (rc, c, conv("conv_d", rc) + conv("conv_e", rc))]


def test_fuse_epilogues_decides_once_for_both_backends(models, backend):
    path, weights = models["fuse"]
    graph = kuiper.load(path, backend=backend)
    epilogues = graph.plan.epilogues
    # conv_d and conv_e both feed add_de: the one that runs later absorbs it
    later = "conv_d" if "conv_d" in epilogues else "conv_e"
    assert set(epilogues) == {"conv_a", "conv_b", later}, graph.plan.describe()
    a, b, e = epilogues["conv_a"], epilogues["conv_b"], epilogues[later]
    assert (a.residual, a.residual_first, a.activation.name) == ("r", True, "relu_a")
    # the residual by the operand holding it: ra is conv_a's fused output, a
    assert (b.residual, b.residual_first, b.activation.name) == ("a", False, "silu_b")
    assert (e.residual, e.activation) == ("e" if later == "conv_d" else "d", None)
    assert a.absorbed == ("add_a", "relu_a") and b.absorbed == ("silu_b", "add_b")
    assert report(graph, "fuse_epilogues").summary.startswith("5 operators fused into 3 producers")
    assert ("conv_a (nn.Conv2d) writes nn.ReLU(y + 'r'), absorbing add_a (pnnx.Expression), "
            "relu_a (nn.ReLU)") in report(graph, "fuse_epilogues").details
    assert b.describe() == "nn.SiLU(y) + 'a'"
    assert graph.plan.resolve("ra") == "a"
    x, r = inputs(2)
    want = expected_fuse(weights, x, r)
    got = graph.forward(x, r)
    for g, w in zip(got, want):
        assert_close(g, w)
    unfused = kuiper.load(path, backend=backend, passes=["fold_constants"]).forward(x, r)
    for g, u in zip(got, unfused):
        assert_close(g, u)
    np.testing.assert_array_equal(x, inputs(2)[0])  # the inputs come back untouched
    np.testing.assert_array_equal(r, inputs(2)[1])


def test_fuse_false_is_the_plan_without_fusion(models):
    path, _ = models["fuse"]
    graph = kuiper.load(path, fuse=False)
    assert graph.executor.plan.epilogues == {}
    assert "fuse_epilogues" not in graph.executor.plan.passes
    x, r = inputs(2)
    same_bits(graph.forward(x, r), kuiper.load(path, passes=["fold_constants", "eliminate_dead",
                                                             "eliminate_noops"]).forward(x, r))


def test_an_observer_sees_every_operator_unfused(models, backend):
    """`kuiper compare` checks each operator's own output: the fused ones run on their own."""
    path, weights = models["fuse"]
    graph = kuiper.load(path, backend=backend)
    x, r = inputs(2)
    seen = {}
    outs = graph.forward(x, r, observer=lambda op, o, s: seen.setdefault(op.name, o[0]))
    assert set(seen) == {op.name for op in graph.plan.order}  # every operator, fused or not
    assert seen["conv_a"].min() < 0  # the raw convolution, before its ReLU
    np.testing.assert_array_equal(seen["relu_a"], np.maximum(seen["add_a"], 0))
    for g, w in zip(outs, expected_fuse(weights, x, r)):
        assert_close(g, w)
    for g, w in zip(graph.forward(x, r), outs):  # and the fused binding is intact afterwards
        assert_close(g, w)


def test_outputs_naming_a_fused_value_get_the_raw_one(models, backend):
    path, weights = models["fuse"]
    graph = kuiper.load(path, backend=backend)
    x, r = inputs(2)
    t = {k: torch.from_numpy(v) for k, v in weights.items()}
    raw = F.conv2d(torch.from_numpy(x), t["conv_a.weight"], t["conv_a.bias"], padding=1)
    a, ar, ra = graph.forward(x, r, outputs=["a", "ar", "ra"])
    assert a.min() < 0
    assert_close(a, raw.numpy())
    assert_close(ar, (raw + torch.from_numpy(r)).numpy())
    assert_close(ra, F.relu(raw + torch.from_numpy(r)).numpy())
    # the end of a fused chain is served by the fused plan itself
    assert graph.plan.serves(["ra", "br"]) and not graph.plan.serves(["a"])


def test_a_residual_computed_after_the_producer_or_read_twice_is_not_fused(tmp_path):
    rng = np.random.default_rng(2)
    weights = conv_weights(rng)
    path = write_model(tmp_path, [
        X,
        f"nn.Conv2d conv_a 1 1 x a {CONV}",
        f"nn.Conv2d conv_b 1 1 x b {CONV}",
        "pnnx.Expression add 2 1 a b s expr=add(@0,@1)",  # one of the two fuses, not both
        "nn.ReLU relu 1 1 b rb",                           # b has two readers: no fusion
        "pnnx.Output out 2 0 s rb"], weights)
    graph = kuiper.load(path)
    assert list(graph.plan.epilogues) in (["conv_a"], ["conv_b"]), graph.plan.describe()
    producer = next(iter(graph.plan.epilogues))
    first = [op.name for op in graph.plan.order].index
    other = graph.plan.epilogues[producer].residual
    assert first(graph.operands[other].producer.name) < first(producer)


# --- the command line ---------------------------------------------------------------------------
def test_info_passes_lists_what_each_pass_changed(models, capsys):
    assert main(["info", models["dead"], "--passes"]) == 0
    out = capsys.readouterr().out
    assert "graph passes, in order" in out
    assert "eliminate_dead   3 operators removed" in out
    assert "mx (torch.max)" in out and "unused: u2 of ub (torch.unbind)" in out
    assert main(["info", models["dead"], "--passes", "--no-pass", "eliminate_dead",
                 "--no-pass", "fuse_epilogues,plan_memory"]) == 0
    out = capsys.readouterr().out
    assert "eliminate_dead   off (not run)" in out and "plan_memory      off" in out
    assert "mx (torch.max)" not in out


def test_no_pass_on_run_bench_and_compare_is_checked(models, capsys):
    for command in ("info", "run", "bench", "compare"):
        with pytest.raises(SystemExit) as stop:
            main([command, models["dead"], "--no-pass", "dead"])
        assert stop.value.code == 2
        assert "unknown pass dead" in capsys.readouterr().err


# --- the CPU producers' contract: epilogue=, residual=, out= ------------------------------------
@pytest.mark.parametrize("conv", [
    dict(cin=4, cout=6, k=3, groups=1, lowering="im2col"),
    dict(cin=4, cout=6, k=3, groups=1, lowering="taps"),
    dict(cin=4, cout=6, k=1, groups=1, lowering="auto"),      # pointwise: no im2col
    dict(cin=4, cout=8, k=3, groups=4, lowering="auto"),      # depthwise (x2): tap grid
])
def test_conv_writes_its_fused_output_into_out(tmp_path, conv):
    """`writes_into`: forward(..., out=y) fills the caller's array (the memory planner's CPU
    workspace), with the epilogue applied, on every lowering of the convolution."""
    rng = np.random.default_rng(4)
    cin, cout, k, g = conv["cin"], conv["cout"], conv["k"], conv["groups"]
    params = (f"bias=True dilation=(1,1) groups={g} in_channels={cin} kernel_size=({k},{k}) "
              f"out_channels={cout} padding=(1,1) padding_mode=zeros stride=(1,1) "
              f"@weight=({cout},{cin // g},{k},{k})f32 @bias=({cout})f32")
    w = rng.standard_normal((cout, cin // g, k, k)).astype(np.float32)
    b = rng.standard_normal(cout).astype(np.float32)
    path = write_model(tmp_path, [
        "pnnx.Input in 0 1 x #x=(2,4,7,9)f32", f"nn.Conv2d conv 1 1 x y {params}",
        "pnnx.Expression add 2 1 y r s expr=add(@0,@1)",
        "nn.ReLU6 act 1 1 s z", "pnnx.Input in_r 0 1 r", "pnnx.Output out 1 0 z"],
        {"conv.weight": w, "conv.bias": b})
    x = 3 * rng.standard_normal((2, 4, 7, 9)).astype(np.float32)
    want = F.conv2d(torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(b), padding=1,
                    groups=g)
    r = rng.standard_normal(tuple(want.shape)).astype(np.float32)
    graph = kuiper.load(path, input_shapes=[x.shape, r.shape])
    layer = graph.operators[1].layer
    layer.lowering = conv["lowering"]
    epilogue = graph.plan.epilogues["conv"]
    out = np.full(want.shape, np.nan, np.float32)
    (y,) = layer.forward([x], epilogue=epilogue, residual=r, out=out)
    assert y is out
    assert_close(out, F.relu6(want + torch.from_numpy(r)).numpy())
    assert_close(graph.forward(x, r)[0], out)


def test_linear_writes_its_fused_output_into_out(tmp_path):
    rng = np.random.default_rng(5)
    w, b = (rng.standard_normal(s).astype(np.float32) for s in ((5, 6), (5,)))
    path = write_model(tmp_path, [
        "pnnx.Input in 0 1 x #x=(3,2,6)f32",
        "nn.Linear fc 1 1 x y bias=True in_features=6 out_features=5 @weight=(5,6)f32 "
        "@bias=(5)f32", "nn.Tanh act 1 1 y z", "pnnx.Output out 1 0 z"],
        {"fc.weight": w, "fc.bias": b})
    graph = kuiper.load(path)
    x = rng.standard_normal((3, 2, 6)).astype(np.float32)
    out = np.empty((3, 2, 5), np.float32)
    (y,) = graph.operators[1].layer.forward([x], epilogue=graph.plan.epilogues["fc"], out=out)
    assert y is out
    assert_close(out, np.tanh(x @ w.T + b))


def test_fusion_saves_kernel_launches_on_opencl(models):
    skip_without_opencl()
    path, _ = models["fuse"]
    fused = kuiper.load(path, backend="opencl").executor
    unfused = kuiper.load(path, backend="opencl", passes=["fold_constants"]).executor
    assert len(fused.steps) == len(unfused.steps) - 5  # the 5 absorbed operators
    # each absorbed operator was one launch; a producer whose kernels do not apply its
    # epilogue pays one launch back (clkernels/epilogue.cl)
    extra = sum(not getattr(runner, "epilogue_in_kernel", False) for op, runner in fused.steps
                if op.name in fused.graph.plan.epilogues)
    assert fused.launch_count() == unfused.launch_count() - 5 + extra


def test_the_graphs_plan_is_the_one_the_cpu_executor_runs(models):
    path, _ = models["fuse"]
    graph = kuiper.load(path, fuse=False)
    assert graph.plan is graph.executor.plan and "fuse_epilogues" not in graph.passes
    assert "fuse_epilogues   off (not run)" in graph.plan.describe(PASS_NAMES)


def test_elementwise_expressions_join_the_epilogue(tmp_path, backend):
    """Single-use arithmetic of the value and numbers (a scale, a shift) folds in as well, in
    model order around the activation and the residual add."""
    rng = np.random.default_rng(6)
    weights = conv_weights(rng)
    path = write_model(tmp_path, [
        X, "pnnx.Input in_r 0 1 r #r=(2,3,4,5)f32",
        "pnnx.Attribute half 0 1 h @data=(1)f32",
        f"nn.Conv2d conv_a 1 1 x a {CONV}",
        "pnnx.Expression scale 1 1 a a2 expr=mul(@0,2)",
        "nn.Hardswish act 1 1 a2 a3",
        "pnnx.Expression res 2 1 a3 r a4 expr=add(@0,@1)",
        "pnnx.Expression shift 2 1 a4 h a5 expr=sub(neg(@0),mul(@1,3))",
        f"nn.Conv2d conv_b 1 1 x b {CONV}",
        "pnnx.Expression other 2 1 b r b2 expr=mul(@0,@1)",   # a tensor operand: not fused
        "pnnx.Output out 2 0 a5 b2"], {**weights, "half.data": np.array([0.5], np.float32)})
    graph = kuiper.load(path, backend=backend)
    assert list(graph.plan.epilogues) == ["conv_a"], graph.plan.describe()
    epilogue = graph.plan.epilogues["conv_a"]
    assert epilogue.absorbed == ("scale", "act", "res", "shift")
    assert epilogue.describe() == "sub(neg(nn.Hardswish(mul(y,2)) + 'r'),mul(0.5,3))"
    x, r = inputs(2)
    t = {k: torch.from_numpy(v) for k, v in weights.items()}
    a = F.conv2d(torch.from_numpy(x), t["conv_a.weight"], t["conv_a.bias"], padding=1)
    want = -(F.hardswish(a * 2) + torch.from_numpy(r)) - 0.5 * 3
    got = graph.forward(x, r)
    assert_close(got[0], want.numpy())
    unfused = kuiper.load(path, backend=backend, passes=["fold_constants"]).forward(x, r)
    for g, u in zip(got, unfused):
        assert_close(g, u)
