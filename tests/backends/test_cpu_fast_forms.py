"""The cpu's fast forms of what a histogram and a long scan do, held to the slow forms they
stand in for: an integer ``atomic_add`` of one value to every index (counted per element
with ``np.bincount``, then multiplied, which must wrap as the i32 additions one after
another would), and a vec load or store per program whose windows abut along a 1-D array
(one slice, padded or cut at the array's end). Both cpu executors (the interpreter and
the prepared launch) must give the bits of a plain reference.
"""

import numpy as np
import pytest

import qnb
from qnb import ir
from qnb.backends.cpu import interpreter
from qnb.backends.cpu.prepared import prepare
from tests.helpers import define

NS, _ = define("""
    @qnb.kernel
    def count(x: qnb.Array[qnb.i32, 1], h: qnb.Array[qnb.i32, 1], step: qnb.i32):
        i = qnb.program_id(0)
        qnb.atomic_add(h, qnb.Vec[64].load(x, i * 64, other=-1), step)

    @qnb.kernel
    def count_even_programs(x: qnb.Array[qnb.i32, 1], h: qnb.Array[qnb.i32, 1]):
        i = qnb.program_id(0)
        if i % 2 == 0:
            qnb.atomic_add(h, qnb.Vec[16].load(x, i * 16, other=-1), 3)

    @qnb.kernel
    def count_2d(r: qnb.Array[qnb.i32, 2], c: qnb.Array[qnb.i32, 2],
                 h: qnb.Array[qnb.i32, 2]):
        i = qnb.program_id(0) * 8
        rows = qnb.Tile[8, 8].load(r, i, 0, other=-1)
        qnb.atomic_add(h, (rows, qnb.Tile[8, 8].load(c, i, 0)), 5)

    @qnb.kernel
    def copy_vecs(x: qnb.Array[qnb.f32, 1], y: qnb.Array[qnb.f32, 1]):
        i = qnb.program_id(0)
        (qnb.Vec[32].load(x, i * 32, other=-2.5) * 2.0).store(y, i * 32)

    @qnb.kernel
    def shift_in_place(x: qnb.Array[qnb.f32, 1]):
        i = qnb.program_id(0)  # each program reads its neighbour's block, then stores its own
        (qnb.Vec[16].load(x, i * 16 + 16) + 1.0).store(x, i * 16)

    @qnb.kernel
    def even_blocks(x: qnb.Array[qnb.f32, 1], y: qnb.Array[qnb.f32, 1]):
        i = qnb.program_id(0)
        if i % 2 == 0:
            qnb.Vec[16].load(x, i * 16).store(y, i * 16)
    """)


def _both(kernel, grid, args):
    """The interpreter's and the prepared launch's arrays, each from fresh copies."""
    kernel_ir, _ = kernel._lower_for(args)
    launch = prepare(kernel_ir)
    assert launch is not None, "the prepared path took the kernel"
    stored = ir.array_uses(kernel_ir)[1]
    results = []
    for run in (interpreter.run, launch):
        copies = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
        _, runtime = kernel._signature(copies)
        if run is interpreter.run:
            interpreter.run(kernel_ir, grid, runtime, stored)
        else:
            launch(grid, runtime, stored)
        results.append([a for a in copies if isinstance(a, np.ndarray)])
    return results


def _wrapping_adds(h, indices, step):
    """Each index in turn adds ``step`` to its element, wrapping as int32 does."""
    out = h.astype(np.int64)
    for k in np.asarray(indices).reshape(-1):
        if 0 <= k < out.size:
            out[k] = (out[k] + step + 2**31) % 2**32 - 2**31
    return out.astype(np.int32)


@pytest.mark.parametrize("step", [1, -7, 2**30, -(2**31)])
def test_one_value_to_every_index_counts_and_wraps(step):
    rng = np.random.default_rng(abs(step) % 97)
    x = rng.integers(-3, 24, 1000).astype(np.int32)  # out of range both ways: skipped
    x[:200] = 5  # one element updated hundreds of times (wraps for the large steps)
    h = rng.integers(-50, 50, 20).astype(np.int32)
    grid = (qnb.cdiv(x.size, 64), 1, 1)
    want = _wrapping_adds(h, x, step)
    for got in _both(NS["count"], grid, [x, h, step]):
        np.testing.assert_array_equal(got[1], want)


def test_masked_programs_count_nothing():
    rng = np.random.default_rng(3)
    x = rng.integers(-2, 12, 200).astype(np.int32)
    h = rng.integers(1, 9, 10).astype(np.int32)
    grid = (qnb.cdiv(x.size, 16), 1, 1)
    updates = [x[p * 16 : p * 16 + 16] for p in range(grid[0]) if p % 2 == 0]
    want = _wrapping_adds(h, np.concatenate(updates), 3)
    for got in _both(NS["count_even_programs"], grid, [x, h]):
        np.testing.assert_array_equal(got[1], want)


def test_tuple_indices_into_2d_count_per_element():
    rng = np.random.default_rng(4)
    r = rng.integers(-1, 7, (40, 8)).astype(np.int32)
    c = rng.integers(-1, 5, (40, 8)).astype(np.int32)
    h = rng.integers(1, 9, (6, 4)).astype(np.int32)
    want = h.astype(np.int64)
    for row, col in zip(r.reshape(-1), c.reshape(-1)):
        if 0 <= row < 6 and 0 <= col < 4:
            want[row, col] += 5
    grid = (5, 1, 1)
    for got in _both(NS["count_2d"], grid, [r, c, h]):
        np.testing.assert_array_equal(got[2], want.astype(np.int32))


@pytest.mark.parametrize("size", [32, 33, 1000, 1024])
def test_abutting_vec_windows_read_as_one_padded_slice(size):
    x = (np.random.default_rng(size).random(size) + 0.5).astype(np.float32)
    programs = qnb.cdiv(size, 32)
    y = np.full(programs * 32, np.nan, np.float32)  # poison: an unwritten element shows
    want = np.full(programs * 32, -5.0, np.float32)
    want[:size] = x * 2
    for got in _both(NS["copy_vecs"], (programs, 1, 1), [x, y]):
        np.testing.assert_array_equal(got[1], want)


@pytest.mark.parametrize("size", [31, 32, 100])
def test_abutting_vec_stores_are_cut_at_the_array_s_end(size):
    x = (np.random.default_rng(size).random(size) + 0.5).astype(np.float32)
    y = np.full(size, np.nan, np.float32)
    programs = qnb.cdiv(size, 32) + 1  # one program past the end: it stores nothing
    for got in _both(NS["copy_vecs"], (programs, 1, 1), [x, y]):
        np.testing.assert_array_equal(got[1], x * 2)


def test_an_abutting_store_in_place_reads_before_any_program_stores():
    """Every program reads the block after its own, then stores its own block: the reads
    see the array as the launch found it (the launch's one meaning on the cpu)."""
    x = np.arange(64, dtype=np.float32) + 0.5
    want = np.concatenate([x[16:] + 1.0, np.ones(16, np.float32)])  # past the end: 0 + 1
    for got in _both(NS["shift_in_place"], (4, 1, 1), [x]):
        np.testing.assert_array_equal(got[0], want)


def test_masked_programs_store_nothing():
    x = (np.random.default_rng(9).random(80) + 0.5).astype(np.float32)
    y = np.full(80, np.nan, np.float32)
    want = y.copy()
    for p in range(0, 5, 2):
        want[p * 16 : p * 16 + 16] = x[p * 16 : p * 16 + 16]
    for got in _both(NS["even_blocks"], (5, 1, 1), [x, y]):
        np.testing.assert_array_equal(got[1], want)
