"""One graph, many threads, many runs: outputs stay identical and memory stays flat.

A server or a notebook calls the same graph from several threads. RuntimeGraph serialises calls
with a lock (a call with a new input size rebuilds the graph, which no other call may see half
done), so every call returns what a lone call would.
"""

import threading

import numpy as np
import pytest

import kuiper
from kuiper.demo import DIGITS_PARAM


def run_in_threads(work, n_threads: int) -> list:
    """Run work(i) in n threads at once; return their results, re-raising the first error."""
    results, errors = [None] * n_threads, []
    start = threading.Barrier(n_threads)

    def body(i):
        try:
            start.wait()
            results[i] = work(i)
        except BaseException as e:  # noqa: BLE001 - handed to the main thread below
            errors.append(e)

    threads = [threading.Thread(target=body, args=(i,)) for i in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return results


def test_one_graph_from_four_threads_gives_identical_outputs(backend, rng):
    graph = kuiper.load(DIGITS_PARAM, backend=backend)
    inputs = [rng.standard_normal((1, 1, 8, 8)).astype(np.float32) for _ in range(4)]
    expected = [graph(x).copy() for x in inputs]

    def work(i):
        mismatches = 0
        for _ in range(50):
            mismatches += not np.array_equal(graph(inputs[i]), expected[i])
        return mismatches

    assert run_in_threads(work, 4) == [0, 0, 0, 0]


def test_alternating_input_sizes_from_two_threads(backend, rng):
    graph = kuiper.load(DIGITS_PARAM, backend=backend)
    batches = [rng.standard_normal((n, 1, 8, 8)).astype(np.float32) for n in (1, 3)]
    expected = [graph(x).copy() for x in batches]

    def work(i):  # each call of one thread needs a rebuild after a call of the other
        return sum(not np.array_equal(graph(batches[i]), expected[i]) for _ in range(30))

    assert run_in_threads(work, 2) == [0, 0]


def resident_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


@pytest.mark.skipif(not __import__("os").path.exists("/proc/self/statm"),
                    reason="reads the resident set size from /proc (Linux)")
def test_a_thousand_forwards_keep_memory_flat(backend, rng):
    graph = kuiper.load(DIGITS_PARAM, backend=backend)
    x = rng.standard_normal((4, 1, 8, 8)).astype(np.float32)
    for _ in range(100):  # warm up: allocator pools, kernel caches
        graph(x)
    before = resident_bytes()
    for _ in range(1000):
        graph(x)
    grown = resident_bytes() - before
    # A leak of one 10x4 output array per run would already be 160 KB; allow for allocator noise.
    assert grown < 8 * 2**20, f"resident memory grew by {grown / 2**20:.1f} MiB over 1,000 runs"


def test_a_hundred_loads_keep_memory_flat(backend):
    for _ in range(10):
        kuiper.load(DIGITS_PARAM, backend=backend)
    before = resident_bytes()
    for _ in range(100):
        kuiper.load(DIGITS_PARAM, backend=backend)
    grown = resident_bytes() - before
    assert grown < 16 * 2**20, f"resident memory grew by {grown / 2**20:.1f} MiB over 100 loads"
