"""Windows stored back where they were loaded, as one region (``prepared_union``).

Each kernel runs through the interpreter and the prepared path (``both_ways``: the same
bits, or the same error), and each test says what the strategy did: ``ran`` (the
region computed once), ``fell back`` (a launch it did not fit: the two statements ran)
or neither (the kernel is not of its form)."""

from __future__ import annotations

import collections
from contextlib import contextmanager
from unittest import mock

import numpy as np
import pytest

import qnb
from benchmarks.bench_cpu_launch import scale_shift
from qnb import Tile, Tile16
from qnb.backends.cpu import prepared_union
from tests.backends.test_cpu_prepared import both_ways

pytestmark = pytest.mark.usefixtures("on_cpu")


@pytest.fixture
def on_cpu():
    with qnb.backend("cpu"):
        yield


@contextmanager
def _watched():
    """What the strategy did in the launches meanwhile: counts of "ran" and "fell back"."""
    seen = collections.Counter()
    real = prepared_union.UnionWindows.union_pair

    def union_pair(self, body):
        run = real(self, body)
        if run is None:
            return None

        def watched(st):
            done = run(st)
            seen["ran" if done else "fell back"] += 1
            return done

        return watched

    with mock.patch.object(prepared_union.UnionWindows, "union_pair", union_pair):
        yield seen


def _rows(shape, seed=0, dtype=np.float32):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(shape) * 3 + 0.25).astype(dtype)


@pytest.mark.parametrize("rows,grid", [(64, 4), (1024, 64), (64, 60), (16, 1)])
def test_the_launch_benchmark_s_overlapping_windows_run_as_one_region(rows, grid):
    """``bench_cpu_launch``'s kernel: windows a row apart (grid 60 on 64 rows: the last
    ones hang past the array's end, where nothing is stored)."""
    x = _rows((rows, 16))
    with _watched() as seen:
        both_ways(scale_shift, (grid,), lambda: (x.copy(), np.full_like(x, np.nan)))
    assert seen == ({"ran": 1} if grid > 1 else {"fell back": 1})  # (one program: as before)
    y = np.full_like(x, np.nan)
    scale_shift[grid](x, y)
    covered = min(grid + 15, rows)
    np.testing.assert_array_equal(y[:covered], x[:covered] * np.float32(2) + np.float32(1))
    assert np.isnan(y[covered:]).all()


@qnb.kernel
def columns(x, y, s: qnb.f32):
    t = Tile[4, 8].load(x, 1, qnb.program_id(0) * 3 + 2, other=-1.0)
    (qnb.exp(t * 0.25) - t * s).store(y, 1, qnb.program_id(0) * 3 + 2)


def test_windows_stepping_along_the_columns_too():
    x = _rows((6, 40))
    with _watched() as seen:
        both_ways(columns, (11,), lambda: (x.copy(), np.full_like(x, np.nan), 0.5))
    assert seen == {"ran": 1}


@pytest.mark.parametrize("how", ["same", "shifted down", "shifted up"])
def test_a_store_into_the_loaded_buffer_gives_the_interpreter_s_bits(how):
    """In the lock step every program loads before any stores; the region is read
    whole before it is stored, and a store over a shifted view of the same buffer
    reads the old values too."""
    base = _rows((80, 16))

    def make_args():
        b = base.copy()
        if how == "same":
            return b[:64], b[:64]
        if how == "shifted down":
            return b[:64], b[3:67]
        return b[3:67], b[:64]

    with _watched() as seen:
        both_ways(scale_shift, (20,), make_args)
    assert seen == {"ran": 1}


@qnb.kernel
def one_row_off(x, y):
    t = Tile16.load(x, qnb.program_id(0), 0)
    (t * 2.0).store(y, qnb.program_id(0) + 1, 0)


@qnb.kernel
def shorter_store(x, y):
    t = Tile16.load(x, qnb.program_id(0), 0)
    (t * 2.0).store(y, qnb.program_id(0), qnb.program_id(0) + 8, 0, 16)


@qnb.kernel
def with_gaps(x, y):
    t = Tile[2, 16].load(x, qnb.program_id(0) * 3, 0)
    (t + 1.0).store(y, qnb.program_id(0) * 3, 0)


@qnb.kernel
def from_before_the_start(x, y):
    t = Tile16.load(x, qnb.program_id(0) - 2, 0)
    (t + 1.0).store(y, qnb.program_id(0) - 2, 0)


@qnb.kernel
def converted(x, y):
    t = Tile16.load(x, qnb.program_id(0), 0, dtype=qnb.f32)
    (t + 1.0).store(y, qnb.program_id(0), 0)


@pytest.mark.parametrize(
    "kernel,dtype",
    [
        (one_row_off, np.float32),
        (shorter_store, np.float32),
        (with_gaps, np.float32),
        (from_before_the_start, np.float32),
        (converted, np.float64),
    ],
)
def test_near_misses_run_their_statements(kernel, dtype):
    """A store a row off, its own window ends (each program stores half its tile: the
    later programs' rows are the earlier ones' loads, which a region would give the
    later value), rows left between the windows, a start below 0 (padded: the fill) and
    a converting load: each ends as the interpreter's, the region not made or not run."""
    x = _rows((48, 16), dtype=dtype)
    with _watched() as seen:
        both_ways(kernel, (8,), lambda: (x.copy(), np.full_like(x, np.nan)))
    assert seen["ran"] == 0


