"""The memory plan carried out on an OpenCL device: blocks, sub-buffers, views and workspaces.

What the OpenCL executor asks of this module, once per input shape:

1. `DeviceMemory`: allocates the plan's blocks (one arena for greedy_by_size, pooled buffers for
   greedy_in_order) and hands each tensor a pyopencl array on its bytes: the block itself when
   the tensor starts at its beginning and no other tensor of the block starts elsewhere (a
   pooled block), else a sub-buffer (`get_sub_region`) at its offset.
   Sub-buffers keep every array at offset 0, which kernels bound with `array.data` need; their
   origins are multiples of the device's CL_DEVICE_MEM_BASE_ADDR_ALIGN (the plan aligns every
   offset to it). Which strategy a device gets by default is `default_strategy`'s choice: on
   NVIDIA's driver, every sub-buffer of a buffer makes kernel launches slower.
2. `device_view`: an output a layer declares a view of an input (`view_of(i)`,
   layers/opencl_base.py) is that input's bytes with the output's shape and dtype.
3. `Workspaces`: layer scratch arrays (im2col columns), valid only during their own step. Every
   layer says what it needs before anything binds (`workspace_shapes`), so one scratch, as
   large as the largest step's need, is allocated first and each layer binds once, into it.
   With greedy_in_order (GPUs) the scratch is pooled instead, for the same reason as the
   tensors: a buffer per rank (a step's largest workspace, its second largest ...), as large
   as the largest request of that rank, each handed out whole, with no sub-buffer. (By rank,
   not by the order of the requests: a layer whose first request is small and another whose
   first is large would otherwise make two buffers the size of the large one.)
4. `in_place_outputs`: an elementwise step (its layer class sets `writes_in_place`: a kernel
   that reads x[i] and writes y[i], nothing else) whose input nobody reads afterwards writes
   its output over that input; the output is then a view of the input, with no bytes of its
   own.

An array on a block keeps the block's Python object alive (`_on_block`): OpenCL keeps a parent
buffer alive as long as a sub-buffer of it lives, and the runtime's byte counter must too.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kuiper.memory.lifetimes import align_up
from kuiper.memory.strategies import Plan
from kuiper.opencl.device.runtime import is_cpu


def default_strategy(device) -> str:
    """The memory strategy of a graph on `device` when none is asked for.

    CPU devices: greedy_by_size, one arena at the lower bound. Other devices: greedy_in_order,
    pooled buffers that each tensor uses from their beginning, with no sub-buffers. Measured
    on an NVIDIA H100 (driver 580.159.04): the host's time to enqueue one kernel grows with the
    sub-buffers of the buffers it uses; with an arena of ~100 sub-buffers, YOLOv5s's 113
    launches took 6.0 ms to enqueue, against 1.4 ms with pooled buffers (5.5 us against 53 per
    launch), which made the whole inference 7.7 ms against 4.8. The pools cost 1.2-1.4x the
    lower bound of memory instead of 1.0x."""
    return "greedy_by_size" if is_cpu(device) else "greedy_in_order"


def device_view(runtime, array, shape, dtype):
    """The bytes of device `array` seen with another shape (and perhaps dtype, with the same
    byte count): what an output declared `view_of(i)` is."""
    import pyopencl.array as cla

    dtype = np.dtype(dtype)
    if array.size == 0:  # an empty tensor has no buffer to share
        return runtime.empty(tuple(shape), dtype)
    if dtype == array.dtype:
        return array.reshape(tuple(shape))
    return cla.Array(array.queue, tuple(shape), dtype, data=array.base_data,
                     offset=array.offset)


class DeviceMemory:
    """The blocks of `plan` on the device, and an array per planned tensor."""

    def __init__(self, runtime, plan: Plan):
        self.runtime, self.plan = runtime, plan
        self.blocks = [runtime.buffer(size) for size in plan.block_sizes]
        self.subs: list = []  # every sub-buffer handed out, released before the blocks
        # blocks where some tensor starts past the beginning (an arena), by index
        self._shared_blocks = {plan.blocks[name] for name in plan.offsets
                               if plan.offset_in_block(name) != 0}

    def release(self) -> None:
        """Free the sub-buffers, then the blocks, in that order and now (close, rebuild).

        OpenCL lets a parent go before its sub-buffers, but NVIDIA's driver crashed when
        Python's garbage collector freed them in another order (a segfault in graph.close()
        on an H100, driver 580): so they are released explicitly, the newest sub-buffer first,
        once the queue is idle. Arrays still held by layers then point at released buffers;
        they are never enqueued again (the graph is closed, or every layer is bound anew).
        Every array on a block keeps this object alive (`_on_block`), so when nobody calls
        release (a graph dropped without close()), `__del__` still releases in that order."""
        release_children_first(self.runtime, self.subs, self.blocks)
        self.subs, self.blocks = [], []

    def __del__(self) -> None:
        try:
            self.release()
        except Exception:  # noqa: BLE001 - at interpreter exit the context may be gone already
            pass

    def array(self, name: str, shape, dtype):
        import pyopencl.array as cla

        dtype = np.dtype(dtype)
        nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        block_index = self.plan.blocks[name]
        block = self.blocks[block_index]
        offset = self.plan.offset_in_block(name)
        # A tensor at the start of a block that holds no tensor elsewhere (a pooled block,
        # perhaps reused by a smaller tensor) uses the block itself. In an arena it takes a
        # sub-buffer like the others: OpenCL leaves using a buffer and its sub-buffers at once
        # undefined.
        if offset == 0 and (nbytes == block.size or block_index not in self._shared_blocks):
            data = block
        else:
            data = block.get_sub_region(offset, nbytes)
            self.subs.append(data)
        return _on_block(cla.Array(self.runtime.queue, tuple(shape), dtype, data=data), self)


def release_children_first(runtime, subs: list, parents: list) -> None:
    """Wait for the queue, then release `subs` (sub-buffers), newest first, then `parents`.

    The order matters on NVIDIA's driver (580, H100): releasing a sub-buffer while a younger
    sub-buffer overlapping it (memory reuse: they never live at the same time) is still
    alive, both having been used by kernels, crashes the process. Newest first never does
    (measured on the device with two overlapping sub-buffers, in both orders)."""
    if not subs and not parents:
        return
    runtime.queue.finish()
    for buffer in [*reversed(subs), *parents]:
        try:
            buffer.release()
        except runtime.cl.LogicError:  # released already
            pass


def _on_block(array, owner):
    """Keep `owner` (the DeviceMemory or Workspaces holding the array's block) alive, and with
    it the block (still counted by the runtime), while the array lives."""
    array.kuiper_block = owner
    return array


@dataclass
class Workspaces:
    """Scratch arrays of layers, shared: every step's workspaces start at byte 0 of one buffer
    (pooled: each is a whole buffer of `slots`, see the module's 3.).

    The executor first `request`s each step's list of (shape, dtype), then `allocate`s, then
    hands each step its `arrays`. `naive=True` gives each request its own buffer for good (the
    behaviour before the planner), still counting the bytes, so `kuiper info --memory` can
    compare."""

    runtime: Any
    alignment: int
    naive: bool = False
    # True: a pooled scratch, a whole buffer per rank of request size (see the module's 3.), for
    # drivers on which sub-buffers slow every launch down (NVIDIA's: greedy_in_order)
    pooled: bool = False
    buffer: Any = None  # the shared scratch, once `allocate` has sized it
    needs: dict[int, int] = field(default_factory=dict)  # step -> bytes it asked for
    requests: dict[int, list] = field(default_factory=dict)  # step -> [(shape, dtype, bytes)]
    subs: list = field(default_factory=list)             # sub-buffers of `buffer` handed out
    slots: list = field(default_factory=list)            # pooled: a buffer per rank

    def free(self) -> None:
        """Release the scratch's sub-buffers, then the scratch or its pooled buffers (see
        DeviceMemory.release)."""
        release_children_first(self.runtime, self.subs,
                               ([self.buffer] if self.buffer is not None else []) + self.slots)
        self.subs, self.buffer, self.slots = [], None, []

    def __del__(self) -> None:
        try:
            self.free()
        except Exception:  # noqa: BLE001 - at interpreter exit the context may be gone already
            pass

    @property
    def capacity(self) -> int:
        """Bytes of the one shared scratch (0 before it exists, and when pooled)."""
        return 0 if self.buffer is None else self.buffer.size

    def request(self, step: int, shapes) -> None:
        """What the layer of `step` declared (`workspace_shapes`): (shape, dtype) each."""
        sized = []
        for shape, dtype in shapes:
            dtype = np.dtype(dtype)
            sized.append((tuple(int(d) for d in shape), dtype,
                          int(np.prod(shape, dtype=np.int64)) * dtype.itemsize))
        self.requests[step] = sized
        if self.pooled or self.naive:
            self.needs[step] = sum(n for *_, n in sized)
        else:  # one after the other from byte 0, each aligned
            used = 0
            for *_, nbytes in sized:
                used = align_up(used, self.alignment) + nbytes
            self.needs[step] = used

    def allocate(self) -> None:
        """One scratch for the largest step's need; pooled, a buffer per size rank for the
        largest request of that rank. The old scratch goes first (at no time two are alive)."""
        if self.naive:
            return
        if self.pooled:
            ranked = [sorted((n for *_, n in r if n), reverse=True)
                      for r in self.requests.values()]
            sizes = [max(s[i] for s in ranked if len(s) > i)
                     for i in range(max(map(len, ranked), default=0))]
            if len(sizes) > len(self.slots) or any(
                    size > slot.size for size, slot in zip(sizes, self.slots)):
                self.free()
                self.slots = [self.runtime.buffer(size) for size in sizes]
            return
        need = max(self.needs.values(), default=0)
        if need > self.capacity:
            self.free()  # the old scratch (and its sub-buffers) before the new one
            self.buffer = self.runtime.buffer(need)

    def arrays(self, step: int) -> list:
        """The arrays of `step`'s requests, in order (after `allocate`)."""
        import pyopencl.array as cla

        requests = self.requests.get(step, [])
        if self.naive:
            return [self.runtime.empty(shape, dtype) for shape, dtype, _ in requests]
        if self.pooled:
            ranks = size_ranks([n for *_, n in requests])
            out = []
            for (shape, dtype, nbytes), rank in zip(requests, ranks):
                if nbytes == 0:
                    out.append(self.runtime.empty(shape, dtype))
                    continue
                out.append(_on_block(cla.Array(self.runtime.queue, shape, dtype,
                                               data=self.slots[rank]), self))
            return out
        out, used = [], 0
        for shape, dtype, nbytes in requests:
            if nbytes == 0:
                out.append(self.runtime.empty(shape, dtype))
                continue
            offset = align_up(used, self.alignment)
            used = offset + nbytes
            data = self.buffer if (offset == 0 and nbytes == self.capacity) else \
                self.buffer.get_sub_region(offset, nbytes)
            if data is not self.buffer:
                self.subs.append(data)
            out.append(_on_block(cla.Array(self.runtime.queue, shape, dtype, data=data), self))
        return out

    @property
    def total(self) -> int:
        """Bytes of workspace held: the shared scratch (pooled: its buffers), or the sum of
        the naive buffers."""
        if self.naive:
            return sum(self.needs.values())
        return sum(slot.size for slot in self.slots) if self.pooled else self.capacity


def size_ranks(sizes: list[int]) -> list[int]:
    """Each request's rank by size, largest first (ties in request order): [4, 9, 4] ->
    [1, 0, 2]."""
    order = sorted(range(len(sizes)), key=lambda i: -sizes[i])
    ranks = [0] * len(sizes)
    for rank, i in enumerate(order):
        ranks[i] = rank
    return ranks


def in_place_outputs(steps, tensors, views, keep, may_reuse) -> dict[str, str]:
    """{output: input} of the elementwise steps that may compute in place: `may_reuse(layer)`
    says the layer's class sets `writes_in_place` and its output is fresh; the input owns its
    bytes (not a view), is not a graph port (`keep`), has this step as its last reader, and
    has the output's size. Any other kernel is left alone: one that reads neighbours (a
    convolution, a softmax) would read values it has already overwritten."""
    last = {t.name: t.last for t in tensors}
    size = {t.name: t.size for t in tensors}
    pairs: dict[str, str] = {}
    for step, op in enumerate(steps):
        if len(op.inputs) != 1 or len(op.outputs) != 1 or not may_reuse(op.layer):
            continue
        source, target = op.inputs[0].name, op.outputs[0].name
        source = views.get(source, source)  # an alias (kuiper/passes/) names its operand
        if (source in views or source in keep or last.get(source) != step
                or size.get(source) != size.get(target)):
            continue
        pairs[target] = source
    return pairs
