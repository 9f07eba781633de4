"""i32 bitwise operators and the math functions on every backend, against NumPy itself.

- ``& | ^ ~ << >>`` on i32 tiles, vecs and scalars with every kind of shift count NumPy
  defines and C++/WGSL do not (-1, 0, 31, 32, 40, INT_MIN, INT_MAX), and ``& | ^ ~`` on
  bool masks; exact.
- ``exp2, log2, sin, cos, tanh, floor, ceil`` at every float dtype a backend runs, with
  NaN and ±inf through them; the tolerances below are per dtype, in ulps of the dtype
  (measured on lavapipe: exp2 3 ulps, log2 within WGSL's 2**-21 absolute bound near 1,
  sin/cos 1.4 ulps, tanh 2 ulps through qnb's own WGSL tanh; lavapipe's was 62,598).
- Refusals (floats in bit operations) raise QnbTypeError at the user's line.

(Every suite kernel, ``bitwise_i32``, ``scalar_bitwise`` and ``math_functions`` included,
also runs against cpu in test_differential.py; every IR op at every dtype in
cuda_ir_cases.py.)
"""

from __future__ import annotations

import runpy

import numpy as np
import pytest

import qnb
from qnb import Tile16
from tests.helpers import skip_unless_dtype_runs

COUNTS = np.array(
    [-1, 0, 31, 32, 40, -(2**31), 2**31 - 1, 1, 5, -33, 33, 16, 2, 30, 7, 64], np.int32
)


def _run(backend, kernel, *args):
    with qnb.backend(backend):
        kernel(*args)


@qnb.kernel
def shifts_and_masks(x: qnb.Array[qnb.i32, 2], counts: qnb.Array[qnb.i32, 1], out, vout):
    t = Tile16.load(x, 0, 0)
    c = qnb.Vec16.load(counts, 0)
    for j in qnb.static(range(16)):
        k = counts[j]
        (t << k).store(out[j], 0, 0)
        (t >> k).store(out[16 + j], 0, 0)
    v = t.row(1)
    (v << c).store(vout, 0)
    (v >> c).store(vout, 16)
    (t & 0x0F0F0F0F | (t ^ -1) & ~0x0F0F0F0F).store(out[34], 0, 0)
    (~t).store(out[35], 0, 0)


def test_shifts_match_numpy_for_every_count(backend_name):
    rng = np.random.default_rng(16)
    x = rng.integers(-(2**31), 2**31, size=(16, 16), dtype=np.int64).astype(np.int32)
    x[0, :4] = [-1, 1, -(2**31), 2**31 - 1]
    out = np.full((36, 16, 16), -12345, np.int32)
    vout = np.full(32, -12345, np.int32)
    _run(backend_name, shifts_and_masks, x, COUNTS, out, vout)
    for j, k in enumerate(COUNTS):
        np.testing.assert_array_equal(out[j], x << k, err_msg=f"x << {k}")
        np.testing.assert_array_equal(out[16 + j], x >> k, err_msg=f"x >> {k}")
    np.testing.assert_array_equal(vout[:16], x[1] << COUNTS)
    np.testing.assert_array_equal(vout[16:], x[1] >> COUNTS)
    np.testing.assert_array_equal(out[34], x & 0x0F0F0F0F | (x ^ -1) & ~0x0F0F0F0F)
    np.testing.assert_array_equal(out[35], ~x)
    # what the contract names: x << 32 is 0, x >> 40 is 0 or -1, a negative count like 40
    assert (out[3] == 0).all() and set(np.unique(out[16 + 4])) <= {0, -1}


def test_numpy_reads_a_negative_count_as_a_huge_one():
    # The rule every backend follows (ir.SHIFT_OPS), pinned to NumPy itself.
    x = np.array([5, -5], np.int32)
    assert (x << np.int32(-1)).tolist() == [0, 0]
    assert (x >> np.int32(-1)).tolist() == [0, -1]


@qnb.kernel
def scalar_shifts(x, counts, out):
    p = qnb.program_id(0)
    v = x[p]
    c = counts[p]
    out[p, 0] = v << c
    out[p, 1] = v >> c
    out[p, 2] = (v & c) ^ (v | ~c)


