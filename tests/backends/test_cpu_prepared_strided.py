"""The prepared path's strided windows (``program_id(a) * f + u`` bounds) against the
interpreter, bit for bit and error for error: in-bounds grids (one strided view), grids
whose edge programs leave the array (the generic masked path), overlapping stores (the
last program's elements win), negative offsets, uniform offsets from a scalar, 3-D slabs,
2-D grids and masked stores."""

import numpy as np
import pytest

import qnb
from qnb import Tile16, Vec16, f32, i32
from qnb.backends.cpu import prepared_windows
from tests.backends.test_cpu_prepared import _poison, _rand, both_ways


@qnb.kernel
def rows_step(x: qnb.Array[f32, 2], y: qnb.Array[f32, 2]):
    t = Tile16.load(x, qnb.program_id(0), 0)
    (t * 2.0 + 1.0).store(y, qnb.program_id(0), 0)


@qnb.kernel
def rows_differ(x: qnb.Array[f32, 2], y: qnb.Array[f32, 2]):
    # each program stores other values to rows that overlap its neighbours'
    Tile16.load(x, qnb.program_id(0) * 3, 1).store(y, qnb.program_id(0) * 5 - 2, 0)


@qnb.kernel
def cols_differ(x: qnb.Array[f32, 2], y: qnb.Array[f32, 2]):
    Tile16.load(x, 2, qnb.program_id(0) * 2 + 1).store(y, 1, 7 + qnb.program_id(0) * 3)


@qnb.kernel
def disjoint(x: qnb.Array[f32, 2], y: qnb.Array[f32, 2]):
    i = qnb.program_id(0)
    (Tile16.load(x, i * 20 + 3, i * 2) - 0.5).store(y, i * 17, 2)


@qnb.kernel
def diagonal(x: qnb.Array[f32, 2], y: qnb.Array[f32, 2]):
    i = qnb.program_id(0)
    (Tile16.load(x, i, i) * 3.0).store(y, i, i)


@qnb.kernel
def scalar_offset(x: qnb.Array[f32, 2], y: qnb.Array[f32, 2], s: i32):
    i = qnb.program_id(0)
    Tile16.load(x, i * 4 + s, s).store(y, i * 4 - s, 0)


@qnb.kernel
def windows(x: qnb.Array[f32, 2], y: qnb.Array[f32, 2], s: i32):
    i = qnb.program_id(0)
    t = Tile16.full(-7.0, f32)
    t.load_(x, i - s, i + 12, 0, 16)  # rows past the window end keep -7
    t.store(y, i, i + 16, 0, 16)


@qnb.kernel
def slabs(x: qnb.Array[f32, 3], y: qnb.Array[f32, 3], s: i32):
    i = qnb.program_id(0)
    (Tile16.load(x[s], i * 8, 0) + 1.0).store(y[s], i * 8 + 1, 0)


@qnb.kernel
def slab_per_program(x: qnb.Array[f32, 3], y: qnb.Array[f32, 3]):
    i = qnb.program_id(0)
    Tile16.load(x[i], i, 0).store(y[i], i * 2, 0)


@qnb.kernel
def two_axes(x: qnb.Array[f32, 2], y: qnb.Array[f32, 2]):
    i, j = qnb.program_id(0), qnb.program_id(1)
    (Tile16.load(x, i * 4, j * 16) * 2.0).store(y, i * 4, j * 16)


@qnb.kernel
def masked(x: qnb.Array[f32, 2], y: qnb.Array[f32, 2]):
    i = qnb.program_id(0)
    t = Tile16.load(x, i * 2, 0)
    if i % 3 != 1:
        t.store(y, i * 2, 0)


@qnb.kernel
def in_place(x: qnb.Array[f32, 2]):
    i = qnb.program_id(0)
    (Tile16.load(x, 0, 0) + Tile16.load(x, i * 3, 0)).store(x, i * 3 + 1, 0)


def _pair(shape):
    return lambda: [_rand(shape), _poison(shape)]


@pytest.mark.parametrize(
    "shape,grid",
    [
        ((64, 16), 4),  # the tiles lie in the array
        ((1024, 16), 64),
        ((64, 16), 49),  # the last program's tile is the array's last rows
        ((64, 16), 50),  # ... and one past: the edge programs are masked
        ((64, 20), 70),
        ((10, 16), 3),  # no whole tile at all
        ((64, 16), 1),
    ],
)
def test_rows_step(shape, grid):
    both_ways(rows_step, grid, _pair(shape))


