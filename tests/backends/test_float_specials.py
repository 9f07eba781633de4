"""NaN, infinities and signed zeros through the ops whose GPU spellings leave them
undefined: every backend gives NumPy's answer (README: "Every backend computes the same
thing").
"""

import numpy as np
import pytest

import qnb
from tests.helpers import define, skip_unless_dtype_runs

KERNELS, _ = define("""
    @qnb.kernel
    def power(a, b, out):
        (Tile16.load(a, 0, 0) ** Tile16.load(b, 0, 0)).store(out, 0, 0)

    @qnb.kernel
    def compare(a, b, out):
        x, y = Tile16.load(a, 0, 0), Tile16.load(b, 0, 0)
        (x == y).astype(qnb.i32).store(out[0], 0, 0)
        (x != y).astype(qnb.i32).store(out[1], 0, 0)
        (x < y).astype(qnb.i32).store(out[2], 0, 0)
        (x <= y).astype(qnb.i32).store(out[3], 0, 0)
        (x > y).astype(qnb.i32).store(out[4], 0, 0)
        (x >= y).astype(qnb.i32).store(out[5], 0, 0)
        out[6, 0, 0] = 1 if a[0, 0] != b[0, 0] else 0   # scalar comparisons too
        out[6, 0, 1] = 1 if a[0, 0] == b[0, 0] else 0
    """)

# Every pair of these is a case of C99's pow (Annex F), which NumPy's is.
SPECIALS = [0.0, -0.0, 1.0, -1.0, 2.0, -2.0, 0.5, -0.5, np.inf, -np.inf, np.nan, 3.0, -3.0]
SPECIALS += [2.5, -2.5, 1e-3]


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64])
def test_power_of_special_values_is_numpys(backend_name, dtype):
    skip_unless_dtype_runs(backend_name, dtype)
    a, b = (x.astype(dtype) for x in np.meshgrid(SPECIALS, SPECIALS, indexing="ij"))
    out = np.full((16, 16), 7, dtype)
    if backend_name == "wgpu" and dtype == np.float64:  # refused, by name, at compile time
        with pytest.raises(qnb.BackendError, match="WGSL has no f64"), qnb.backend("wgpu"):
            KERNELS["power"](a, b, out)
        return
    with qnb.backend(backend_name):
        KERNELS["power"](a, b, out)
    with np.errstate(all="ignore"):
        want = np.power(a, b)
    same_sign = np.signbit(out) == np.signbit(want)
    close = np.isclose(out, want, rtol=2e-3 if dtype == np.float16 else 1e-5) & same_sign
    wrong = ~(close | (np.isnan(out) & np.isnan(want)))
    assert not wrong.any(), [
        (float(a[i, j]), float(b[i, j]), float(out[i, j]), float(want[i, j]))
        for i, j in zip(*np.nonzero(wrong))
    ]


def test_comparisons_with_nan(backend_name):
    rng = np.random.default_rng(5)
    a = rng.standard_normal((16, 16)).astype(np.float32)
    b = a.copy()
    b[::2] = rng.standard_normal((8, 16))
    a[:, :5] = np.nan  # NaN on the left, on the right, on both
    b[:, 3:8] = np.nan
    out = np.full((7, 16, 16), 7, np.int32)
    with qnb.backend(backend_name):
        KERNELS["compare"](a, b, out)
    ops = [np.equal, np.not_equal, np.less, np.less_equal, np.greater, np.greater_equal]
    for k, op in enumerate(ops):
        np.testing.assert_array_equal(out[k], op(a, b).astype(np.int32), err_msg=op.__name__)
    assert (out[6, 0, 0], out[6, 0, 1]) == (1, 0)  # NaN != x holds, NaN == x does not


DIVMOD, _ = define("""
    @qnb.kernel
    def divmod_tiles(a, b, out):
        x, y = Tile16.load(a, 0, 0), Tile16.load(b, 0, 0)
        (x // y).store(out[0], 0, 0)
        (x % y).store(out[1], 0, 0)

    @qnb.kernel
    def negated_fills(out):
        (-Tile16.full(-0.5, qnb.f32)).store(out, 0, 0)
        out[0, 0] = -(-2.5)
    """)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_floor_division_and_modulo_keep_numpys_signed_zeros(backend_name, dtype):
    skip_unless_dtype_runs(backend_name, dtype)
    values = [0.0, -0.0, 1.5, -1.5, 3.0, -3.0, 4.5, -4.5, 0.75, -0.75, 6.0, -6.0, 1.0, -1.0]
    values += [2.0, -2.0]
    a, b = (x.astype(dtype) for x in np.meshgrid(values, values, indexing="ij"))
    b[b == 0] = 1.5  # (division by zero is its own test)
    out = np.full((2, 16, 16), 7, dtype)
    with qnb.backend(backend_name):
        DIVMOD["divmod_tiles"](a, b, out)
    for got, want in ((out[0], np.floor_divide(a, b)), (out[1], np.mod(a, b))):
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


def test_negating_a_negative_literal(backend_name):
    out = np.full((16, 16), np.nan, np.float32)
    with qnb.backend(backend_name):
        DIVMOD["negated_fills"](out)
    want = np.full((16, 16), 0.5, np.float32)
    want[0, 0] = 2.5
    np.testing.assert_array_equal(out, want)
