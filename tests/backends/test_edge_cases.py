"""Edges every backend must treat alike.

- Python's ``range`` at the ends of the i32 range: a step that would carry the counter
  past 2**31 - 1 (or below -2**31) ends the loop, as in Python, instead of wrapping
  around and going on.
- Arrays with no elements: a window over one reads nothing (zeros, or the tile's own
  values for ``load_``) and writes nothing.
"""

import numpy as np
import pytest

import qnb
from tests.helpers import define

COUNT = """
    @qnb.kernel
    def count(out, start: qnb.i32, stop: qnb.i32, step: qnb.i32):
        n = 0
        last = 0
        for i in range(start, stop, step):
            n += 1
            last = i
            if n > 40:  # a wrapped counter would go on: stop it, so the test ends
                break
        out[0] = N_OUT
        out[1] = last
    """
# The same loop in a kernel of scalars only (a thread per program on a GPU) and in one
# that passes n through a tile (a block per program).
COUNTS = {
    "solo": define(COUNT.replace("N_OUT", "n"))[0]["count"],
    "block": define(COUNT.replace("N_OUT", "Tile16.full(n, qnb.i32)[3, 3]"))[0]["count"],
}

BIG = 2**31 - 1
CASES = [
    (BIG - 3, BIG, 5),  # one step, then past the top
    (BIG - 10, BIG, 4),
    (-BIG - 1 + 3, -BIG - 1, -5),  # one step, then past the bottom
    (-BIG, -BIG - 1, -1),
    (0, BIG, BIG),  # the second step lands exactly on 2**31 - 1 + 1
    (5, -5, -3),  # ordinary ranges still count
    (0, 7, 2),
]


@pytest.mark.parametrize("layout", sorted(COUNTS))
@pytest.mark.parametrize(("start", "stop", "step"), CASES)
def test_range_near_the_ends_of_i32(backend_name, start, stop, step, layout):
    values = list(range(start, stop, step))
    out = np.full(2, -7, np.int32)
    with qnb.backend(backend_name):
        COUNTS[layout](out, start, stop, step)
    assert out.tolist() == [len(values), values[-1] if values else 0]


EMPTY, _ = define("""
    @qnb.kernel
    def load_tile(x, y):
        Tile16.load(x, 0, 0).store(y, 0, 0)

    @qnb.kernel
    def load_into(x, y):
        t = Tile16.full(3.0, qnb.f32)
        t[:] = x[0:16, 0:16]
        t.store(y, 0, 0)

    @qnb.kernel
    def load_vec(v, y):
        Vec16.load(v, 0).store(y, 0)

    @qnb.kernel
    def load_column(x, y):
        Vec16.load(x, 0, 16, 0).store(y, 0)

    @qnb.kernel
    def store_tile(x, y):
        Tile16.load(y, 0, 0).store(x, 0, 0)
        x[0:16, 0:16] = Tile16.load(y, 0, 0)
    """)


@pytest.mark.parametrize(
    ("name", "empty", "out_shape", "want"),
    [
        ("load_tile", (0, 16), (16, 16), 0.0),
        ("load_tile", (16, 0), (16, 16), 0.0),
        ("load_into", (16, 0), (16, 16), 3.0),
        ("load_vec", (0,), (16,), 0.0),
        ("load_column", (0, 3), (16,), 0.0),
    ],
)
def test_loads_from_an_empty_array(backend_name, name, empty, out_shape, want):
    out = np.full(out_shape, np.nan, np.float32)
    with qnb.backend(backend_name):
        EMPTY[name](np.zeros(empty, np.float32), out)
    assert (out == want).all()


def test_stores_to_an_empty_array(backend_name):
    x = np.zeros((0, 16), np.float32)
    y = np.random.default_rng(0).standard_normal((16, 16)).astype(np.float32)
    with qnb.backend(backend_name):
        EMPTY["store_tile"](x, y)
    assert x.shape == (0, 16)


@pytest.mark.filterwarnings("ignore::PendingDeprecationWarning")  # np.matrix
def test_an_ndarray_subclass_is_its_memory(backend_name):
    # np.matrix indexes differently from an ndarray; qnb reads and writes its memory.
    x = np.asmatrix(np.random.default_rng(1).standard_normal((16, 16)).astype(np.float32))
    y = np.asmatrix(np.full((16, 16), np.nan, np.float32))
    with qnb.backend(backend_name):
        EMPTY["load_tile"](x, y)
    np.testing.assert_array_equal(np.asarray(y), np.asarray(x))


