"""The prepared path's strided windows over 2-D grids (``program_id(0)`` and
``program_id(1)`` both stepping) against the interpreter, bit for bit and error for
error: in-bounds grids (one view of the array), overlapping loads, stores that overlap
(the generic scatter), grids whose edge programs leave the array, negative bounds, 3-D
slabs, and axes either way round."""

import numpy as np
import pytest

import qnb
from qnb import Tile16, f32, i32
from qnb.backends.cpu import prepared_windows
from tests.backends.test_cpu_prepared import _poison, _rand, both_ways


@qnb.kernel
def offset_copy(x: qnb.Array[f32, 2], y: qnb.Array[f32, 2]):
    i, j = qnb.program_id(0), qnb.program_id(1)
    (Tile16.load(x, j * 16 + 1, i * 16 + 2) * 2.0).store(y, j * 17 + 3, i * 18)


@qnb.kernel
def overlapping_loads(x: qnb.Array[f32, 2], y: qnb.Array[f32, 2]):
    i, j = qnb.program_id(0), qnb.program_id(1)
    (Tile16.load(x, j * 8, i * 4) + 1.0).store(y, j * 16, i * 16 + 1)


@qnb.kernel
def rows_by_x(x: qnb.Array[f32, 2], y: qnb.Array[f32, 2]):
    i, j = qnb.program_id(0), qnb.program_id(1)
    (Tile16.load(x, i * 16 + 3, j * 20) - 0.5).store(y, i * 16, j * 16 + 5)


@qnb.kernel
def overlapping_stores(x: qnb.Array[f32, 2], y: qnb.Array[f32, 2]):
    i, j = qnb.program_id(0), qnb.program_id(1)
    (Tile16.load(x, j * 16, i * 16 + 1) * 3.0).store(y, j * 8, i * 8)


@qnb.kernel
def shifted(x: qnb.Array[f32, 2], y: qnb.Array[f32, 2], s: i32):
    i, j = qnb.program_id(0), qnb.program_id(1)
    t = Tile16.full(-7.0, f32)
    t.load_(x, j * 16 - s, j * 16 + 12, i * 16, i * 16 + 16)
    t.store(y, j * 16 + s, j * 16 + 16, i * 16 + 1, i * 16 + 17)


@qnb.kernel
def slab_grid(x: qnb.Array[f32, 3], y: qnb.Array[f32, 3], s: i32):
    i, j = qnb.program_id(0), qnb.program_id(1)
    (Tile16.load(x[s], j * 16 + 2, i * 16) + 1.0).store(y[s], j * 16, i * 16 + 3)


def _pair(shape):
    return lambda: [_rand(shape), _poison(shape)]


GRIDS = [(2, 2), (3, 2), (4, 4), (1, 3), (3, 1), (5, 4)]


@pytest.mark.parametrize("grid", GRIDS)
@pytest.mark.parametrize(
    "kernel",
    [offset_copy, overlapping_loads, rows_by_x, overlapping_stores],
    ids=lambda k: k.name,
)
def test_two_axes_match_the_interpreter(kernel, grid):
    both_ways(kernel, grid, _pair((70, 90)))


@pytest.mark.parametrize("grid", [(6, 5), (4, 5), (8, 8)])
def test_tiles_past_the_edges_match_the_interpreter(grid):
    for kernel in (offset_copy, overlapping_loads, rows_by_x):
        both_ways(kernel, grid, _pair((70, 90)))


@pytest.mark.parametrize("s", [0, 2, 5, -3])
@pytest.mark.parametrize("grid", [(2, 3), (4, 4)])
def test_window_bounds_and_errors_match_the_interpreter(s, grid):
    got = both_ways(shifted, grid, lambda: [_rand((70, 90)), _poison((70, 90)), s])
    if s > 0:  # program (0, 0)'s load starts above the array
        assert got is not None and "negative window bound" in got[2]


@pytest.mark.parametrize("s", [0, 2, 3])
def test_slabs_match_the_interpreter(s):
    got = both_ways(slab_grid, (3, 2), lambda: [_rand((3, 50, 60)), _poison((3, 50, 60)), s])
    assert (got is not None) == (s == 3)


def test_in_bounds_two_axes_take_no_masks(monkeypatch):
    """In bounds and without overlapping stores, a 2-D grid of stepping windows is one
    view of each array: the generic path's masks are never built."""

    def no_masks(*args):
        raise AssertionError("the generic window path ran")

    x = _rand((70, 90))
    want = _poison((70, 90))
    for i in range(4):
        for j in range(3):
            tile = x[j * 16 + 1 : j * 16 + 17, i * 16 + 2 : i * 16 + 18] * np.float32(2.0)
            want[j * 17 + 3 : j * 17 + 19, i * 18 : i * 18 + 16] = tile
    monkeypatch.setattr(prepared_windows, "_masks", no_masks)
    for _ in range(2):  # (the second launch finds its windows memoised)
        y = _poison((70, 90))
        offset_copy[4, 3](x, y)
        np.testing.assert_array_equal(y, want)
    rows_by_x[4, 4](_rand((70, 90)), _poison((70, 90)))
