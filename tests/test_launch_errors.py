"""Errors of a launch as a whole (its grid, its arguments' count and names) point at the
launch the user wrote, not at the kernel's ``def``: the traceback already has that line,
and the message's "File ..., line ..." says it too."""

from __future__ import annotations

import numpy as np
import pytest

import qnb


@qnb.kernel
def copy(x: qnb.Array[qnb.f32, 1], out: qnb.Array[qnb.f32, 1]):
    i = qnb.program_id(0)
    out[i] = x[i]


X = np.ones(1000, np.float32)
OUT = np.zeros_like(X)

CALLS = {
    "a float grid": (lambda: copy[1000 / 16](X, OUT), "got 62.5"),
    "a grid of 4": (lambda: copy[(1, 2, 3, 4)](X, OUT), "up to 3 ints"),
    "a zero grid": (lambda: copy[0](X, OUT), "at least 1"),
    "a huge grid": (lambda: copy[2**31](X, OUT), "below 2**31"),
    "too few": (lambda: copy[16](X), "but 1 was given"),
    "too many": (lambda: copy[16](X, OUT, 3), "but 3 were given"),
    "no such name": (lambda: copy[16](X, y=OUT), "has no parameter 'y'"),
    "twice": (lambda: copy[16](X, OUT, x=X), "both by position and by name"),
    "missing by name": (lambda: copy[16](x=X), "is missing 'out'"),
}


@pytest.mark.parametrize("case", list(CALLS))
def test_a_launch_error_is_at_the_launch_line(case):
    call, words = CALLS[case]
    with pytest.raises(qnb.QnbTypeError) as caught:
        call()
    err = caught.value
    assert words in err.message
    assert err.filename == __file__
    line = call.__code__.co_firstlineno  # the lambda's line: the launch
    assert err.lineno == line, (err.lineno, line)
    assert "copy[" in err.source_line
    assert err.lineno != copy.parsed.firstlineno


def test_the_same_error_through_qnb_compare_is_at_the_user_s_compare_line():
    with pytest.raises(qnb.QnbTypeError) as caught:
        qnb.compare(copy[16], X)  # the line
    assert caught.value.filename == __file__
    assert "qnb.compare(copy[16], X)  # the line" in caught.value.source_line


def test_a_float_grid_raises_even_after_the_equal_int_grid_was_launched():
    """``(4, 2.0) == (4, 2)``: the memo of launches by grid must not serve the float one
    (an outside find)."""

    @qnb.kernel(backend="cpu")
    def fills(y: qnb.Array[qnb.f32, 1]):
        y[qnb.program_id(0)] = qnb.num_programs(1) * 1.0

    y = np.zeros(4, np.float32)
    fills[(4, 2)](y)
    assert y.tolist() == [2.0] * 4
    for grid in ((4, 2.0), (4.0, 2), 4.0):
        with pytest.raises(qnb.QnbTypeError, match="a launch grid is an int or a tuple"):
            fills[grid](y)
    fills[(np.int64(4), 2)](y)  # (NumPy ints are ints here)
