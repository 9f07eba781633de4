"""A program's loads and stores of one array happen in program order on every backend.

On a GPU a program's elements are loaded and stored by different threads, so a store that
overlaps an earlier load or store of the same memory (by another thread) needs a barrier
before it, not only one after. Each kernel here reads or writes what another thread of the
same program touched earlier; the cpu backend runs them in program order, and so must the
others.
"""

import numpy as np
import pytest

import qnb
from tests.helpers import define

KERNELS, _ = define("""
    @qnb.kernel
    def shift_tile(x):                     # a load, then an overlapping store
        Tile16.load(x, 0, 0).store(x, 0, 1)

    @qnb.kernel
    def shift_vec(x):
        Vec16.load(x, 0).store(x, 1)

    @qnb.kernel
    def tile_then_elements(x):             # a store, then stores by thread 0
        Tile16.full(1.0, qnb.f32).store(x, 0, 0)
        x[0, 1] = 5.0
        x[3, 7] = 6.0

    @qnb.kernel
    def tile_then_tile(x):                 # a store, then an overlapping store
        Tile16.full(1.0, qnb.f32).store(x, 0, 0)
        Tile16.full(2.0, qnb.f32).store(x, 0, 1)

    @qnb.kernel
    def sliding_window(x, n: qnb.i32):     # each step stores where the last one read
        for r in range(n):
            t = Tile16.load(x, r, 0)
            (t + 1.0).store(x, r + 1, 0)

    @qnb.kernel
    def through_another_name(a, b, out):   # a and b may be one array
        Tile16.full(5.0, qnb.f32).store(b, 0, 0)
        Tile16.load(a, 1, 1).store(out, 0, 0)
    """)


def _run(backend_name, name, *args):
    with qnb.backend(backend_name):
        KERNELS[name](*args)


def test_an_overlapping_store_follows_the_load(backend_name):
    x = np.arange(1, 16 * 17 + 1, dtype=np.float32).reshape(16, 17)
    want = x.copy()
    want[:, 1:] = x[:, :16]
    _run(backend_name, "shift_tile", x)
    np.testing.assert_array_equal(x, want)

    v = np.arange(1, 21, dtype=np.float32)
    want = v.copy()
    want[1:17] = v[:16]
    _run(backend_name, "shift_vec", v)
    np.testing.assert_array_equal(v, want)


def test_stores_land_in_program_order(backend_name):
    x = np.full((16, 16), np.nan, np.float32)
    _run(backend_name, "tile_then_elements", x)
    want = np.ones((16, 16), np.float32)
    want[0, 1], want[3, 7] = 5.0, 6.0
    np.testing.assert_array_equal(x, want)

    x = np.full((16, 17), np.nan, np.float32)
    _run(backend_name, "tile_then_tile", x)
    want = np.full((16, 17), 2.0, np.float32)
    want[:, 0] = 1.0
    np.testing.assert_array_equal(x, want)


def test_a_loop_that_stores_where_it_read(backend_name):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((24, 16)).astype(np.float32)
    want = x.copy()
    for r in range(5):
        want[r + 1 : r + 17] = want[r : r + 16][: 24 - r - 1] + 1.0
    _run(backend_name, "sliding_window", x, 5)
    np.testing.assert_allclose(x, want, rtol=1e-6)


@pytest.mark.parametrize("how", ["same array", "two names"])
def test_one_array_passed_for_two_parameters_is_one_memory(backend_name, how):
    x = np.zeros((17, 17), np.float32)
    out = np.full((16, 16), np.nan, np.float32)
    if how == "same array":
        _run(backend_name, "through_another_name", x, x, out)
        want = np.zeros((16, 16), np.float32)
        want[:15, :15] = 5.0  # a[1:17, 1:17] after b[0:16, 0:16] = 5
        np.testing.assert_array_equal(out, want)
        assert (x[:16, :16] == 5.0).all() and (x[16] == 0).all() and (x[:, 16] == 0).all()
    else:  # two distinct arrays: a is untouched
        a = np.ones((17, 17), np.float32)
        _run(backend_name, "through_another_name", a, x, out)
        np.testing.assert_array_equal(out, np.ones((16, 16), np.float32))


VIEWS, _ = define("""
    @qnb.kernel
    def element_through_two(x, y):
        y[0] = 42.0
        y[1] = x[0]
    """)


def test_a_view_of_the_whole_array_is_the_same_memory(backend_name):
    a = np.zeros(4, np.float32)
    with qnb.backend(backend_name):
        VIEWS["element_through_two"](a, a[:])
    np.testing.assert_array_equal(a, [42, 42, 0, 0])


def test_partly_overlapping_arrays_are_refused_on_the_gpus(backend_name):
    # Two copies on a device cannot stay one memory: the GPU backends say so (by the
    # parameter) instead of losing a store; the cpu backend runs it.
    a = np.zeros(6, np.float32)
    if backend_name == "cpu":
        VIEWS["element_through_two"](a[:-1], a[1:])
        np.testing.assert_array_equal(a, [0, 42, 0, 0, 0, 0])
        return
    overlap = "'x' and 'y' are overlapping parts"
    with pytest.raises(qnb.BackendError, match=overlap) as info, qnb.backend(backend_name):
        VIEWS["element_through_two"](a[:-1], a[1:])
    assert info.value.lineno is not None  # at the kernel's def line (parameter y)
    assert (a == 0).all()
