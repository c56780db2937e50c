"""The memory plan on an OpenCL device (kuiper/opencl/execution/device_memory.py): operands in one
arena (or pooled buffers), workspaces in one shared scratch buffer, and the same bits as a buffer
each.

The planned runs are compared with the naive ones *bit for bit*: the kernels are the same, only
the memory they read and write moved. The runtime's byte counter measures what was saved.
"""

from __future__ import annotations

import gc

import numpy as np
import pytest
import torch
from torch import nn

import kuiper
from kuiper.memory import STRATEGIES, conflicts
from kuiper.opencl.device.runtime import OpenCLRuntime
from tests.conftest import opencl_available

pytestmark = pytest.mark.skipif(not opencl_available(), reason="no OpenCL device")


class Mixed(nn.Module):
    """What a planner can get wrong: a skip that must outlive its neighbours, device views
    (reshape, flatten), an activation that may compute in place, a concat, an upsample,
    im2col convolutions of several sizes (their workspaces share one scratch), and two
    outputs, one of them an inner feature map."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 12, 3, padding=1)
        self.down = nn.Conv2d(12, 16, 3, stride=2, padding=1)
        self.mid = nn.Sequential(nn.Conv2d(16, 16, 3, padding=1), nn.ReLU())
        self.up = nn.Upsample(scale_factor=2, mode="nearest")
        self.fuse = nn.Conv2d(28, 6, 3, padding=1)
        self.fc = nn.Linear(6 * 10 * 6, 4)

    def forward(self, x):
        skip = torch.relu(self.stem(x))
        y = self.mid(self.down(skip))
        y = torch.tanh(self.up(y + 0.5 * y))  # tanh may write over the upsampled map
        y = self.fuse(torch.cat((skip, y), 1))
        flat = y.reshape(y.shape[0], -1)
        return self.fc(flat), torch.sigmoid(y)


@pytest.fixture(scope="module")
def mixed(export_model):
    torch.manual_seed(0)
    net = Mixed().eval()
    x = torch.randn(2, 3, 10, 6)
    with torch.no_grad():
        expected = [t.numpy() for t in net(x)]
    return export_model("memory_mixed", net, x), x.numpy(), expected


def load(path, memory, **options):
    return kuiper.load(path, backend="opencl", memory=memory, **options)


def test_pooled_buffers_need_no_sub_buffers_and_are_the_gpu_default(mixed):
    """greedy_in_order hands each tensor a block from its beginning: no sub-buffers, which
    slow every launch on NVIDIA's driver (kuiper/opencl/execution/device_memory.py:
    default_strategy). It is the default on devices that are not CPUs; CPUs get the arena."""
    from kuiper.memory.plan_memory import strategy_of
    from kuiper.opencl.execution.device_memory import default_strategy
    from tests.opencl.described_devices import fake_h100, fake_two_core_cpu

    assert default_strategy(fake_h100()) == "greedy_in_order"
    assert default_strategy(fake_two_core_cpu()) == "greedy_by_size"
    path, x, expected = mixed
    with kuiper.load(path, backend="opencl") as graph:
        chosen = default_strategy(graph.executor.runtime.device)
        assert graph.executor.memory_strategy == chosen
        assert strategy_of(graph) == chosen         # what `kuiper info --passes` reports
    with load(path, "greedy_in_order") as pooled:
        assert pooled.executor._device_memory.subs == []
        for got, want in zip(pooled.forward(x), expected):
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_an_arena_never_mixes_itself_with_its_sub_buffers(mixed):
    """In an arena every tensor, the one at offset 0 too, is a sub-buffer (unless it fills
    the arena): OpenCL leaves using a buffer and its sub-buffers at once undefined."""
    path, x, expected = mixed
    with load(path, "greedy_by_size") as graph:
        memory = graph.executor._device_memory
        (arena,) = memory.blocks
        assert len(memory.plan.offsets) > 1 and memory.subs
        arrays = [a for a in graph.executor.arrays.values() if hasattr(a, "base_data")]
        assert arrays and all(a.base_data.int_ptr != arena.int_ptr for a in arrays)
        for got, want in zip(graph.forward(x), expected):
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("memory", ["greedy_in_order", "greedy_by_size"])
def test_planned_runs_are_bit_identical_to_a_buffer_each(mixed, memory):
    path, x, expected = mixed
    naive, planned = load(path, "naive"), load(path, memory)
    assert planned.executor.memory_strategy == memory
    assert naive.executor.memory_strategy == "naive" and naive.executor.memory_plan is None
    for a, b, want in zip(planned.forward(x), naive.forward(x), expected):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_allclose(a, want, rtol=1e-4, atol=1e-4)
    result = planned.executor.memory_plan
    assert conflicts(result, planned.executor.lifetimes) == []
    assert result.total < sum(t.size for t in planned.executor.lifetimes)


def test_sub_buffers_start_on_the_device_alignment(mixed):
    graph = load(mixed[0], "greedy_by_size")
    runtime = graph.executor.runtime
    align = runtime.base_alignment
    assert align == runtime.device.mem_base_addr_align // 8  # the device says bits
    cl = runtime.cl
    offsets = []
    for name in graph.executor.memory_plan.offsets:
        data = graph.executor.arrays[name].base_data
        if data is not graph.executor._device_memory.blocks[0]:  # a sub-buffer of the arena
            offsets.append(data.get_info(cl.mem_info.OFFSET))
    assert offsets and all(offset % align == 0 for offset in offsets)
    assert len(set(offsets)) < len(graph.executor.memory_plan.offsets)  # bytes are shared


def test_views_stay_views(mixed):
    graph = load(mixed[0], "greedy_by_size")
    views = [op for op, _ in graph.executor.steps if op.type == "Tensor.reshape"]
    assert views, "the model has a reshape"
    for op in views:
        out = graph.executor.arrays[op.outputs[0].name]
        src = graph.executor.arrays[graph.plan.resolve(op.inputs[0].name)]
        assert out.base_data is src.base_data  # no copy, no bytes of its own
        assert op.outputs[0].name not in graph.executor.memory_plan.offsets


def test_an_activation_writes_over_the_input_it_alone_reads(mixed):
    graph = load(mixed[0], "greedy_by_size")
    ex = graph.executor
    assert ex.in_place, "the tanh of the model computes in place"
    for target, source in ex.in_place.items():
        assert ex.arrays[target].base_data is ex.arrays[source].base_data
        assert target not in ex.memory_plan.offsets  # no bytes of its own
    assert load(mixed[0], "naive").executor.in_place == {}


def test_outputs_are_not_overwritten_by_a_later_forward(mixed):
    path, x, _ = mixed
    graph = load(path, "greedy_by_size")
    first = graph.forward(x)
    kept = [a.copy() for a in first]
    second = graph.forward(-x)
    for a, k, b in zip(first, kept, second):
        np.testing.assert_array_equal(a, k)
        assert not np.array_equal(a, b)


def test_inner_operands_asked_by_name_are_read_before_their_bytes_are_reused(mixed):
    path, x, _ = mixed
    planned, naive = load(path, "greedy_by_size"), load(path, "naive")
    inner = [t.name for t in planned.executor.lifetimes
             if t.name not in {o.name for o in planned.output_operands}]
    assert len(inner) > 3
    for a, b in zip(planned.forward(x, outputs=inner), naive.forward(x, outputs=inner)):
        np.testing.assert_array_equal(a, b)


def test_workspaces_share_one_scratch_buffer(mixed):
    from kuiper.layers.opencl_conv.algorithms import forced

    path, x, _ = mixed
    with forced("im2col_gemm"):  # every 3x3 convolution asks for an im2col column matrix
        planned, naive = load(path, "greedy_by_size"), load(path, "naive")
    shared, each = planned.executor.workspaces, naive.executor.workspaces
    users = [n for n in each.needs.values() if n]
    assert len(users) >= 3
    # one scratch as large as the largest request, instead of a buffer per request
    assert shared.total == max(shared.needs.values()) < each.total == sum(users)
    runtime = planned.executor.runtime
    gc.collect()  # buffers of earlier tests freed now, not during the load measured below
    runtime.reset_peak()
    with forced("im2col_gemm"):
        again = load(path, "greedy_by_size")
    # every layer said what it needs before anything bound: one scratch, never a second one
    # alive at the same time (the peak holds no more than the final state)
    assert runtime.peak_bytes == runtime.allocated_bytes
    assert again.executor.workspaces.total == shared.total
    for a, b in zip(planned.forward(x), naive.forward(x)):
        np.testing.assert_array_equal(a, b)


def test_pooled_workspaces_hand_out_whole_buffers(mixed):
    """With greedy_in_order (a GPU's default: NVIDIA's launches slow down with every
    sub-buffer of a buffer they use) the scratch is a buffer per rank of request size, as large
    as the largest request of that rank, each handed out whole: no sub-buffer at all."""
    from kuiper.layers.opencl_conv.algorithms import forced

    path, x, _ = mixed
    with forced("winograd_f2x2"):   # two workspaces per layer (V and the products)
        pooled, naive = load(path, "greedy_in_order"), load(path, "naive")
    ws = pooled.executor.workspaces
    assert ws.pooled and ws.subs == [] and ws.buffer is None
    requests = [[n for *_, n in sizes] for sizes in ws.requests.values() if sizes]
    assert len(requests) >= 2 and max(map(len, requests)) == len(ws.slots) >= 2
    ranked = [sorted(sizes, reverse=True) for sizes in requests]
    for rank, slot in enumerate(ws.slots):
        assert slot.size == max(sizes[rank] for sizes in ranked if len(sizes) > rank)
    assert ws.total == sum(slot.size for slot in ws.slots)
    slots = {slot.int_ptr for slot in ws.slots}
    scratch = [array for _, layer in pooled.executor.steps
               for array in getattr(layer, "bound_arrays", [])
               if getattr(array, "kuiper_block", None) is ws]
    assert len(scratch) >= 2 * len(requests)
    assert all(array.data.int_ptr in slots for array in scratch)   # whole buffers
    for a, b in zip(pooled.forward(x), naive.forward(x)):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("sizes,ranks", [([4, 9, 4], [1, 0, 2]), ([], []), ([7], [0]),
                                          ([1, 2, 3], [2, 1, 0])])
def test_pooled_requests_take_the_slot_of_their_size_rank(sizes, ranks):
    """A step's largest workspace takes the first pooled buffer, whichever it asked for first:
    two layers asking (small, large) and (large, small) share two buffers, not two large."""
    from kuiper.opencl.execution.device_memory import size_ranks

    assert size_ranks(sizes) == ranks


def test_the_runtime_counter_measures_the_saving(mixed):
    path, x, _ = mixed
    peaks = {}
    for memory in ("naive", "greedy_by_size"):
        runtime = OpenCLRuntime.shared()
        gc.collect()
        before = runtime.reset_peak()
        graph = load(path, memory)
        graph.forward(x)
        peaks[memory] = runtime.peak_bytes - before
        graph.close()
        del graph
        gc.collect()
        assert runtime.allocated_bytes == before  # close() gave every buffer back
    assert 0 < peaks["greedy_by_size"] < peaks["naive"]


def test_an_out_of_order_queue_keeps_a_buffer_each(mixed):
    path, x, expected = mixed
    graph = load(path, "greedy_by_size", out_of_order=True)
    assert graph.executor.memory_strategy == "naive"
    assert graph.executor.workspaces.naive
    for a, want in zip(graph.forward(x), expected):
        np.testing.assert_allclose(a, want, rtol=1e-4, atol=1e-4)


def test_a_new_input_size_plans_again(mixed):
    path, x, _ = mixed
    graph, naive = load(path, "greedy_by_size"), load(path, "naive")
    small = graph.executor.memory_plan.total
    big = np.concatenate([x, x, x])  # batch 6
    for a, b in zip(graph.forward(big), naive.forward(big)):
        np.testing.assert_array_equal(a, b)
    assert graph.executor.memory_plan.total > small


def test_every_strategy_is_an_option(mixed):
    for memory in STRATEGIES:
        assert load(mixed[0], memory).executor.memory == memory
    with pytest.raises(kuiper.KuiperError, match="greedy_by_size"):
        load(mixed[0], "best_fit")


@pytest.mark.slow
def test_yolo_640_at_batch_8_needs_3x_less_device_memory(export_model):
    """The issue's target, measured with the runtime's counter (build and one run)."""
    from tests.models import zoo

    example = torch.rand(1, 3, 640, 640, generator=torch.Generator().manual_seed(0))
    path = export_model("memory_yolo_640", zoo.make(zoo.YoloV5Small, example), example)
    x = np.random.default_rng(0).random((8, 3, 640, 640), dtype=np.float32)
    peaks, results = {}, {}
    for memory in ("naive", "greedy_by_size"):
        runtime = OpenCLRuntime.shared()
        gc.collect()
        before = runtime.reset_peak()
        graph = load(path, memory, input_shapes=[x.shape])
        results[memory] = graph.forward(x)
        peaks[memory] = runtime.peak_bytes - before
        graph.close()
        del graph
    np.testing.assert_array_equal(results["naive"][0], results["greedy_by_size"][0])
    assert peaks["naive"] >= 3 * peaks["greedy_by_size"], peaks



@pytest.mark.parametrize("memory", ["greedy_in_order", "greedy_by_size"])
def test_no_kernel_writes_outside_its_tensors_bytes(mixed, memory):
    """Oclgrind cannot see a write past a sub-buffer (it stays inside the parent buffer), so
    the arena is checked with canaries instead: every byte of a block that no tensor owns (the
    rounding to the device alignment, a pooled block larger than its tensor) is filled with a
    pattern before the run and must still hold it after."""
    path, x, _ = mixed
    graph = load(path, memory)
    x = x[:1]  # batch 1: 1x12x10x6 floats is 2,880 bytes, not a multiple of the alignment
    graph.forward(x)  # built for this size
    ex = graph.executor
    cl, queue = ex.runtime.cl, ex.runtime.queue
    result = ex.memory_plan
    blocks = ex._device_memory.blocks
    owned = [np.zeros(b.size, bool) for b in blocks]
    for t in ex.lifetimes:
        start = result.offset_in_block(t.name)
        owned[result.blocks[t.name]][start:start + t.size] = True
    assert sum(int((~o).sum()) for o in owned) > 0, "no unowned bytes to guard"
    for block in blocks:
        cl.enqueue_fill_buffer(queue, block, np.uint8(0xA5), 0, block.size)
    queue.finish()
    graph.forward(x)
    for block, mask in zip(blocks, owned):
        host = np.empty(block.size, np.uint8)
        cl.enqueue_copy(queue, host, block)
        assert (host[~mask] == 0xA5).all(), "a kernel wrote outside its tensor"


@pytest.mark.parametrize("algorithm", ["im2col_gemm", "winograd_f2x2", "split_k", "direct"])
def test_every_layer_is_bound_once_with_what_it_declared(mixed, monkeypatch, algorithm):
    """The executor asks each layer what scratch it needs (`workspace_shapes`) before anything
    binds, then binds each layer once, handing it those arrays as `workspaces=` (and its fused
    epilogue as `epilogue=`): never a second bind, never an attribute set behind its back."""
    from kuiper.layers.opencl_base import OpenCLLayer
    from kuiper.layers.opencl_conv.algorithms import forced

    binds: dict[str, int] = {}
    handed: dict[str, list] = {}

    def counting(cls):
        bind = cls.bind

        def wrapper(self, inputs, outputs, in_specs, out_specs, **extras):
            binds[self.name] = binds.get(self.name, 0) + 1
            handed[self.name] = [tuple(a.shape) for a in extras.get("workspaces", ())]
            return bind(self, inputs, outputs, in_specs, out_specs, **extras)

        monkeypatch.setattr(cls, "bind", wrapper)

    from kuiper.core import registry

    owners = {next(k for k in c.__mro__ if "bind" in vars(k))
              for c in registry.supported("opencl").values() if issubclass(c, OpenCLLayer)}
    for cls in owners:   # the classes that define a bind, as the registered ones inherit it
        counting(cls)
    path, x, _ = mixed
    with forced(algorithm):
        graph = load(path, "greedy_by_size")
    assert binds and all(count == 1 for count in binds.values()), binds
    declared = {}
    for op in graph.order:
        layer = op.layer
        if isinstance(layer, OpenCLLayer) and op.name in binds:
            in_specs = [graph.specs[o.name] for o in op.inputs]
            out_specs = [graph.specs[o.name] for o in op.outputs]
            with forced(algorithm):
                declared[op.name] = [tuple(s) for s, _ in layer.workspace_shapes(in_specs,
                                                                                  out_specs)]
            for name in ("epilogue", "residual", "planned_outputs", "workspaces"):
                assert name not in vars(layer), f"{op.name}: the executor set .{name}"
    assert handed == {name: shapes for name, shapes in declared.items() if name in handed}
    assert any(handed.values()), f"no layer asked for a workspace under {algorithm}"