@pytest.mark.parametrize("grid", [1, 2, 5, 12, 13, 30])
@pytest.mark.parametrize(
    "kernel", [rows_differ, cols_differ, disjoint, diagonal], ids=lambda k: k.name
)
def test_overlaps_and_edges(kernel, grid):
    both_ways(kernel, grid, _pair((70, 80)))


@pytest.mark.parametrize("s", [0, 3, 5, -2, -20])
@pytest.mark.parametrize("grid", [1, 4, 9])
def test_uniform_offsets(s, grid):
    both_ways(scalar_offset, grid, lambda: [_rand((40, 30)), _poison((40, 30)), s])
    both_ways(windows, grid, lambda: [_rand((40, 16)), _poison((40, 16)), s])


def test_negative_window_bound_raises_the_same():
    got = both_ways(windows, 6, lambda: [_rand((40, 16)), _poison((40, 16)), 2])
    assert got is not None and "negative window bound" in got[2]
    assert "(in program (0, 0, 0))" in got[2]


def test_slabs():
    for s in (0, 2):
        both_ways(slabs, 4, lambda s=s: [_rand((3, 48, 16)), _poison((3, 48, 16)), s])
    got = both_ways(slabs, 4, lambda: [_rand((3, 48, 16)), _poison((3, 48, 16)), 3])
    assert got is not None and "batch index out of range" in got[2]
    both_ways(slab_per_program, 3, lambda: [_rand((3, 40, 16)), _poison((3, 40, 16))])
    got = both_ways(slab_per_program, 4, lambda: [_rand((3, 40, 16)), _poison((3, 40, 16))])
    assert got is not None and "batch index out of range" in got[2]


@pytest.mark.parametrize("grid", [(5, 2), (20, 1), (1, 3)])
def test_two_axes_and_masks(grid):
    both_ways(two_axes, grid, _pair((48, 32)))
    both_ways(masked, grid[0], _pair((48, 16)))


def test_aliasing():
    both_ways(in_place, 5, lambda: [_rand((40, 16))])
    both_ways(rows_step, 4, lambda: [x := _rand((64, 16)), x])
    both_ways(rows_differ, 6, lambda: [x := _rand((70, 20)), x])

    def shifted():
        base = _rand((80, 16))
        return [base[:64], base[3:67]]

    both_ways(rows_step, 20, shifted)
    both_ways(rows_differ, 6, shifted)


def test_in_bounds_windows_take_no_masks(monkeypatch):
    """In bounds, the strided path runs: the generic path's masks are never built."""

    def no_masks(*args):
        raise AssertionError("the generic window path ran")

    monkeypatch.setattr(prepared_windows, "_masks", no_masks)
    x = _rand((64, 16))
    y = _poison((64, 16))
    rows_step[4](x, y)
    want = _poison((64, 16))
    for p in range(4):
        want[p : p + 16] = x[p : p + 16] * np.float32(2.0) + np.float32(1.0)
    np.testing.assert_array_equal(y, want)
    y = _poison((70, 80))
    cols_differ[5](_rand((70, 80)), y)  # overlapping columns
    disjoint[3](_rand((70, 80)), y)


@qnb.kernel
def masked_index(x: qnb.Array[f32, 2], out: qnb.Array[f32, 1], i: i32):
    t = Tile16.load(x, 0, 0)
    p = qnb.program_id(0)
    if p % 2 == 1:
        out[p] = t[i, 3] + t[1, i] + t.row(i)[2]


@pytest.mark.parametrize("i", [0, 15, 16, -1, 2**31 - 1])
@pytest.mark.parametrize("grid", [1, 4])
def test_uniform_tile_indices(i, grid):
    """A tile index the same in every program is checked with Python ints: the same
    values, and the same error only where a program that runs the access has it."""
    got = both_ways(masked_index, grid, lambda: [_rand((16, 16)), _poison(4), i])
    assert (got is not None) == (grid > 1 and not 0 <= i < 16)


# ---------------------------------------------------------------------- lines