@qnb.kernel
def read_again(x, y):
    t = Tile16.load(x, qnb.program_id(0), 0)
    (t * 2.0).store(y, qnb.program_id(0), 0)
    (t + 1.0).store(x, qnb.program_id(0), 0)


@qnb.kernel
def tile_constant(x, y):
    t = Tile16.load(x, qnb.program_id(0), 0)
    (t * Tile16.full(2.0)).store(y, qnb.program_id(0), 0)


@qnb.kernel
def per_program_value(x, y):
    t = Tile16.load(x, qnb.program_id(0), 0)
    (t * qnb.program_id(0)).store(y, qnb.program_id(0), 0)


@qnb.kernel
def reduced(x, y):
    t = Tile16.load(x, qnb.program_id(0), 0, other=5.0)
    (t - t.max()).store(y, qnb.program_id(0), 0)


@qnb.kernel
def one_window_reduced(x, y):
    t = Tile16.load(x, 0, 0, other=5.0)
    (t * t.sum()).store(y, 0, 0)


@pytest.mark.parametrize(
    "kernel", [read_again, tile_constant, per_program_value, reduced, one_window_reduced]
)
def test_what_is_not_of_the_form_is_left_to_the_statements(kernel):
    """The tile read after the store, a tile constant (the tile's shape, not the
    region's), a value that differs between programs, a reduction of the tile (over the
    region it would sum other elements: here the fill past the array's end too), also
    where every program loads the same window (its last rows past the array's end)."""
    x = _rows((12, 16))
    with _watched() as seen:
        both_ways(kernel, (8,), lambda: (x.copy(), np.full_like(x, np.nan)))
    assert not seen


@qnb.kernel
def fill_that_raises(x, y, z, j: qnb.i32):
    t = Tile16.load(x, qnb.program_id(0), 0, other=z[j, 0])
    (t * 2.0).store(y, qnb.program_id(0), 0)


@qnb.kernel
def slab_that_raises(x, y, b: qnb.i32):
    p = qnb.program_id(0)
    t = x[p - 3 : p + 13, 0:16]
    (t + 1.0).store(y[b], p - 3, 0)


@qnb.kernel
def value_and_slab_that_raise(x, y, z, j: qnb.i32, b: qnb.i32):
    t = Tile16.load(x, qnb.program_id(0), 0)
    (t * z[j, 0]).store(y[b], qnb.program_id(0), 0)


@pytest.mark.parametrize(
    "kernel,make_args",
    [
        (fill_that_raises, lambda x: (x, np.zeros_like(x), np.ones((2, 2), np.float32), 5)),
        (slab_that_raises, lambda x: (x, np.zeros((2, *x.shape), np.float32), 5)),
        (
            value_and_slab_that_raise,
            lambda x: (x, np.zeros((2, *x.shape), np.float32), np.ones((2, 2), np.float32), 5, 7),
        ),
    ],
)
def test_errors_are_the_statements_own_in_their_order(kernel, make_args):
    """Found by an outside tester: a load's fill that raises was never evaluated (the
    region stores none of it), and the store's slab was checked before the load's
    bounds or the value's index. The region now evaluates the fill where it may raise,
    and any error before its one store leaves the launch to the statements."""
    x = _rows((48, 16))
    both_ways(kernel, (8,), lambda: make_args(x.copy()))


@qnb.kernel
def two_nans(x, y, s: qnb.f32):
    t = Tile[1, 1].load(x, qnb.program_id(0), 0, other=float("nan"))
    (qnb.log(t) * s).store(y, qnb.program_id(0), 0)


def test_a_value_with_a_nan_keeps_the_interpreter_s_nan_bits():
    """Found by an outside tester: NumPy gives an op of two NaNs one or the other by
    the loop it takes (the array's length and strides), so over the region the stored
    NaNs differed in sign from the interpreter's; such a value runs the statements."""
    x = np.abs(_rows((8, 1))) + np.float32(0.5)
    x[3, 0] = -1.0  # (log of it: a NaN of its own)
    with _watched() as seen:
        got = [x.copy(), np.zeros_like(x)]
        two_nans[20](*got, float("nan"))
        want = [x.copy(), np.zeros_like(x)]
        two_nans.trace[20](*want, float("nan"))
    assert seen == {"fell back": 1}
    assert got[1].view(np.uint32).tolist() == want[1].view(np.uint32).tolist()


@qnb.kernel
def past_the_end(x, y):
    t = Tile16.load(x, qnb.program_id(0) + 40, 0)
    (t + 1.0).store(y, qnb.program_id(0) + 40, 0)


@pytest.mark.parametrize("kernel,rows", [(past_the_end, 32), (scale_shift, 0)])
def test_an_empty_region_stores_nothing(kernel, rows):
    """Found by an outside tester: every window past the array's end (or an array of no
    rows) leaves an empty region, whose NaN check, a max, raised NumPy's error."""
    x = _rows((rows, 16))
    with _watched() as seen:
        both_ways(kernel, (4,), lambda: (x.copy(), np.full_like(x, np.nan)))
    assert seen == {"ran": 1}
