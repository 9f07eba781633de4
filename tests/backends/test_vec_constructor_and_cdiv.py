"""Two small promises of the contract, in kernels on every backend: ``Vec[N](dtype)`` is a
constructor as ``Tile[M, N](dtype)`` is (the same as ``zeros``), and ``qnb.cdiv(a, b)`` is
``-(-a // b)`` on ints (compile-time where both are, a runtime i32 otherwise), checked
against Python's own formula on negative values too. (The host's ``qnb.cdiv``, its errors
and NumPy taking qnb dtypes: tests/test_dtypes_and_cdiv.py.)"""

import re

import numpy as np
import pytest

import qnb
from tests.helpers import define

KERNELS, _ = define(
    """
    @qnb.kernel
    def vec_constructors(x, out32, out8, out_int, zeros):
        # Vec[N](dtype), Vec16(dtype) and Vec[N]() (f32) at three shapes, each plus data
        (Vec[32](qnb.f32) + Vec[32].load(x, 0)).store(out32, 0)
        (Vec[8]() + Vec[8].load(x, 32) * 2.0).store(out8, 0)
        (Vec16(qnb.i32) + Vec16.load(x, 40).astype(qnb.i32)).store(out_int, 0)
        Vec[64](dtype=qnb.f32).store(zeros, 0)

    @qnb.kernel
    def runtime_cdiv(a, b, out):
        i = qnb.program_id(0)
        out[i, 0] = qnb.cdiv(a[i], b[i])  # both runtime
        out[i, 1] = qnb.cdiv(a[i], 8)  # a compile-time divisor
        out[i, 2] = qnb.cdiv(-37, b[i])  # a compile-time dividend

    @qnb.kernel
    def compile_time_cdiv(out, n: qnb.Template, tile: qnb.Template):
        blocks = qnb.cdiv(n, tile)  # a compile-time value: it sizes a vec, unrolls a loop
        v = Vec[qnb.static(1 << (blocks - 1).bit_length())](qnb.i32) + blocks
        v.store(out, 0)
        for k in qnb.static(range(qnb.cdiv(n, tile))):
            out[8 + k] = k
    """,
    {"Vec": qnb.Vec},
)

RNG = np.random.default_rng(35)


def test_vec_constructors_are_zeros_of_their_dtype_and_shape(backend_name):
    x = RNG.uniform(1.0, 40.0, 64).astype(np.float32)  # non-zero, whole-number parts vary
    out32, out8, zeros = (np.full(n, np.nan, np.float32) for n in (32, 8, 64))
    out_int = np.full(16, -12345, np.int32)
    with qnb.backend(backend_name):
        KERNELS["vec_constructors"](x, out32, out8, out_int, zeros)
    np.testing.assert_array_equal(out32, x[:32])
    np.testing.assert_array_equal(out8, x[32:40] * 2)
    np.testing.assert_array_equal(out_int, x[40:56].astype(np.int32))
    np.testing.assert_array_equal(zeros, np.zeros(64, np.float32))


def test_vec_constructors_type_as_zeros_does():
    text = KERNELS["vec_constructors"].source(
        "ir",
        *(np.zeros(n, d) for n, d in ((64, "f4"), (32, "f4"), (8, "f4"), (16, "i4"), (64, "f4"))),
    )
    for typed in ("TileFill<Vec32[f32]>", "TileFill<Vec[8][f32]>", "TileFill<Vec16[i32]>"):
        assert f"{typed}('full', 0" in text, text
    assert "TileFill<Vec[64][f32]>" in text


PAIRS = [
    (a, b)
    for a in (-37, -16, -15, -1, 0, 1, 15, 16, 17, 37, 2**31 - 1)
    for b in (-8, -3, -1, 1, 3, 8, 16)
]


def test_runtime_cdiv_is_pythons_formula_on_every_sign(backend_name):
    a = np.array([p[0] for p in PAIRS], np.int32)
    b = np.array([p[1] for p in PAIRS], np.int32)
    out = np.full((len(PAIRS), 3), -12345, np.int32)
    with qnb.backend(backend_name):
        KERNELS["runtime_cdiv"][len(PAIRS)](a, b, out)
    expected = [[-(-x // y), -(-x // 8), -(37 // y)] for x, y in PAIRS]
    np.testing.assert_array_equal(out, np.array(expected, np.int32))


@pytest.mark.parametrize(("n", "tile"), [(37, 8), (32, 8), (1, 16)])
def test_compile_time_cdiv_sizes_a_vec_and_a_static_loop(backend_name, n, tile):
    blocks = -(-n // tile)
    out = np.full(8 + blocks, -12345, np.int32)
    width = 1 << (blocks - 1).bit_length()
    with qnb.backend(backend_name):
        KERNELS["compile_time_cdiv"](out, n, tile)
    np.testing.assert_array_equal(out[:width], np.full(width, blocks))
    np.testing.assert_array_equal(out[8:], np.arange(blocks))
    if width < 8:
        assert (out[width:8] == -12345).all()  # nothing past the vec was written


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        ("qnb.cdiv(n, 2.5)", qnb.QnbTypeError, "qnb.cdiv takes ints, got 2.5"),
        ("qnb.cdiv(x[0], 2)", qnb.QnbTypeError, "qnb.cdiv takes ints, got a f32 value"),
        ("qnb.cdiv(n, True)", qnb.QnbTypeError, "qnb.cdiv takes ints, got True"),
        ("qnb.cdiv(n, 0)", qnb.QnbZeroDivisionError, "the divisor is 0"),
        ("qnb.cdiv(qnb.program_id(0), 0)", qnb.QnbZeroDivisionError, "the divisor is 0"),
        ("qnb.cdiv(Vec16.zeros(qnb.i32), 2)", qnb.QnbTypeError, "got a Vec16[i32] value"),
    ],
)
def test_cdiv_misuse_in_a_kernel_raises_at_its_line(call, error, message):
    scope, filename = define(
        f"""
        @qnb.kernel
        def k(x, n: qnb.i32):
            x[0] = {call}
        """
    )
    with pytest.raises(error, match=re.escape(message)) as info, qnb.backend("cpu"):
        scope["k"](np.ones(4, np.float32), 3)
    assert (info.value.filename, info.value.lineno) == (filename, 4)
    assert call in info.value.source_line
    if error is qnb.QnbZeroDivisionError:
        assert isinstance(info.value, ZeroDivisionError)