@qnb.kernel
def lines(
    v: qnb.Array[f32, 1], x: qnb.Array[f32, 2], out: qnb.Array[f32, 1], y: qnb.Array[f32, 2], s: i32
):
    a = Vec16.load(v, s, other=-3.0)
    b = Vec16.load_row(x, s, 1)
    c = Vec16.load_col(x, 2, s)
    d = Vec16.load(x, s, s + 9, 3)  # the quadrants form: a column with a window end
    (a + b + c).store(out, s)
    (d * 2.0).store_row(y, s, 0)
    (c - a).store_col(y, 1, s)


@qnb.kernel
def line_conversions(v: qnb.Array[qnb.f64, 1], out: qnb.Array[qnb.f64, 1], s: i32):
    a = Vec16.load(v, s)
    if qnb.program_id(0) == 1:
        (a * 3.0).store(out, s)  # under a mask: the generic store
    (a + 1.0).astype(f32).astype(qnb.f64).store(out, s + 20)


@qnb.kernel
def line_race(v: qnb.Array[f32, 1], out: qnb.Array[f32, 1]):
    p = qnb.program_id(0)
    (Vec16.load(v, 0) + Vec16.full(p * 1.0, f32)).store(out, 3)  # the last program's wins


@pytest.mark.parametrize("s", [0, 1, 4, 10, 30, 40, -1, -16, 2**31 - 20])
@pytest.mark.parametrize("grid", [1, 3])
def test_lines_match(s, grid):
    """Lines the same in every program: in bounds one slice; past an end, before the
    start or outside the array, the generic path's masks and errors, as before."""
    both_ways(
        lines,
        grid,
        lambda: [_rand(48), _rand((30, 40)), _poison(48), _poison((30, 40)), s],
    )
    both_ways(
        line_conversions,
        grid,
        lambda: [_rand(48).astype(np.float64), np.full(48, np.nan), s],
    )


def test_line_race_and_aliasing():
    both_ways(line_race, 4, lambda: [_rand(30), _poison(30)])
    both_ways(line_race, 4, lambda: [x := _rand(30), x])
    both_ways(lines, 2, lambda: [x := _rand(48), _rand((30, 40)), x, _poison((30, 40)), 2])


@qnb.kernel
def stencil(x: qnb.Array[f32, 2], y: qnb.Array[f32, 2]):
    i = qnb.program_id(0)
    (Tile16.load(x, i * 2 - 3, 5, other=-2.0) + 1.0).store(y, i * 16, 0)


@qnb.kernel
def stencil_window(x: qnb.Array[f32, 2], y: qnb.Array[f32, 2]):
    i = qnb.program_id(0)
    t = Tile16.full(9.0, f32)
    t.load_(x, i * 3, i * 3 + 11, 2, 30)  # a window of 11 rows, past the array's end
    t.store(y, i * 16, 0)


@pytest.mark.parametrize("grid", [1, 3, 8, 20])
@pytest.mark.parametrize("shape", [(30, 16), (12, 10), (60, 40)])
def test_windows_leaving_the_array(grid, shape):
    """Tiles that leave the array (before its start or past its end) or their window:
    the region they span, filled, then one strided view; the same as the masked path."""
    both_ways(stencil, grid, lambda: [_rand(shape), _poison((320, 16))])
    both_ways(stencil_window, grid, lambda: [_rand(shape), _poison((320, 16))])


def test_edge_windows_take_no_masks(monkeypatch):
    monkeypatch.setattr(prepared_windows, "_masks", lambda *a: pytest.fail("masks built"))
    x, y = _rand((30, 16)), _poison((320, 16))
    stencil[8](x, y)
    padded = np.full((60, 40), np.float32(-2.0))
    padded[3:33, :16] = x
    want = np.concatenate([padded[2 * i : 2 * i + 16, 5:21] for i in range(8)]) + np.float32(1)
    np.testing.assert_array_equal(y[:128], want)


def test_partial_grid_stores_take_no_masks(monkeypatch):
    """A store whose edge programs leave the array, rows overlapping or abutting: the
    region composed once, no masks (and the interpreter's result, checked above)."""
    monkeypatch.setattr(prepared_windows, "_masks", lambda *a: pytest.fail("masks built"))
    x, y = _rand((64, 16)), _poison((64, 16))
    rows_step[60](x, y)
    np.testing.assert_array_equal(y, x * np.float32(2.0) + np.float32(1.0))
    y = _poison((70, 80))
    rows_differ[13](_rand((70, 80)), y)  # starts at row -2, ends past row 70
    assert not np.isnan(y[:70, :16]).any() and np.isnan(y[:, 16:]).all()