def test_scalar_shifts(backend_name):
    x = np.random.default_rng(3).integers(-(2**31), 2**31, 16, dtype=np.int64).astype(np.int32)
    out = np.full((16, 3), -12345, np.int32)
    _run(backend_name, scalar_shifts[16], x, COUNTS, out)
    np.testing.assert_array_equal(out[:, 0], x << COUNTS)
    np.testing.assert_array_equal(out[:, 1], x >> COUNTS)
    np.testing.assert_array_equal(out[:, 2], (x & COUNTS) ^ (x | ~COUNTS))


@qnb.kernel
def masks(a, b, out):
    m = Tile16.load(a, 0, 0) > 0
    n = Tile16.load(b, 0, 0) > 0
    (m & n).store(out[0], 0, 0)
    (m | n).store(out[1], 0, 0)
    (m ^ n).store(out[2], 0, 0)
    (~m).store(out[3], 0, 0)
    (~m ^ (n & True)).store(out[4], 0, 0)


def test_bool_masks(backend_name):
    rng = np.random.default_rng(5)
    a, b = rng.standard_normal((2, 16, 16)).astype(np.float32)
    out = np.zeros((5, 16, 16), bool)
    _run(backend_name, masks, a, b, out)
    m, n = a > 0, b > 0
    for got, want in zip(out, [m & n, m | n, m ^ n, ~m, ~m ^ (n & True)]):
        np.testing.assert_array_equal(got, want)


def test_compile_time_bits_follow_python():
    @qnb.kernel
    def folded(out):
        out[0] = (1 << 4) | 3
        out[1] = ~5 & 0xFF
        out[2] = -17 >> 2

    out = np.zeros(3, np.int32)
    folded(out)
    assert out.tolist() == [19, 250, -5]


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("t << 2", "the operator << needs i32 operands, not f32"),
        ("t & t", "the operator & needs i32 or bool operands, not f32"),
        ("~t", "~ needs an i32 or bool operand, not f32"),
        ("i >> t", "the operator >> needs i32 operands, not f32"),
    ],
)
def test_bits_of_floats_are_refused_at_the_users_line(tmp_path, expression, message):
    source = (
        "import qnb\n"
        "@qnb.kernel\n"
        "def k(x, out):\n"
        "    t = qnb.Tile16.load(x, 0, 0)\n"
        "    i = qnb.program_id(0)\n"
        f"    r = {expression}\n"
        "    t.store(out, 0, 0)\n"
    )
    path = tmp_path / "bits_user.py"
    path.write_text(source)
    namespace = runpy.run_path(str(path))
    x = np.ones((16, 16), np.float32)
    with pytest.raises(qnb.QnbTypeError, match=message) as error:
        namespace["k"](x, x.copy())
    assert (error.value.filename, error.value.lineno) == (str(path), 6)


# ----------------------------------------------------------------------------- math

MATH = {
    "exp2": np.exp2,
    "log2": np.log2,
    "sin": np.sin,
    "cos": np.cos,
    "tanh": np.tanh,
    "floor": np.floor,
    "ceil": np.ceil,
}
SPECIALS = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 0.5, 1e-3, -1e-3, 20.0, -20.0, 100.0]
# (ulps, absolute) per dtype: the GPU backends' measured errors with room to spare; an
# ulp is the dtype's spacing at the expected value.
ULPS = {np.float16: (1, 0.0), np.float32: (4, 2.0**-21), np.float64: (4, 0.0)}


@qnb.kernel
def math_all(x, out, vecs, scalars):
    t = Tile16.load(x, 0, 0)
    qnb.exp2(t).store(out[0], 0, 0)
    qnb.log2(t).store(out[1], 0, 0)
    qnb.sin(t).store(out[2], 0, 0)
    qnb.cos(t).store(out[3], 0, 0)
    qnb.tanh(t).store(out[4], 0, 0)
    qnb.floor(t).store(out[5], 0, 0)
    qnb.ceil(t).store(out[6], 0, 0)
    v = t.row(0)
    fs = [qnb.exp2(v), qnb.log2(v), qnb.sin(v), qnb.cos(v), qnb.tanh(v), qnb.floor(v), qnb.ceil(v)]
    for k in qnb.static(range(7)):
        fs[k].store(vecs, 16 * k)
    s = t[0, 1]
    scalars[0] = qnb.exp2(s)
    scalars[1] = qnb.log2(s)
    scalars[2] = qnb.sin(s)
    scalars[3] = qnb.cos(s)
    scalars[4] = qnb.tanh(s)
    scalars[5] = qnb.floor(s)
    scalars[6] = qnb.ceil(s)


