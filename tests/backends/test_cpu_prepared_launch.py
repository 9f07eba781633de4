"""The cpu prepared launcher's own state: a launch of many programs ignores NumPy's
floating-point errors as the interpreter does (the user's error state is neither
consulted nor changed, also when the launch raises), and a one-program launch of a
kernel that assigns variables keeps their aliases apart from the arrays."""

from __future__ import annotations

import numpy as np
import pytest

import qnb
from qnb import Tile16


@qnb.kernel(backend="cpu")
def _divide_by_zero(x, y):
    i = qnb.program_id(0) * 16
    (Tile16.load(x, i, 0) / 0.0).store(y, i, 0)


@qnb.kernel(backend="cpu")
def _divide_then_index(x, y, n: qnb.i32):
    i = qnb.program_id(0) * 16
    t = Tile16.load(x, i, 0) / 0.0
    t.store(y, i, 0)
    y[n, 0] = t[0, 0]


@qnb.kernel(backend="cpu")
def _swap_through_a_variable(x):
    t = Tile16.load(x, 0, 0)
    Tile16.load(x, 16, 0).store(x, 0, 0)
    t.store(x, 16, 0)


def test_a_launch_ignores_the_users_error_state_and_restores_it():
    x = np.ones((64, 16), np.float32)
    y = np.zeros_like(x)
    with np.errstate(all="raise"):
        _divide_by_zero[4](x, y)
        assert np.geterr()["divide"] == "raise"
    assert (y == np.inf).all()


def test_the_error_state_is_restored_when_a_launch_raises():
    x = np.ones((64, 16), np.float32)
    y = np.zeros_like(x)
    with np.errstate(all="raise"):
        with pytest.raises(qnb.QnbIndexError):
            _divide_then_index[4](x, y, 1000)
        assert np.geterr() == {
            "divide": "raise",
            "over": "raise",
            "under": "raise",
            "invalid": "raise",
        }
        with pytest.raises(FloatingPointError):
            np.float32(1.0) / np.float32(0.0)  # (the user's state holds again)


def test_a_one_program_launch_keeps_a_variable_apart_from_its_array():
    x = np.arange(32 * 16, dtype=np.float32).reshape(32, 16)
    want = np.concatenate([x[16:], x[:16]])
    for _ in range(3):  # (the first launch compiles; the others take the hot path)
        got = x.copy()
        _swap_through_a_variable(got)
        np.testing.assert_array_equal(got, want)
