"""Kernels with a hazard planted on purpose, each of another shape, and what
``qnb.check`` must say about it.

Each :class:`Planted` names the kernel, how to make its arguments and grid, and the
first record of each kind the check must report (``hazards`` sorts the write-writes
first, then the read-writes; within a kind by array, element in C order, programs).
Lines are written in the kernels as markers: ``# A`` on the line of the first program's
access, ``# B`` on the second's, ``# AB`` where both are one line.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

import qnb
from qnb import Tile, Tile16, Vec, Vec16

F32, F64, F16, I32 = np.float32, np.float64, np.float16, np.int32


@dataclass
class Expect:
    """The first record of one kind: its array, first element, programs (pads to
    3-tuples), the markers of its two lines, and, where given, its count and values."""

    kind: str
    array: str
    index: tuple
    programs: tuple
    lines: tuple = ("A", "B")
    count: int | None = None
    values: tuple | None = None


@dataclass
class Planted:
    name: str
    kernel: qnb.Kernel
    make: Callable  # rng -> (grid, args)
    expect: list[Expect]
    order_dependent: bool | None = None
    elements: dict = field(default_factory=dict)  # array -> elements in conflict
    source: object = None  # where the line markers are (a func it calls), else the kernel


PLANTED: list[Planted] = []


def planted(make, *expect, order_dependent=None, elements=None, source=None):
    def register(kernel):
        PLANTED.append(
            Planted(
                kernel.name, kernel, make, list(expect), order_dependent, elements or {}, source
            )
        )
        return kernel

    return register


def ww(array, index, programs, lines=("A", "B"), **kw) -> Expect:
    return Expect("write-write", array, index, programs, lines, **kw)


def rw(array, index, programs, lines=("A", "B"), **kw) -> Expect:
    return Expect("read-write", array, index, programs, lines, **kw)


def rand(rng, shape, dtype=F32):
    return rng.uniform(0.5, 1.5, shape).astype(dtype)


def zeros(shape, dtype=F32):
    return np.zeros(shape, dtype)


# ----------------------------------------------------------------------------- tile windows


@planted(
    lambda rng: (4, [rand(rng, (64, 16)), zeros((64, 16))]),
    ww("out", (1, 0), (0, 1), ("AB", "AB"), count=240),
    elements={"out": 17 * 16},
)
@qnb.kernel
def forgotten_tile_scale(x, out):
    i = qnb.program_id(0)  # should be program_id(0) * 16
    t = Tile16.load(x, i, 0)
    (t * 2.0).store(out, i, 0)  # AB


@planted(
    lambda rng: ((2, 2), [rand(rng, (32, 32)), zeros((32, 32))]),
    ww("out", (0, 0), ((0, 0), (0, 1)), ("AB", "AB"), count=256),
)
@qnb.kernel
def forgotten_second_axis(x, out):
    i = qnb.program_id(0) * 16
    t = Tile16.load(x, i, qnb.program_id(1) * 16)
    t.store(out, i, 0)  # AB   (the column should be program_id(1) * 16)


@planted(
    lambda rng: ((1, 1, 3), [rand(rng, (16, 16)), zeros((16, 16))]),
    ww("out", (0, 0), ((0, 0, 0), (0, 0, 1)), ("AB", "AB"), count=256),
)
@qnb.kernel
def third_axis_ignored(x, out):
    t = Tile16.load(x, 0, 0) * (qnb.program_id(2) + 1.0)
    t.store(out, 0, 0)  # AB


@planted(
    lambda rng: (5, [rand(rng, (64, 16)), zeros((64, 16))]),
    ww("out", (48, 0), (3, 4), ("AB", "AB"), count=256, values=None),
)
@qnb.kernel
def grid_one_too_large_clamped(x, out):
    # the last tile is clamped inside the array: program 4 repeats program 3's tile
    row = qnb.minimum(qnb.program_id(0) * 16, x.shape[0] - 16)
    Tile16.load(x, row, 0).store(out, row, 0)  # AB


@planted(
    lambda rng: (5, [rand(rng, (64, 16)), zeros((64, 16))]),
    ww("out", (0, 0), (0, 4), ("AB", "AB"), count=256),
)
@qnb.kernel
def grid_one_too_large_wrapped(x, out):
    row = (qnb.program_id(0) * 16) % x.shape[0]
    Tile16.load(x, row, 0).store(out, row, 0)  # AB


@planted(
    lambda rng: (3, [rand(rng, (40,)), zeros((40,))]),
    ww("out", (24,), (1, 2), ("AB", "AB"), count=8),
)
@qnb.kernel
def last_vec_clamped_overlaps(x, out):
    start = qnb.minimum(qnb.program_id(0) * 16, x.shape[0] - 16)
    (Vec16.load(x, start) * 2.0).store(out, start)  # AB


@planted(
    lambda rng: (3, [zeros((8, 32))]),
    ww("out", (0, 4), (0, 1), ("AB", "AB"), count=32),
)
@qnb.kernel
def windows_four_apart(out):
    j = qnb.program_id(0)
    Tile[8, 8].full(j * 1.0, qnb.f32).store(out, 0, j * 4)  # AB


@planted(
    lambda rng: (3, [rand(rng, (64, 16))]),
    ww("x", (8, 0), (0, 1), ("B", "B"), count=128),
    rw("x", (8, 0), (0, 1), ("A", "B")),
    order_dependent=False,  # one at a time, either order adds 1 twice to the overlap
)
@qnb.kernel
def in_place_windows_overlap(x):
    i = qnb.program_id(0) * 8
    t = Tile16.load(x, i, 0)  # A
    (t + 1.0).store(x, i, 0)  # B


@planted(
    lambda rng: (4, [rand(rng, (64, 16))]),
    rw("x", (15, 0), (1, 0), ("A", "B")),
    order_dependent=True,
)
@qnb.kernel
def in_place_stencil_rows(x):
    i = qnb.program_id(0) * 16
    up = Tile16.load(x, i - 1, 0)  # A
    down = Tile16.load(x, i + 1, 0)
    ((up + down) * 0.5).store(x, i, 0)  # B


@planted(
    lambda rng: ((2, 2), [rand(rng, (32, 32))]),
    rw("a", (0, 16), ((0, 1), (1, 0)), ("A", "B")),
    order_dependent=True,
)
@qnb.kernel
def transpose_in_place(a):
    i = qnb.program_id(0) * 16
    j = qnb.program_id(1) * 16
    t = Tile16.load(a, i, j)  # A
    t.T.store(a, j, i)  # B


@planted(
    lambda rng: ((2, 2), [(a := rand(rng, (32, 32))), a]),
    rw("dst", (0, 16), ((0, 1), (1, 0)), ("A", "B")),
    order_dependent=True,
)
@qnb.kernel
def transpose_through_aliases(src, dst):
    i = qnb.program_id(0) * 16
    j = qnb.program_id(1) * 16
    t = Tile16.load(src, i, j)  # A
    t.T.store(dst, j, i)  # B


def _shifted_views(rng):
    buffer = rand(rng, (64, 16))
    return 3, [buffer[:48], buffer[16:]]


@planted(
    _shifted_views,
    rw("dst", (0, 0), (1, 0), ("A", "B"), count=256),
    order_dependent=True,
)
@qnb.kernel
def copy_between_overlapping_views(src, dst):
    i = qnb.program_id(0) * 16
    t = Tile16.load(src, i, 0)  # A
    t.store(dst, i, 0)  # B


@planted(
    lambda rng: (3, [(a := rand(rng, (64, 16))), a]),
    rw("y", (16, 0), (0, 1), ("A", "B"), count=16),
    order_dependent=True,
)
@qnb.kernel
def shift_up_in_place(x, y):
    i = qnb.program_id(0) * 16
    t = Tile16.load(x, i + 1, 0)  # A
    t.store(y, i, 0)  # B


@planted(
    lambda rng: (4, [rand(rng, (64, 16)), zeros((16, 16))]),
    ww("acc", (0, 0), (0, 1), ("B", "B"), count=256),
    rw("acc", (0, 0), (0, 1), ("A", "B")),
)
@qnb.kernel
def sum_of_tiles_into_one_tile(x, acc):
    total = Tile16.load(acc, 0, 0)  # A
    total = total + Tile16.load(x, qnb.program_id(0) * 16, 0)
    total.store(acc, 0, 0)  # B


@planted(
    lambda rng: ((2, 2), [rand(rng, (32, 64)), rand(rng, (64, 32)), zeros((32, 32))]),
    ww("c", (0, 0), ((0, 0), (0, 1)), ("AB", "AB"), count=256),
)
@qnb.kernel
def matmul_forgotten_column(a, b, c):
    i = qnb.program_id(0) * 16
    j = qnb.program_id(1) * 16
    acc = Tile16.zeros(qnb.f32)
    for k in range(0, a.shape[1], 16):
        acc = qnb.mma(Tile16.load(a, i, k), Tile16.load(b, k, j), acc)
    acc.store(c, i, 0)  # AB   (should be c, i, j)


@planted(
    lambda rng: (4, [rand(rng, (64, 16)), zeros((32, 16))]),
    ww("out", (0, 0), (0, 1), ("AB", "AB"), count=256),
)
@qnb.kernel
def two_programs_per_tile(x, out):
    i = qnb.program_id(0)
    Tile16.load(x, i * 16, 0).store(out, (i // 2) * 16, 0)  # AB


@planted(
    lambda rng: (2, [rand(rng, (32, 16)), zeros((32, 16)), zeros((32, 16))]),
    ww("out2", (1, 0), (0, 1), ("AB", "AB"), count=240),
)
@qnb.kernel
def second_output_only(x, out1, out2):
    i = qnb.program_id(0)
    t = Tile16.load(x, i * 16, 0)
    t.store(out1, i * 16, 0)
    t.store(out2, i, 0)  # AB


@planted(
    lambda rng: (4, [rand(rng, (16, 16), F16), zeros((16, 16), F16)]),
    ww("out", (0, 0), (0, 1), ("AB", "AB"), values=(0.0, 1.0)),
)
@qnb.kernel
def half_tiles_differ(x, out):
    p = qnb.program_id(0)
    (Tile16.load(x, 0, 0) * 0.0 + p).store(out, 0, 0)  # AB


# ----------------------------------------------------------------------------- 3-D slabs


def _spd(rng, count):
    m = rng.uniform(-1, 1, (count, 16, 16))
    return m @ m.transpose(0, 2, 1) + 16 * np.eye(16)


@planted(
    lambda rng: (3, [_spd(rng, 3), zeros((3, 16, 16), F64)]),
    ww("out", (0, 0, 0), (0, 1), ("AB", "AB"), count=256),
)
@qnb.kernel
def forgotten_slab_index(a, out):
    b = qnb.program_id(0)
    t = Tile16.load(a[b], 0, 0)
    t.cholesky_(0.0)
    t.store(out[0], 0, 0)  # AB   (should be out[b])


@planted(
    lambda rng: (4, [rand(rng, (4, 16, 16)), zeros((2, 16, 16))]),
    ww("out", (0, 0, 0), (0, 1), ("AB", "AB"), count=256),
)
@qnb.kernel
def two_programs_per_slab(x, out):
    b = qnb.program_id(0)
    Tile16.load(x[b], 0, 0).store(out[b // 2], 0, 0)  # AB


@planted(
    lambda rng: (3, [_spd(rng, 3)]),
    ww("a", (0, 0, 0), (0, 1), ("AB", "AB")),
    rw("a", (0, 0, 0), (0, 1), ("A", "B")),
)
@qnb.kernel
def cholesky_in_place_wrong_slab(a):
    b = qnb.program_id(0)
    t = Tile16.load(a[b], 0, 0)  # A
    t.cholesky_(0.0)
    t.store(a[0], 0, 0)  # AB B


@planted(
    lambda rng: (3, [rand(rng, (4, 16, 16))]),
    rw("x", (1, 0, 0), (1, 0), ("A", "B"), count=256),
    order_dependent=True,
)
@qnb.kernel
def next_slab_in_place(x):
    b = qnb.program_id(0)
    t = Tile16.load(x[b], 0, 0)  # A
    (t * 2.0).store(x[b + 1], 0, 0)  # B


# ----------------------------------------------------------------------------- vectors


@planted(
    lambda rng: (3, [rand(rng, (48,)), zeros((48,))]),
    ww("out", (1,), (0, 1), ("AB", "AB"), count=15),
)
@qnb.kernel
def forgotten_vec_scale(x, out):
    i = qnb.program_id(0)
    (Vec16.load(x, i) + 1.0).store(out, i)  # AB


@planted(
    lambda rng: (4, [rand(rng, (64,))]),
    rw("x", (15,), (1, 0), ("A", "B"), count=1),
    order_dependent=True,
)
@qnb.kernel
def in_place_blur_1d(x):
    i = qnb.program_id(0) * 16
    left = Vec16.load(x, i - 1)  # A
    right = Vec16.load(x, i + 1)
    ((left + right) * 0.5).store(x, i)  # B


@planted(
    lambda rng: (3, [zeros((32,))]),
    ww("out", (0,), (0, 2), ("AB", "AB"), count=16),
)
@qnb.kernel
def vec_start_wraps(out):
    i = qnb.program_id(0)
    Vec16.full(i * 1.0, qnb.f32).store(out, (i * 16) % 32)  # AB


@planted(
    lambda rng: (3, [zeros((4, 32))]),
    ww("out", (0, 8), (0, 1), ("AB", "AB"), count=8),
)
@qnb.kernel
def row_vecs_overlap(out):
    i = qnb.program_id(0)
    Vec16.full(i + 1.0, qnb.f32).store_row(out, 0, i * 8)  # AB


@planted(
    lambda rng: (3, [zeros((32, 4))]),
    ww("out", (8, 0), (0, 1), ("AB", "AB"), count=8),
)
@qnb.kernel
def column_vecs_overlap(out):
    i = qnb.program_id(0)
    Vec16.full(i + 1.0, qnb.f32).store_col(out, i * 8, 0)  # AB


@planted(
    lambda rng: (3, [rand(rng, (4, 16))]),
    rw("a", (1, 0), (1, 0), ("A", "B"), count=16),
    order_dependent=True,
)
@qnb.kernel
def rows_shift_down_in_place(a):
    i = qnb.program_id(0)
    v = Vec16.load_row(a, i, 0)  # A
    v.store_row(a, i + 1, 0)  # B


@planted(
    lambda rng: (3, [rand(rng, (16, 4))]),
    rw("a", (0, 1), (1, 0), ("A", "B"), count=16),
    order_dependent=True,
)
@qnb.kernel
def columns_shift_right_in_place(a):
    j = qnb.program_id(0)
    v = Vec16.load_col(a, 0, j)  # A
    v.store_col(a, 0, j + 1)  # B


@planted(
    lambda rng: (3, [rand(rng, (3, 16)), zeros((16,))]),
    ww("sums", (0,), (0, 1), ("AB", "AB"), count=16),
)
@qnb.kernel
def column_sums_into_one_vec(x, sums):
    v = Vec16.load_row(x, qnb.program_id(0), 0)
    (v * 1.0).store(sums, 0)  # AB


@planted(
    lambda rng: (2, [rand(rng, (2, 64)), zeros((64,))]),
    ww("out", (0,), (0, 1), ("AB", "AB"), count=64),
)
@qnb.kernel
def wide_vec_one_row(x, out):
    v = Vec[64].load_row(x, qnb.program_id(0), 0)
    v.store(out, 0)  # AB


# ----------------------------------------------------------------------------- elements


def _histogram_input(rng):
    return 5, [np.array([3, 1, 3, 0, 1], I32), zeros((4,), I32)]


@planted(
    _histogram_input,
    ww("h", (1,), (1, 4), ("AB", "AB"), count=1, values=(1, 1)),
    rw("h", (1,), (1, 4), ("AB", "AB")),
    elements={"h": 2},
)
@qnb.kernel
def cuda_style_histogram(x, h):
    i = qnb.program_id(0)
    h[x[i]] = h[x[i]] + 1  # AB


@planted(
    lambda rng: (4, [rand(rng, (64, 16)), zeros((1,))]),
    ww("total", (0,), (0, 1), ("AB", "AB"), count=1),
    rw("total", (0,), (0, 1), ("AB", "AB")),
)
@qnb.kernel
def reduction_into_one_element(x, total):
    t = Tile16.load(x, qnb.program_id(0) * 16, 0)
    total[0] = total[0] + t.sum()  # AB


@planted(
    lambda rng: (4, [zeros((1,), I32)]),
    ww("count", (0,), (0, 1), ("AB", "AB"), values=(1, 1)),
    rw("count", (0,), (0, 1), ("AB", "AB")),
)
@qnb.kernel
def counter_increment(count):
    count[0] = count[0] + 1  # AB


@planted(
    lambda rng: (3, [zeros((1,))]),
    ww("flag", (0,), (0, 1), ("AB", "AB"), values=(1.0, 1.0)),
)
@qnb.kernel
def equal_values_still_race(flag):
    flag[0] = 1.0  # AB


@planted(
    lambda rng: (3, [zeros((1,), I32)]),
    ww("winner", (0,), (0, 1), ("AB", "AB"), values=(0, 1)),
    order_dependent=True,
)
@qnb.kernel
def last_writer_wins(winner):
    winner[0] = qnb.program_id(0)  # AB


@planted(
    lambda rng: (2, [zeros((1,))]),
    ww("out", (0,), (0, 1), ("A", "B"), values=(1.0, 2.0)),
    order_dependent=True,
)
@qnb.kernel
def branch_stores_differ(out):
    if qnb.program_id(0) == 0:
        out[0] = 1.0  # A
    else:
        out[0] = 2.0  # B


@planted(
    lambda rng: (4, [zeros((2,))]),
    ww("out", (0,), (0, 2), ("AB", "AB")),
)
@qnb.kernel
def even_programs_share(out):
    p = qnb.program_id(0)
    if p % 2 == 0:
        out[0] = p * 1.0  # AB
    else:
        out[1] = p * 1.0


def _scatter_input(rng):
    return 4, [np.array([2, 0, 2, 1], I32), rand(rng, (4,)), zeros((3,))]


@planted(_scatter_input, ww("out", (2,), (0, 2), ("AB", "AB"), count=1))
@qnb.kernel
def scatter_duplicate_indices(index, x, out):
    i = qnb.program_id(0)
    out[index[i]] = x[i]  # AB


@planted(
    lambda rng: (4, [rand(rng, (4,)), zeros((8,))]),
    ww("out", (1,), (0, 1), ("AB", "AB"), count=3),
)
@qnb.kernel
def element_windows_in_a_loop(x, out):
    i = qnb.program_id(0)
    for k in range(4):
        out[i + k] = x[i]  # AB


@planted(
    lambda rng: (4, [rand(rng, (4,)), zeros((4,))]),
    ww("out", (0,), (0, 1), ("AB", "AB")),
)
@qnb.kernel
def loop_count_differs(x, out):
    i = qnb.program_id(0)
    for k in range(i + 1):
        out[k] = x[i]  # AB


@planted(
    lambda rng: (4, [rand(rng, (4,)), zeros((5,)), zeros((4,))]),
    rw("out", (1,), (0, 1), ("B", "A")),
    order_dependent=True,
)
@qnb.kernel
def reads_the_next_programs_element(x, out, y):
    i = qnb.program_id(0)
    out[i] = x[i]  # A
    y[i] = out[i + 1]  # B


@planted(
    lambda rng: (4, [rand(rng, (4,))]),
    rw("s", (1,), (2, 1), ("A", "B")),
    order_dependent=True,
)
@qnb.kernel
def running_sum_in_place(s):
    i = qnb.program_id(0)
    if i > 0:
        s[i] = s[i - 1] + s[i]  # A B


@planted(
    lambda rng: (3, [rand(rng, (4,))]),
    rw("x", (1,), (0, 1), ("A", "B")),
    order_dependent=True,
)
@qnb.kernel
def neighbour_sum_in_place(x):
    i = qnb.program_id(0)
    x[i] = x[i] + x[i + 1]  # A B


@planted(
    lambda rng: (3, [np.ones((3,), I32)]),
    rw("flag", (0,), (1, 0), ("A", "B")),
)
@qnb.kernel
def condition_reads_a_stored_flag(flag):
    i = qnb.program_id(0)
    if flag[0] > 0:  # A
        flag[i] = 1  # B


@planted(
    lambda rng: (3, [np.full((3,), 2, I32), zeros((3, 4))]),
    rw("n", (0,), (1, 0), ("A", "B")),
)
@qnb.kernel
def loop_bound_from_a_stored_count(n, out):
    i = qnb.program_id(0)
    for k in range(n[0]):  # A
        out[i, k] = 1.0
    n[i] = 2  # B


@planted(
    lambda rng: (3, [zeros((1,), I32)]),
    ww("counter", (0,), (0, 1), ("B", "B")),
    rw("counter", (0,), (0, 1), ("A", "B")),
)
@qnb.kernel
def while_reads_a_shared_counter(counter):
    while counter[0] < 3:  # A
        counter[0] = counter[0] + 1  # B


@qnb.func
def bump_first(out, value):
    out[0] = value  # AB


@planted(
    lambda rng: (2, [zeros((1,))]),
    ww("out", (0,), (0, 1), ("AB", "AB"), values=(0.0, 1.0)),
    source=bump_first,
)
@qnb.kernel
def race_inside_a_func(out):
    bump_first(out, qnb.program_id(0) * 1.0)


@planted(
    lambda rng: (3, [rand(rng, (48, 16)), np.zeros((1,), np.bool_)]),
    ww("seen", (0,), (0, 1), ("AB", "AB"), values=(True, True)),
)
@qnb.kernel
def shared_bool_flag(x, seen):
    t = Tile16.load(x, qnb.program_id(0) * 16, 0)
    seen[0] = t.max() > 0.0  # AB


@planted(
    lambda rng: (2, [rand(rng, (32, 16)), zeros((32, 16))]),
    rw("out", (16, 0), (0, 1), ("A", "B"), count=256),
    order_dependent=True,
)
@qnb.kernel
def reads_a_neighbours_output(x, out):
    i = qnb.program_id(0) * 16
    below = Tile16.load(out, i + 16, 0)  # A
    (Tile16.load(x, i, 0) + below).store(out, i, 0)  # B


def marker_lines(case: Planted, marker: str) -> list[int]:
    """The absolute lines of the case's kernel (or of ``case.source``, a func it calls)
    whose comment starts with ``marker`` ("A", "B" or "AB") among its first two words."""
    import inspect

    lines, first = inspect.getsourcelines((case.source or case.kernel).__wrapped__)
    return [first + k for k, text in enumerate(lines) if _marks(text, marker)]


def _marks(text: str, marker: str) -> bool:
    if "#" not in text:
        return False
    return marker in text.split("#", 1)[1].split()[:2]