def _close(got, want, dtype, name):
    ulps, absolute = ULPS[dtype]
    got, want = got.astype(np.float64), want.astype(np.float64)
    same_special = (np.isnan(got) == np.isnan(want)) & (np.isinf(want) <= (got == want))
    assert same_special.all(), (
        f"{name}: NaN/inf differ: {got[~same_special]} vs {want[~same_special]}"
    )
    finite = np.isfinite(want)
    spacing = np.spacing(np.abs(want[finite]).astype(dtype)).astype(np.float64)
    error = np.abs(got[finite] - want[finite])
    bad = error > ulps * spacing + absolute
    assert not bad.any(), f"{name}: {got[finite][bad][:5]} vs {want[finite][bad][:5]}"


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16], ids=lambda d: d.__name__)
def test_math_functions_match_numpy(backend_name, dtype):
    skip_unless_dtype_runs(backend_name, np.dtype(dtype))
    rng = np.random.default_rng(7)
    x = rng.uniform(-6, 6, (16, 16)).astype(dtype)
    x[x == 0] = 0.25
    x[2, : len(SPECIALS)] = SPECIALS
    x[0, : len(SPECIALS)] = SPECIALS  # the vec and the scalar meet the specials too
    x[3] = rng.uniform(-200, 200, 16)  # arguments far from 0
    out = np.full((7, 16, 16), 7.0, dtype)
    vecs = np.full(7 * 16, 7.0, dtype)
    scalars = np.full(7, 7.0, dtype)
    if backend_name == "wgpu" and dtype is np.float64:
        with pytest.raises(qnb.BackendError, match="WGSL has no f64"):
            _run(backend_name, math_all, x, out, vecs, scalars)
        return
    _run(backend_name, math_all, x, out, vecs, scalars)
    with np.errstate(all="ignore"):
        for k, (name, fn) in enumerate(MATH.items()):
            want = fn(x)
            _close(out[k], want, dtype, f"{name} tile on {backend_name}")
            _close(vecs[16 * k : 16 * k + 16], want[0], dtype, f"{name} vec")
            _close(scalars[k : k + 1], want[0, 1:2], dtype, f"{name} scalar")


def test_math_on_integers_computes_in_f32_and_folds_constants():
    @qnb.kernel
    def ints(x, out):
        t = Tile16.load(x, 0, 0)
        qnb.exp2(t).store(out[0], 0, 0)
        out[1, 0, 0] = qnb.exp2(3) + qnb.floor(2.5) + qnb.ceil(-0.5) + qnb.log2(8)

    x = np.arange(256, dtype=np.int32).reshape(16, 16) % 20
    out = np.zeros((2, 16, 16), np.float32)
    ints(x, out)
    np.testing.assert_array_equal(out[0], np.exp2(x.astype(np.float32)))
    assert out[1, 0, 0] == 8.0 + 2.0 - 0.0 + 3.0
    assert "exp2" in ints.source("ir", x, out) and "Cast" in ints.source("ir", x, out)


def test_math_of_a_bool_is_refused():
    @qnb.kernel
    def bad(x, out):
        m = Tile16.load(x, 0, 0) > 0
        qnb.sin(m).store(out, 0, 0)

    x = np.ones((16, 16), np.float32)
    with pytest.raises(qnb.QnbTypeError, match="sin is not defined for bool values"):
        bad(x, x.copy())


def test_the_generated_code_is_readable():
    k = shifts_and_masks
    args = (np.zeros((16, 16), np.int32), COUNTS, np.zeros((36, 16, 16), np.int32), COUNTS)
    assert "qnb::shl_(" in k.source("cuda", *args) and "qnb::shr_(" in k.source("cuda", *args)
    wgsl = k.source("wgsl", *args)
    assert "fn qnb_shl_i32" in wgsl and "u32(c) >= 32u" in wgsl
    x = np.zeros((16, 16), np.float32)
    m = (x, np.zeros((7, 16, 16), np.float32), np.zeros(112, np.float32), np.zeros(7, np.float32))
    assert "fn qnb_tanh_f32" in math_all.source("wgsl", *m)
    cuda = math_all.source("cuda", *m)
    assert "qnb::tanh_(" in cuda and "__tanhf" not in cuda  # precise functions, not intrinsics
