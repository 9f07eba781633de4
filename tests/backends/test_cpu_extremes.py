"""max and min on the cpu (``semantics.reduce_values``, both executors): over trailing
axes they run as segments of ``reduceat``, faster than ``reduce`` on short rows, and give
``reduce``'s bits: where a row's extreme is a zero (its sign) or a NaN (its payload), the
row is reduced again as ``reduce`` does it."""

from __future__ import annotations

import numpy as np
import pytest

from qnb.backends.cpu import semantics

SHAPES_AND_AXES = [
    ((64, 16, 128), 2),  # a batch of tiles, along their rows
    ((512, 16), 1),  # rows of 16
    ((64, 8, 16), (1, 2)),  # whole tiles
    ((40, 3, 7, 5), (2, 3)),  # odd sizes
    ((4096, 2), 1),
]


def _adversarial(shape, kind, rng):
    x = rng.standard_normal(shape).astype(np.float32)
    if kind == "zeros":  # every extreme a zero, of either sign
        x = np.where(rng.random(shape) < 0.5, np.float32(0.0), np.float32(-0.0))
        x[rng.random(shape) < 0.3] = -1.5
    elif kind == "nans":  # NaNs of many payloads and both signs
        bits = x.view(np.uint32)
        hit = rng.random(shape) < 0.03
        bits[hit] = 0x7FC00000 | rng.integers(0, 1 << 22, int(hit.sum())).astype(np.uint32)
        bits[rng.random(shape) < 0.02] |= 0x80000000
    elif kind == "infinities":
        x[rng.random(shape) < 0.1] = np.inf
        x[rng.random(shape) < 0.1] = -np.inf
    return x


@pytest.mark.parametrize("shape, axes", SHAPES_AND_AXES)
@pytest.mark.parametrize("kind", ["plain", "zeros", "nans", "infinities"])
@pytest.mark.parametrize("op", ["max", "min"])
def test_an_extreme_over_trailing_axes_has_reduce_s_bits(shape, axes, kind, op):
    rng = np.random.default_rng(abs(hash((shape, kind, op))) % 2**32)
    x = _adversarial(shape, kind, rng)
    ufunc = np.maximum if op == "max" else np.minimum
    want = ufunc.reduce(x, axis=axes)
    got = semantics.reduce_values(op, x, axes)
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))
    if x.size >= semantics.SEGMENTED_MIN:  # (and it ran as segments)
        assert semantics._segmented_extreme(ufunc, x, axes) is not None


@pytest.mark.parametrize("dtype", [np.float64, np.float16, np.int32, np.uint32, np.int8])
def test_each_dtype_it_takes_gives_reduce_s_values(dtype):
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((256, 16, 32)) * 50).astype(dtype)
    for op, ufunc in (("max", np.maximum), ("min", np.minimum)):
        want = ufunc.reduce(x, axis=2)
        got = semantics.reduce_values(op, x, 2)
        np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))


def test_other_axes_and_small_values_take_reduce_itself():
    x = np.random.default_rng(4).standard_normal((64, 16, 64)).astype(np.float32)
    assert semantics._segmented_extreme(np.maximum, x, 1) is None  # (not trailing)
    assert semantics._segmented_extreme(np.maximum, x, (0, 2)) is None
    assert semantics._segmented_extreme(np.maximum, x[:4, :1, :1], 2) is None  # (rows of 1)
    for axes in (1, (0, 2)):
        np.testing.assert_array_equal(
            semantics.reduce_values("max", x, axes), np.maximum.reduce(x, axis=axes)
        )
    with pytest.raises(ValueError):  # (an empty axis: reduce's own error, as before)
        semantics.reduce_values("max", np.zeros((8192, 0), np.float32), 1)


class _SignFlippingSegments:
    """A max whose segments give each zero the other sign and each NaN another payload
    (what another order could give), and whose ``reduce`` is NumPy's."""

    reduce = staticmethod(np.maximum.reduce)

    @staticmethod
    def reduceat(flat, starts):
        out = np.maximum.reduceat(flat, starts)
        bits = out.view(np.uint32)
        bits[out == 0] ^= 0x80000000
        bits[np.isnan(out)] ^= 0x1
        return out


def test_a_row_whose_extreme_is_a_zero_or_a_nan_is_reduced_again():
    rng = np.random.default_rng(5)
    for kind in ("zeros", "nans"):
        x = _adversarial((512, 64), kind, rng)
        got = semantics._segmented_extreme(_SignFlippingSegments, x, 1)
        want = np.maximum.reduce(x, axis=1)
        np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


@pytest.mark.parametrize("axes", [None, np.int64(1), -1, (-2, -1), np.int32(0)])
def test_any_axes_reduce_takes_are_taken(axes):
    """None, NumPy ints and negative axes, as ``reduce`` takes them (an outside find:
    ``tuple(None)`` raised)."""
    x = np.random.default_rng(6).standard_normal((64, 128)).astype(np.float32)
    for op, ufunc in (("max", np.maximum), ("min", np.minimum)):
        got = semantics.reduce_values(op, x, axes)
        np.testing.assert_array_equal(got, ufunc.reduce(x, axis=axes))
