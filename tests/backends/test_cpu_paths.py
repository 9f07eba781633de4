"""The cpu backend's two executors, held to one answer by generated kernels: every
kernel :mod:`tests.backends.cpu_kernels` draws runs through the interpreter
(``interpreter.run``) and through the prepared closures, on fresh arguments each, and must give
the same bits in every array or the same error (type, message and IR location).

A few hundred examples run by default; ``QNB_CPU_PATHS_EXAMPLES=20000`` runs a long
search.
"""

from __future__ import annotations

import os
from contextlib import contextmanager

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

import qnb
from qnb import ir
from qnb.backends.cpu import interpreter
from qnb.backends.cpu.prepared import prepare
from tests.backends.cpu_kernels import (
    Case,
    batchable_loops,
    exits_per_program,
    kernels,
    union_windows,
    window_reductions,
)
from tests.helpers import define

EXAMPLES = int(os.environ.get("QNB_CPU_PATHS_EXAMPLES", "300"))


def _outcome(run, args):
    """What a run gives: None, or the error it raised as (type, message, IR location)."""
    try:
        run(args)
    except qnb.QnbError as err:
        return (type(err).__name__, err.message, err.ir_loc)
    return None


def _bits(array: np.ndarray) -> bytes:
    return np.ascontiguousarray(array).view(np.uint8).tobytes()


def run_both(case: Case):
    """Run ``case`` both ways; returns (interpreter's, prepared's) outcomes and arrays,
    or None where the prepared path refuses the kernel (it should never)."""
    scope, _ = define(case.source)
    kernel = scope["k"]
    kernel_ir, _ = kernel._lower_for(case.make_args())
    stored = ir.array_uses(kernel_ir)[1]
    launch = prepare(kernel_ir)
    if launch is None:
        return None
    results = []
    for run in (
        lambda a: interpreter.run(kernel_ir, case.grid, a, stored),
        lambda a: launch(case.grid, a, stored),
    ):
        args = case.make_args()
        _, runtime = kernel._signature(args)
        outcome = _outcome(run, runtime)
        results.append((outcome, [a for a in args if isinstance(a, np.ndarray)]))
    return results


def check_case(case: Case, arrays_after_errors=False):
    results = run_both(case)
    # every node has a prepared form: no drawn kernel is left to the interpreter whole
    assert results is not None, "the prepared path refused this kernel"
    (want, want_arrays), (got, got_arrays) = results
    assert got == want, f"interpreter: {want}\nprepared:    {got}"
    if want is not None and not arrays_after_errors:
        return  # (what an error leaves in the arrays is not part of the meaning)
    names = ["x", "y", "v", "w"]
    for name, w, g in zip(names, want_arrays, got_arrays):
        if _bits(w) != _bits(g):
            differ = np.nonzero(_bits_per_element(w) != _bits_per_element(g))
            first = tuple(int(d[0]) for d in differ)
            raise AssertionError(
                f"{name} differs at {len(differ[0])} elements, first {first}: "
                f"interpreter {w[first]!r}, prepared {g[first]!r}"
            )


def _drawn(examples):
    """The settings of each generated test here: ``examples`` examples, no deadline."""
    return settings(
        max_examples=examples,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )


def _bits_per_element(array):
    array = np.ascontiguousarray(array)
    return array.view(f"u{array.itemsize}") if array.dtype != bool else array


@_drawn(EXAMPLES)
@given(kernels())
def test_the_interpreter_and_the_prepared_path_agree(case):
    check_case(case)