POWER, _ = define("""
    @qnb.kernel
    def int_power(a, b, out):
        (Tile16.load(a, 0, 0) ** Tile16.load(b, 0, 0)).store(out, 0, 0)
        out[0, 1] = a[0, 1] ** b[0, 1]  # the scalar op too
    """)


def test_integer_power_wraps_and_truncates(backend_name):
    # i32 ** i32 is i32 and wraps (NumPy's for exponents >= 0); a negative exponent gives
    # the true power truncated toward zero: ±1 for a base of ±1, else 0.
    bases = [0, 1, -1, 2, -2, 3, 7, -7, 46341, 65536, 2**31 - 1, -(2**31), 5, 10, -3, 1]
    exponents = [-3, -2, -1, 0, 1, 2, 3, 9, 10, 20, 31, 32, -(2**31), 2**31 - 1, 4, 5]
    a, b = (np.array(x, np.int64) for x in np.meshgrid(bases, exponents, indexing="ij"))

    def truth(x, y):
        if y < 0:
            return (-1 if y % 2 else 1) if x == -1 else int(x == 1)
        return pow(int(x), int(y), 2**32)

    want = np.vectorize(truth)(a, b).astype(np.uint32).view(np.int32)
    out = np.full((16, 16), 7, np.int32)
    with qnb.backend(backend_name):
        POWER["int_power"](a.astype(np.int32), b.astype(np.int32), out)
    np.testing.assert_array_equal(out, want)


FILLS, _ = define("""
    @qnb.kernel
    def int_fills(out):
        Tile16.full(3.9e9, qnb.i32).store(out[0], 0, 0)
        Tile16.full(float("inf"), qnb.i32).store(out[1], 0, 0)
        Tile16.full(float("nan"), qnb.i32).store(out[2], 0, 0)
        Tile16.full(-7.9, qnb.i32).store(out[3], 0, 0)
    """)


def test_a_float_fill_of_an_int_tile_converts_as_a_cast(backend_name):
    # Truncate toward zero, saturate, NaN -> 0: as .astype(qnb.i32) does at run time.
    out = np.full((4, 16, 16), 7, np.int32)
    with qnb.backend(backend_name):
        FILLS["int_fills"](out)
    assert [int(out[k, 3, 3]) for k in range(4)] == [2**31 - 1, 2**31 - 1, 0, -7]
    assert (out == out[:, :1, :1]).all()


BRANCH_STORES, _ = define("""
    @qnb.kernel
    def same_store_in_a_branch(m, v):
        i = qnb.program_id(0)
        if i == 1:  # the value and the window are the same in every program
            Tile16.full(5.0, qnb.f32).store(m, 3, 2)
            Vec16.full(6.0, qnb.f32).store(v, 2)
    """)


def test_a_store_the_same_in_every_program_inside_a_branch(backend_name):
    m = np.zeros((20, 20), np.float32)
    v = np.zeros(20, np.float32)
    with qnb.backend(backend_name):
        BRANCH_STORES["same_store_in_a_branch"][3](m, v)
    want_m, want_v = np.zeros_like(m), np.zeros_like(v)
    want_m[3:19, 2:18], want_v[2:18] = 5.0, 6.0
    np.testing.assert_array_equal(m, want_m)
    np.testing.assert_array_equal(v, want_v)


PARAMS, _ = define("""
    @qnb.kernel
    def reassigned(x, n: qnb.i32, s: qnb.f32):
        n = min(n, x.shape[0])
        for i in range(n):
            x[i] = s
        s += 0.5
        x[7] = s
    """)


def test_a_scalar_parameter_the_kernel_reassigns_starts_as_passed(backend_name):
    # (the cpu backend, the oracle, started such a parameter at 0)
    x = np.zeros(8, np.float32)
    with qnb.backend(backend_name):
        PARAMS["reassigned"](x, 5, 2.0)
    np.testing.assert_array_equal(x, [2, 2, 2, 2, 2, 0, 0, 2.5])
