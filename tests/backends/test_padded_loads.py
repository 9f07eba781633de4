"""``Tile16.load(arr, row, col, *, other=0, dtype=None)`` and ``Vec16.load(arr, start, *,
other=0)``: the elements past an array's edge (before its first row or column too) are
``other``, on every backend, with no error. The values themselves, across programs and
dtypes, are checked by the suite's ``padded_loads`` case (tests/suite.py) on every backend
against NumPy; this file holds what that case cannot: debug mode, the window forms that
still refuse a negative bound, and the errors of a misused ``other=``/``dtype=``."""

import math

import numpy as np
import pytest

import qnb
from tests.helpers import define

KERNELS, _ = define(
    """
    @qnb.kernel
    def stencil_corner(img, out, r: qnb.i32, c: qnb.i32):
        Tile16.load(img, r, c, other=-math.inf).store(out, 0, 0)

    @qnb.kernel
    def vec_before(line, out, start: qnb.i32, fill: qnb.f32):
        Vec16.load(line, start, other=fill).store(out, 0)

    @qnb.kernel
    def int_other(img, out, r: qnb.i32):
        Tile16.load(img, r, 0, other=-1).store(out, 0, 0)

    @qnb.kernel
    def window_from_before(img, out, r: qnb.i32):
        t = Tile16.zeros(img.dtype)
        t.load_(img, r, r + 16, 0, 16)
        t.store(out, 0, 0)
    """,
    {"math": math},
)


def _expected(x, r, c, other):
    t = np.full((16, 16), other, x.dtype)
    rows = slice(max(r, 0), min(r + 16, x.shape[0]))
    cols = slice(max(c, 0), min(c + 16, x.shape[1]))
    t[rows.start - r : rows.stop - r, cols.start - c : cols.stop - c] = x[rows, cols]
    return t


@pytest.mark.parametrize("debug", [False, True])
@pytest.mark.parametrize(("r", "c"), [(-3, -5), (-16, 0), (-40, -40), (10, 12)])
def test_a_load_before_the_first_row_is_no_error(backend_name, debug, r, c):
    x = np.random.default_rng(3).uniform(1, 2, (20, 21)).astype(np.float32)
    out = np.full((16, 16), np.nan, np.float32)
    kernel = qnb.kernel(KERNELS["stencil_corner"].__wrapped__, debug=True) if debug else None
    with qnb.backend(backend_name):
        (kernel or KERNELS["stencil_corner"])(x, out, r, c)
    np.testing.assert_array_equal(out, _expected(x, r, c, -np.inf))


@pytest.mark.parametrize(("r", "c"), [(-16, 0), (0, -16), (-16, -16), (16, 16)])
def test_a_whole_block_before_the_array_is_other_not_the_last_block(backend_name, r, c):
    # 32×32: a load at -16 is block-aligned (cpu's whole-block path must not wrap to -1)
    x = np.random.default_rng(6).uniform(1, 2, (32, 32)).astype(np.float32)
    out = np.full((16, 16), np.nan, np.float32)
    with qnb.backend(backend_name):
        KERNELS["stencil_corner"](x, out, r, c)
    np.testing.assert_array_equal(out, _expected(x, r, c, -np.inf))


@pytest.mark.parametrize("debug", [False, True])
@pytest.mark.parametrize("start", [-5, -16, -30, 12])
def test_a_vec_load_before_the_first_element_is_no_error(backend_name, debug, start):
    line = np.random.default_rng(5).uniform(1, 2, 20).astype(np.float32)
    out = np.full(16, -7.0, np.float32)
    kernel = KERNELS["vec_before"]
    if debug:
        kernel = qnb.kernel(kernel.__wrapped__, debug=True)
    with qnb.backend(backend_name):
        kernel(line, out, start, np.nan)
    want = [line[start + i] if 0 <= start + i < 20 else np.nan for i in range(16)]
    np.testing.assert_array_equal(out, np.array(want, np.float32))


def test_other_on_an_integer_array(backend_name):
    x = np.random.default_rng(4).integers(1, 100, (20, 16)).astype(np.int32)
    out = np.full((16, 16), -12345, np.int32)
    with qnb.backend(backend_name):
        KERNELS["int_other"](x, out, -6)
    np.testing.assert_array_equal(out, _expected(x, -6, 0, -1))


def test_a_window_load_with_a_negative_bound_still_raises_on_cpu():
    x = np.ones((20, 16), np.float32)
    with qnb.backend("cpu"), pytest.raises(qnb.QnbIndexError, match="negative window bound"):
        KERNELS["window_from_before"](x, np.zeros((16, 16), np.float32), -2)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            "Tile16.load(x, 0, 0, 1.0)",
            r"takes 3 positional arguments .* other and dtype are keyword",
        ),
        ("Tile16.load(x, 0, 0, other=x)", r"other=\.\.\.\) takes a scalar"),
        ("Tile16.load(x, 0, 0, other='a')", r"other=\.\.\.\) takes a number, got 'a'"),
        ("Tile16.load(x, 0, 0, dtype=3)", r"expected a dtype such as qnb.f32, got 3"),
        ("Tile16.load(x, 0, 0, others=1)", r"unexpected keyword argument 'others'"),
        ("Tile16.load(x, 0, 0, other=Tile16.zeros())", r"other=\.\.\.\) takes a scalar"),
        ("Vec16.load(x, 0, 16, 2, other=1.0)", r"other= is for Vec16.load\(arr, start"),
        ("Vec16.load(x, 0, stop=1.0)", r"unexpected keyword argument 'stop'"),
    ],
)
def test_a_misused_other_or_dtype_is_a_type_error_at_its_line(call, message):
    scope, filename = define(f"""
        @qnb.kernel
        def misuse(x: qnb.Array[qnb.f32, 2], out: qnb.Array[qnb.f32, 2]):
            t = {call}
        """)
    with qnb.backend("cpu"), pytest.raises(qnb.QnbTypeError, match=message) as error:
        scope["misuse"](np.zeros((16, 16), np.float32), np.zeros((16, 16), np.float32))
    assert (error.value.filename, error.value.lineno) == (filename, 4)