@_drawn(EXAMPLES // 2)
@given(kernels())
def test_the_paths_agree_where_every_elementwise_op_writes_over_its_operands(case):
    """The prepared path writes an elementwise op's result over an operand that is a new
    array of its own from 65,536 elements up (``IN_PLACE_MIN``), and a row reduction's
    chain into a buffer it keeps; the drawn kernels are smaller, so here it does so
    from one element."""
    with _in_place_from_one_element():
        check_case(case)


@contextmanager
def _in_place_from_one_element():
    from qnb.backends.cpu import prepared_scalars

    saved = prepared_scalars.IN_PLACE_MIN
    prepared_scalars.IN_PLACE_MIN = 1
    try:
        yield
    finally:
        prepared_scalars.IN_PLACE_MIN = saved


@given(exits_per_program())
@_drawn(EXAMPLES // 3)
def test_values_a_loop_leaves_per_program_agree(case):
    """Found by an outside tester: after a per-program exit, what the loop assigns and its
    counter differ between programs; the prepared path took them as the same in every
    program and decided later branches by program 0."""
    check_case(case)


@given(window_reductions())
@_drawn(EXAMPLES // 3)
def test_reductions_of_overlapping_strided_windows_agree(case):
    check_case(case)


def test_the_issue_column_sums_give_the_interpreter_bits_and_numpy_s():
    """Issue 27's kernel: column windows 4 apart overlap, so the launch holds the tiles as
    one strided view; its sums were up to 80 ulp from the trace's in 47 of 50 inputs."""
    scope, _ = define(
        """
        @qnb.kernel
        def column_sums(x: qnb.Array[qnb.f32, 2], s: qnb.Array[qnb.f32, 1]):
            j = qnb.program_id(0)
            t = qnb.Tile[8, 8].load(x, 0, j * 4)
            s[j] = t.sum()
        """
    )
    column_sums = scope["column_sums"]
    for seed in range(50):
        x = np.random.default_rng(seed).standard_normal((8, 13)).astype(np.float32)
        launched, traced = np.full(2, np.nan, np.float32), np.full(2, np.nan, np.float32)
        column_sums[2](x, launched)
        column_sums.trace[2](x, traced)
        want = np.array([x[:, 0:8].sum(), x[:, 4:12].sum()], np.float32)
        assert launched.tobytes() == traced.tobytes(), seed
        np.testing.assert_allclose(launched, want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("where", ["rows", "elements", "slab"])
def test_strided_windows_of_a_view_into_a_larger_array(where):
    """The prepared path holds strided windows as one view over the array's memory; a
    view that starts inside a larger array (``base[5:]``, a flat run from element 7,
    a slab of a 3-D array) must be read and written from its own start, not from the
    start of the array that owns the memory (it was, before)."""
    scope, _ = define(
        """
        @qnb.kernel
        def shift(x: qnb.Array[qnb.f32, 2], y: qnb.Array[qnb.f32, 2]):
            i = qnb.program_id(0)
            t = qnb.Tile[8, 8].load(x, i * 2, i * 3)
            (t + 1.0).store(y, i * 8, i * 4)
        """
    )
    shift = scope["shift"]
    base = np.random.default_rng(3).standard_normal((2, 50, 50)).astype(np.float32)
    out = np.full((2, 60, 50), np.nan, np.float32)
    if where == "rows":
        x, y = base[0, 5:], out[0, 7:]
    elif where == "elements":
        x, y = (a.reshape(-1)[7 : 7 + 40 * 50].reshape(40, 50) for a in (base, out))
    else:
        x, y = base[1], out[1]
    want = np.array(y)
    for i in range(4):
        want[i * 8 : i * 8 + 8, i * 4 : i * 4 + 8] = x[i * 2 : i * 2 + 8, i * 3 : i * 3 + 8] + 1
    before = np.array(out)
    shift[4](x, y)
    np.testing.assert_array_equal(y, want)
    outside = np.ones(out.shape, bool)
    outside[np.isin(np.arange(out.size), _addresses(out, y)).reshape(out.shape)] = False
    np.testing.assert_array_equal(out[outside], before[outside])


def _addresses(owner, view):
    """The flat element indices of ``owner`` that ``view`` (C-contiguous) covers."""
    start = view.__array_interface__["data"][0] - owner.__array_interface__["data"][0]
    first = start // owner.itemsize
    return np.arange(first, first + view.size)


@qnb.kernel
def _one_row_at_each_program_s_column(x: qnb.Array[qnb.f16, 2], y: qnb.Array[qnb.f16, 2]):
    i = qnb.program_id(0)
    t = qnb.Tile[1, 2].load(x, 0, 0)  # the same in every program
    (t + t).store(y, 0, i)  # its row the same too; its column each program's own


def test_a_store_whose_columns_alone_differ_between_programs():
    """Found by the generated test: a tile and a row the same in every program, a column
    per program (windows that overlap: a race, the later program's value left). The
    masked scatter counted the lanes of the rows, the value and the slab but not of the
    columns, and both paths raised NumPy's broadcast error."""
    x = np.array([[1.5, -2.0]], np.float16)
    launched, traced = np.zeros((1, 3), np.float16), np.zeros((1, 3), np.float16)
    _one_row_at_each_program_s_column[2](x, launched)
    _one_row_at_each_program_s_column.trace[2](x, traced)
    np.testing.assert_array_equal(launched, [[3.0, 3.0, -4.0]])
    np.testing.assert_array_equal(traced, launched)


@qnb.kernel
def _blocks_repeated_along_z(x: qnb.Array[qnb.f16, 2], y: qnb.Array[qnb.f16, 2]):
    i = qnb.program_id(0)
    j = qnb.program_id(1)
    (qnb.Tile[1, 4].load(x, i, j * 4) * 2.0).store(y, i, j * 4)


def test_a_grid_whose_programs_number_the_blocks_but_do_not_tile_them():
    """Found by the long generated run: over a (2, 2, 4) grid the 16 programs number the
    16 blocks of an 8×8 array of 1×4 tiles, and their ids match the blocks' rows and
    columns, yet they cover only rows 0–1 (the third axis repeats them). The
    interpreter took them for a launch-order tiling and wrote rows 2–7 too."""
    x = np.random.default_rng(4).standard_normal((8, 8)).astype(np.float16)
    want = np.full((8, 8), np.nan, np.float16)
    want[:2] = x[:2] * np.float16(2)
    for run in (_blocks_repeated_along_z[(2, 2, 4)], _blocks_repeated_along_z.trace[(2, 2, 4)]):
        y = np.full((8, 8), np.nan, np.float16)
        run(x, y)
        np.testing.assert_array_equal(y, want)
    y = np.full((8, 8), np.nan, np.float16)
    with qnb.backend("cpu"):
        _blocks_repeated_along_z[(2, 2, 4)](x, y)
    np.testing.assert_array_equal(y, want)


@given(batchable_loops())
@_drawn(EXAMPLES // 3)
def test_loops_whose_turns_run_at_once_agree(case):
    """Loops of the same bounds in every program whose statements the prepared path
    runs for all turns at once (``prepared_batched``), with running values turn by
    turn, overlapping turns, per-turn stores to one element and reads after the loop.
    Where a turn raises, the arrays too are the interpreter's: a batch that may raise
    after it stored is not made (``prepared_batched._raises_before_stores``)."""
    check_case(case, arrays_after_errors=True)


@given(batchable_loops())
@_drawn(EXAMPLES // 3)
def test_loops_whose_turns_run_at_once_agree_with_buffers_from_one_element(case):
    """The same, where the batch computes every tile nothing reads after it, and every
    row reduction its chain, into a buffer it keeps from one element up (65,536 at
    launch): a buffer a later turn or launch writes over must hold nothing still read."""
    with _in_place_from_one_element():
        check_case(case, arrays_after_errors=True)


@given(union_windows())
@_drawn(EXAMPLES // 3)
def test_windows_stored_back_where_they_were_loaded_agree(case):
    """Programs that store an elementwise function of their window back at its place
    (``prepared_union`` computes the windows' region once), and the near misses it must
    leave to the statements; where a launch raises, the arrays too are the interpreter's
    (the region is stored only where no check could fail)."""
    check_case(case, arrays_after_errors=True)
