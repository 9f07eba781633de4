"""Kernels and funcs under ``functools.wraps`` decorators read their own names; Template and
captured values are keyed by their canonical value, never by ``repr``; tuples nested too
deeply are a clear QnbCaptureError at the user's line (DESIGN.md "Kernel cache")."""

from __future__ import annotations

import math
import os
import warnings

import numpy as np
import pytest

import qnb
from qnb.errors import QnbCaptureError

from .wrapping_decorators import Traced, logged, twice_logged

FLAG = False
SCALE = 2.0


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("QNB_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("QNB_ALWAYS_COMPILE", raising=False)
    qnb.cache.clear()
    yield
    qnb.cache.clear()


def one(k, *args):
    x = np.full(1, -1.0, np.float32)
    k(x, *args)
    return float(x[0])


@pytest.mark.parametrize(
    "decorate", [logged, twice_logged, Traced], ids=["wraps", "wraps-twice", "callable-object"]
)
def test_a_wrapped_kernel_reads_the_globals_of_its_own_module(decorate):
    @qnb.kernel(backend="cpu")
    @decorate
    def k(x: qnb.Array[qnb.f32, 1]):
        if qnb.static(FLAG):
            x[0] = SCALE
        else:
            x[0] = -SCALE

    assert one(k) == -2.0  # this module's FLAG and SCALE, not the decorators' module's


def test_a_wrapped_kernel_reads_its_closure():
    offset = 3.0

    @qnb.kernel(backend="cpu")
    @logged
    def k(x: qnb.Array[qnb.f32, 1]):
        x[0] = offset

    assert one(k) == 3.0


def test_a_wrapped_func_reads_its_closure_and_globals():
    bias = 0.5

    @qnb.func
    @logged
    def add(v):
        return v + bias + SCALE

    @qnb.kernel(backend="cpu")
    def k(x: qnb.Array[qnb.f32, 1]):
        x[0] = add(1.0)

    assert one(k) == 3.5


class RoundedFloat(float):
    def __repr__(self):
        return f"{round(self, 1)!r}"


@qnb.kernel(backend="cpu")
def times_one(x: qnb.Array[qnb.f32, 1], v: qnb.Template):
    x[0] = qnb.static(v * 1.0)


@qnb.kernel(backend="cpu")
def sign_of(x: qnb.Array[qnb.f32, 1], v: qnb.Template):
    x[0] = qnb.static(math.copysign(1.0, v))


@qnb.kernel(backend="cpu")
def inner_is_float(x: qnb.Array[qnb.f32, 1], v: qnb.Template):
    x[0] = qnb.static(float(type(v[0][0]) is float) + 2.0 * float(type(v[1]) is float))


@qnb.kernel(backend="cpu")
def is_bool(x: qnb.Array[qnb.f32, 1], v: qnb.Template):
    x[0] = qnb.static(float(type(v) is bool))


@qnb.kernel(backend="cpu")
def is_nan(x: qnb.Array[qnb.f32, 1], v: qnb.Template):
    x[0] = qnb.static(float(v != v))


@pytest.mark.parametrize(
    "k, first, second, answers",
    [
        (times_one, RoundedFloat(1.04), 1.0, (np.float32(1.04), 1.0)),  # prints "1.0"
        (sign_of, 0.0, -0.0, (1.0, -1.0)),
        (inner_is_float, ((1,), 2.0), ((1.0,), 2), (2.0, 1.0)),  # equal under ==
        (is_bool, True, 1, (1.0, 0.0)),
        (is_nan, float("nan"), 1.5, (1.0, 0.0)),
    ],
    ids=["rounding-repr", "signed-zero", "nested-types", "bool-int", "nan"],
)
def test_template_values_are_keyed_by_canonical_value(k, first, second, answers):
    for value, answer in ((first, answers[0]), (second, answers[1])) * 2:
        assert one(k, value) == answer
    outcomes = [e.outcome for e in qnb.cache.events()]
    assert outcomes == ["miss", "miss", "memory-hit", "memory-hit"]


def test_template_values_are_keyed_by_canonical_value_in_a_later_process_too():
    @qnb.kernel(backend="cpu")
    def k(x: qnb.Array[qnb.f32, 1], v: qnb.Template):
        x[0] = qnb.static(v * 1.0)

    one(k, RoundedFloat(1.04))
    qnb.cache.lookup._memory.clear()
    k._memo.clear()
    assert one(k, 1.0) == 1.0
    outcomes = [e.outcome for e in qnb.cache.events()]
    assert outcomes == ["miss", "miss"]
    assert "1.04" in qnb.cache.events()[-1].reason


def nested(depth, leaf=1.0):
    value = leaf
    for _ in range(depth):
        value = (value,)
    return value


DEEP = None


@pytest.mark.parametrize("depth", [33, 300, 400, 700, 5000])
def test_a_deeply_nested_captured_tuple_is_a_capture_error_at_its_line(depth):
    global DEEP
    DEEP = nested(depth)

    @qnb.kernel(backend="cpu")
    def k(x: qnb.Array[qnb.f32, 1]):
        x[0] = qnb.static(len(DEEP))

    with pytest.raises(QnbCaptureError, match="nested more than 32 levels") as info:
        one(k)
    assert info.value.filename == __file__
    assert info.value.lineno == k.__wrapped__.__code__.co_firstlineno + 2
    assert not os.path.exists(qnb.cache.stats()["directory"]) or not any(
        name.startswith("k-") for name in os.listdir(qnb.cache.stats()["directory"])
    )


@pytest.mark.parametrize("depth", [33, 300, 700, 5000])
def test_a_deeply_nested_template_tuple_is_a_capture_error_at_its_parameter(depth):
    @qnb.kernel(backend="cpu")
    def k(x: qnb.Array[qnb.f32, 1], v: qnb.Template):
        x[0] = 1.0

    with pytest.raises(QnbCaptureError, match="Template parameter 'v'") as info:
        one(k, nested(depth))
    assert info.value.filename == __file__
    assert info.value.lineno == k.__wrapped__.__code__.co_firstlineno + 1


def test_the_deepest_tuple_allowed_reads_back_from_disk():
    global DEEP
    DEEP = nested(32, 4.0)

    @qnb.kernel(backend="cpu")
    def k(x: qnb.Array[qnb.f32, 1], v: qnb.Template):
        x[0] = qnb.static(len(DEEP) + len(v) * 3.0)

    assert one(k, nested(32)) == 4.0
    qnb.cache.lookup._memory.clear()
    k._memo.clear()
    with warnings.catch_warnings(record=True) as with_warnings:
        warnings.simplefilter("always")
        assert one(k, nested(32)) == 4.0
    assert qnb.cache.events()[-1].outcome == "disk-hit"
    assert not with_warnings
