"""The contract's small promises on the host: NumPy accepts qnb dtypes wherever it takes a
dtype (bf16 is ml_dtypes' bfloat16), and ``qnb.cdiv`` is ``-(-a // b)`` on ints, with
errors at the caller's line for what is not."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import qnb

QNB_TO_NUMPY = [
    (qnb.f16, np.float16),
    (qnb.bf16, ml_dtypes.bfloat16),
    (qnb.f32, np.float32),
    (qnb.f64, np.float64),
    (qnb.i32, np.int32),
    (qnb.bool_, np.bool_),
]


@pytest.mark.parametrize(("ours", "numpys"), QNB_TO_NUMPY)
def test_numpy_takes_every_qnb_dtype(ours, numpys):
    assert np.dtype(ours) == np.dtype(numpys)
    assert np.zeros(4, ours).dtype == np.dtype(numpys)
    assert np.arange(6).astype(ours).dtype == np.dtype(numpys)
    assert np.empty((2, 3), dtype=ours).shape == (2, 3)
    assert np.asarray([1, 0], dtype=ours).dtype == np.dtype(numpys)


def test_a_bf16_array_made_by_numpy_launches_as_bf16():
    @qnb.kernel
    def double(x: qnb.Array[qnb.bf16, 1], out: qnb.Array[qnb.bf16, 1]):
        (qnb.Vec16.load(x, 0) * 2.0).store(out, 0)

    x = np.linspace(-2, 2, 16).astype(qnb.bf16)
    out = np.zeros(16, qnb.bf16)
    with qnb.backend("cpu"):
        double[1](x, out)
    np.testing.assert_array_equal(out.astype(np.float32), (x.astype(np.float32) * 2))


@pytest.mark.parametrize(
    ("a", "b"), [(1000, 16), (1024, 16), (1, 128), (0, 8), (-37, 8), (37, -8), (np.int64(9), 4)]
)
def test_cdiv_on_the_host_is_python_s_ceiling_division(a, b):
    assert qnb.cdiv(a, b) == -(-int(a) // int(b))
    assert type(qnb.cdiv(a, b)) is int


@pytest.mark.parametrize(
    ("a", "b", "error", "words"),
    [
        (1000 / 16, 16, qnb.QnbTypeError, "the float 62.5"),
        (10, 2.0, qnb.QnbTypeError, "the float 2.0"),
        (True, 4, qnb.QnbTypeError, "the bool True"),
        (10, 0, qnb.QnbZeroDivisionError, "the divisor is 0"),
    ],
)
def test_cdiv_misuse_on_the_host_names_the_caller_s_line(a, b, error, words):
    with pytest.raises(error) as caught:
        qnb.cdiv(a, b)  # the line the error names
    assert words in caught.value.message
    assert caught.value.filename == __file__
    assert "qnb.cdiv(a, b)  # the line the error names" in caught.value.source_line
    if error is qnb.QnbZeroDivisionError:
        assert isinstance(caught.value, ZeroDivisionError)
