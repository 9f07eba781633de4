"""Captured values: the launch memo's snapshot and the key's canonical form agree.

The snapshot decides, at every launch, whether the kernel compiled for the last
launch can run again; the canonical form is what the cache key (and so the disk)
holds. Two values the compiler treats differently must differ in both: otherwise
the memo serves the old kernel in this process, or the disk serves it in the next.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import qnb
from qnb.cache.key import render_value
from qnb.frontend.capture import Captures, canonical
from qnb.frontend.parse import parse_function

VALUE = None


def _reads_value(o):
    o[0] = VALUE


def snapshot_of(value):
    global VALUE
    VALUE = value
    return Captures(parse_function(_reads_value)).snapshot()


# Pairs that == calls equal although each compiles differently.
LOOK_ALIKE = [
    (0.0, -0.0),
    ((1,), (1.0,)),
    ((True,), (1,)),
    ((0.0, 1), (-0.0, 1)),
    (((1, 2),), ((1.0, 2),)),
    (np.float32(0.0), np.float32(-0.0)),
    (1.0, np.float64(1.0)),
    (1, np.int32(1)),
    (True, np.bool_(True)),
]


@pytest.mark.parametrize("old, new", LOOK_ALIKE, ids=repr)
def test_look_alike_values_change_the_snapshot(old, new):
    assert snapshot_of(old) != snapshot_of(new)
    assert canonical(old) != canonical(new)  # and the key: the two agree


@pytest.mark.parametrize(
    "value", [float("nan"), (float("nan"), 1), np.float32("nan"), 2.5, (1, "a", None)], ids=repr
)
def test_an_equal_value_made_anew_keeps_the_snapshot(value):
    # A NaN never equals itself, but it is the same compile-time value.
    copy = anew(value)
    assert copy is not value
    assert snapshot_of(value) == snapshot_of(copy)


def anew(value):
    """An equal value in new objects (numbers made again from their text)."""
    if isinstance(value, tuple):
        return tuple(anew(item) for item in value)
    if isinstance(value, float | np.floating):
        return type(value)(str(value))
    return value


def test_the_snapshot_stays_cheap_for_a_captured_tuple():
    captures = Captures(parse_function(_reads_value))
    global VALUE
    VALUE = (1.0, 2, (3.0, "x"))
    first = captures.snapshot()
    assert captures.snapshot() == first
    VALUE = (1.0, 2, (3.0, "x"))  # rebound to an equal tuple: still equal
    assert captures.snapshot() == first
    VALUE = (1.0, 2, (-0.0, "x"))
    assert captures.snapshot() != first


def test_an_unhashable_value_never_matches():
    assert snapshot_of(([1],)) != snapshot_of(([1],))


@pytest.mark.parametrize(
    "value, form, shown",
    [
        (np.float32(1.0), ["np.float32", "0x1.0000000000000p+0"], "np.float32(1.0)"),
        (np.float64(-0.0), ["np.float64", "-0x0.0p+0"], "np.float64(-0.0)"),
        (np.int32(3), ["np.int32", 3], "np.int32(3)"),
        (np.uint8(4), ["np.uint8", 4], "np.uint8(4)"),
        (np.bool_(True), [f"np.{np.bool_.__name__}", True], repr(np.bool_(True))),
        (1.0, ["float", "0x1.0000000000000p+0"], "1.0"),
        (True, ["bool", True], "True"),
        ((np.float16(2), 1), None, "(np.float16(2.0), 1)"),
    ],
    ids=repr,
)
def test_numpy_scalars_have_their_own_canonical_form(value, form, shown):
    if form is not None:
        assert canonical(value) == form
    assert render_value(canonical(value)) == shown


def test_a_long_double_keeps_every_digit():
    third = np.longdouble(1) / 3
    form = canonical(third)
    assert form[0] == "np.longdouble"
    assert np.longdouble(form[1]) == third
    if np.finfo(np.longdouble).nmant > np.finfo(np.float64).nmant:
        assert canonical(third) != canonical(np.longdouble(float(third)))


def test_numpy_values_that_are_no_constant_are_refused():
    assert canonical(np.complex64(1)) is None
    assert canonical(np.datetime64("2020-01-01")) is None


C = 0.0


@qnb.kernel
def _divide_by_c(o: qnb.Array[qnb.f32, 2]):
    (qnb.Tile16.ones(qnb.f32) / qnb.Tile16.full(C, qnb.f32)).store(o, 0, 0)


def test_a_launch_after_rebinding_zero_to_minus_zero_is_a_miss(cache_dir):
    global C
    out = np.zeros((16, 16), np.float32)
    with qnb.backend("cpu"), np.errstate(divide="ignore"):
        C = 0.0
        _divide_by_c(out)
        assert out[0, 0] == math.inf
        C = -0.0
        _divide_by_c(out)
        assert out[0, 0] == -math.inf
        C = float("nan")
        _divide_by_c(out)
        C = float("nan")  # a new NaN object: the same kernel, from the memo
        _divide_by_c(out)
    outcomes = [e.outcome for e in qnb.cache.events()]
    assert outcomes == ["miss", "miss", "miss", "memory-hit"]
