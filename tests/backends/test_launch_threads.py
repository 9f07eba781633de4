"""Launches from many threads at once, on every backend, each result checked exactly.

A notebook's widgets, a thread pool over a parameter sweep or a web server launch kernels
from threads. Each launch must run with its own scalars, array shapes and grid: on wgpu
one launcher per kernel holds the uniform buffer those travel in (its writes and the
dispatch that reads them are one step under a lock), and cuda-host's host model keeps its
blocks, fibers and ``__shared__`` memory per host thread (before, 8 threads crashed it).
"""

from __future__ import annotations

import threading

import numpy as np
import pytest

import qnb

THREADS = 8
LAUNCHES = 24  # per thread


@qnb.kernel
def tiled(x: qnb.Array[qnb.f32, 2], out: qnb.Array[qnb.f32, 2], s: qnb.f32, k: qnb.i32):
    i = qnb.program_id(0)
    j = qnb.program_id(1)
    t = qnb.Tile[8, 8].load(x, i * 8, j * 8)
    grid = qnb.num_programs(0) * 1000 + qnb.num_programs(1) * 100
    (t * s + (k + grid + out.shape[1])).store(out, i * 8, j * 8)


@qnb.kernel
def solo(x: qnb.Array[qnb.f32, 1], out: qnb.Array[qnb.f32, 1], s: qnb.f32, k: qnb.i32):
    i = qnb.program_id(0)
    if i < x.shape[0]:
        out[i] = x[i] * s + (k + qnb.num_programs(0) * 1000)


def _tiled_case(rng, thread: int):
    """A launch of ``tiled`` of its own: shape, grid, scalars; and its exact result."""
    gx, gy = int(rng.integers(1, 5)), int(rng.integers(1, 4))
    rows, cols = gx * 8 - int(rng.integers(0, 8)), gy * 8 - int(rng.integers(0, 8))
    x = rng.integers(-50, 50, (rows, cols)).astype(np.float32)
    s, k = float(thread + 1), int(rng.integers(-100, 100))
    want = x * np.float32(s) + np.float32(k + gx * 1000 + gy * 100 + cols)
    return (gx, gy), (x, np.full_like(x, np.nan), s, k), want


def _solo_case(rng, thread: int):
    n = int(rng.integers(1, 300))
    grid = n + int(rng.integers(0, 70))  # programs past the array's end store nothing
    x = rng.integers(-50, 50, n).astype(np.float32)
    s, k = float(thread + 2), int(rng.integers(-100, 100))
    return (
        (grid,),
        (x, np.full_like(x, np.nan), s, k),
        x * np.float32(s) + np.float32(k + grid * 1000),
    )


def _hammer(kernel, case, backend_name: str) -> list[str]:
    """Every thread launches ``kernel`` LAUNCHES times, each with its own case; the
    launches that came back wrong (or raised), described."""
    wrong: list[str] = []
    start = threading.Barrier(THREADS)

    def work(thread: int) -> None:
        rng = np.random.default_rng(1000 + thread)
        start.wait()
        for launch in range(LAUNCHES):
            grid, args, want = case(rng, thread)
            try:
                with qnb.backend(backend_name):
                    kernel[grid](*args)
            except Exception as exc:  # noqa: BLE001 - reported with the rest
                wrong.append(f"thread {thread} launch {launch}: {type(exc).__name__}: {exc}")
                continue
            if not np.array_equal(args[1], want):
                bad = int((args[1] != want).sum())
                wrong.append(f"thread {thread} launch {launch} grid {grid}: {bad} elements wrong")

    workers = [threading.Thread(target=work, args=(t,)) for t in range(THREADS)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return wrong


@pytest.mark.parametrize(
    ("kernel", "case"), [(tiled, _tiled_case), (solo, _solo_case)], ids=["tiled", "solo"]
)
def test_threads_launching_one_kernel_each_get_their_own_arguments(backend_name, kernel, case):
    rng = np.random.default_rng(0)
    grid, args, want = case(rng, 0)
    with qnb.backend(backend_name):
        kernel[grid](*args)  # compiled once, before the threads
    np.testing.assert_array_equal(args[1], want)
    assert _hammer(kernel, case, backend_name) == []


def test_threads_compiling_kernels_of_their_own_at_once(backend_name):
    """Each thread's first launch of a kernel of its own (a captured constant apiece):
    compiles and loads run side by side (wgpu's module and pipeline caches, cuda-host's
    builds), and every launch sees its own kernel."""
    kernels = []
    for n in range(THREADS):

        def make(scale=float(n + 1)):
            @qnb.kernel
            def shifted(x: qnb.Array[qnb.f32, 1], out: qnb.Array[qnb.f32, 1]):
                i = qnb.program_id(0)
                (qnb.Vec[16].load(x, i * 16) * scale).store(out, i * 16)

            return shifted

        kernels.append(make())
    wrong = []
    start = threading.Barrier(THREADS)

    def work(thread: int) -> None:
        x = np.arange(40, dtype=np.float32) - 7
        out = np.full_like(x, np.nan)
        start.wait()
        try:
            with qnb.backend(backend_name):
                kernels[thread][3](x, out)
        except Exception as exc:  # noqa: BLE001
            wrong.append(f"thread {thread}: {type(exc).__name__}: {exc}")
            return
        if not np.array_equal(out, x * np.float32(thread + 1)):
            wrong.append(f"thread {thread}: another kernel's result")

    workers = [threading.Thread(target=work, args=(t,)) for t in range(THREADS)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert wrong == []


def test_cuda_launch_memos_hand_each_thread_its_own_words():
    """What a cuda launcher shares between launches (no GPU needed to check it): the memo
    of shape and grid words, cleared when it grows, gives every thread the words of its
    own shape."""
    from qnb.backends.cuda import _Words

    words = _Words()
    wrong = []
    start = threading.Barrier(THREADS)

    def work(thread: int) -> None:
        start.wait()
        for k in range(2000):
            shape = (thread, k % 300, 7)
            if words(None, shape) != shape:
                wrong.append((thread, k))

    workers = [threading.Thread(target=work, args=(t,)) for t in range(THREADS)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert wrong == [] and len(words.made) <= 257
