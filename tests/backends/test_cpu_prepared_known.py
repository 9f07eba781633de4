"""The prepared path's known windows and elements: a store of a constant tile to a
constant window (``Tile16.full(4.0).store(d, 0, 0)``) and a constant element index
(``x[3, 5]``) are made once when the launcher is built; only the array's shape is checked
at a launch. Each runs both ways (prepared and interpreter), bit for bit and error for
error, on arrays that hold the window or element, partly hold it, or do not."""

from __future__ import annotations

import numpy as np
import pytest

import qnb
from qnb import Tile16, f32, i32
from tests.backends.test_cpu_prepared import _rand, both_ways


@qnb.kernel
def fill_corner(d: qnb.Array[f32, 2]):
    Tile16.full(4.0).store(d, 0, 0)


@qnb.kernel
def fill_window(d: qnb.Array[f32, 2]):
    Tile16.full(-2.5).store(d, 5, 21, 3, 40)  # rows 5..21, columns 3..19 at most


@qnb.kernel
def fill_padded(d: qnb.Array[f32, 2]):
    Tile16.full(1.5).store(d, -3, -2)  # negative corner: the part inside is written


@qnb.kernel
def known_elements(x: qnb.Array[f32, 2], v: qnb.Array[i32, 1]):
    x[3, 5] = x[2, 1] + 1.0
    v[7] = v[0] * 3


@pytest.mark.parametrize("shape", [(16, 16), (40, 50), (9, 7), (1, 1), (17, 3)])
def test_a_constant_tile_to_a_constant_window(shape):
    both_ways(fill_corner, 1, lambda: [_rand(shape)])
    both_ways(fill_window, 1, lambda: [_rand(shape)])
    both_ways(fill_padded, 1, lambda: [_rand(shape)])


def test_a_constant_window_under_a_per_program_branch():
    @qnb.kernel
    def some_programs(d: qnb.Array[f32, 2]):
        if qnb.program_id(0) % 2 == 1:
            Tile16.full(7.0).store(d, 0, 0)

    both_ways(some_programs, 3, lambda: [_rand((20, 20))])


@pytest.mark.parametrize(
    "rows,cols,length", [(4, 6, 8), (8, 8, 20), (3, 6, 8), (4, 5, 8), (4, 6, 7)]
)
def test_constant_element_indices_match_the_interpreter_and_its_errors(rows, cols, length):
    got = both_ways(
        known_elements,
        1,
        lambda: [_rand((rows, cols)), np.arange(1, length + 1, dtype=np.int32)],
    )
    if rows < 4 or cols < 6 or length < 8:  # x[3, 5] or v[7] is outside: the same error
        assert got is not None and "index out of range" in got[2]
