"""Compile-time values of a subclass, and what ``qnb.static`` runs (DESIGN.md "Kernel
cache": Template values enter the key by their canonical value, never by ``repr``).

A subclass of str, int, float or tuple is keyed, and computed with, as its plain value: its
own ``__repr__``, ``__eq__``, ``__hash__``, ``__len__``, ``__add__`` or ``__getitem__``
reaches neither the key nor the compile, so no answer depends on something the key lacks.
An enum member is keyed by its name, plain value and kind and computes as its kind does (an
``IntEnum`` member as its int), whatever methods its class defines; an enum class read as a
value (``len(m.Mode)``, iterated) is keyed by every member. Each case here served another
value's kernel, or ran the user's method unkeyed, before."""

from __future__ import annotations

import collections
import enum
import sys
import types
from typing import NamedTuple

import numpy as np
import pytest

import qnb
import qnb.cache
from qnb.errors import QnbCaptureError
from qnb.frontend.constants import canonical, decode, display
from tests.lying_values import LyingFloat, LyingInt, LyingStr, LyingTuple


class Name(str):
    def __repr__(self):
        return "Name"


class Point(NamedTuple):
    x: float
    y: float

    def __getitem__(self, index):  # a named tuple's own indexing
        return 100.0


@pytest.mark.parametrize(
    "value, form",
    [
        (Name("ab"), ["str", "ab"]),
        (LyingStr("abc"), ["str", "abc"]),
        (LyingInt(5), ["int", 5]),
        (LyingFloat(2.5), ["float", (2.5).hex()]),
        (LyingTuple((1, 2.0)), ["tuple", [["int", 1], ["float", (2.0).hex()]]]),
        (LyingTuple((LyingInt(3),)), ["tuple", [["int", 3]]]),
        (Point(1.0, 2.0), ["namedtuple", f"{__name__}.Point", ["x", "y"],
                           [["float", (1.0).hex()], ["float", (2.0).hex()]]]),
    ],
    ids=["str-repr", "str-len", "int", "float", "tuple", "tuple-of-int", "named-tuple"],
)  # fmt: skip
def test_a_subclass_is_keyed_by_its_plain_value(value, form):
    got = canonical(value)
    assert got == form and _plain_json(got)  # (plain str/int/float in the form: never
    # the subclass itself, whose == and hash would compare it)
    plain = decode(form)
    assert type(plain) in (str, int, float, tuple) or type(plain).__module__ != __name__


def _plain_json(value) -> bool:
    if type(value) is list:
        return all(_plain_json(item) for item in value)
    return type(value) in (str, int, float, bool) or value is None


def test_a_form_displays_as_python_writes_the_plain_value():
    assert display(canonical(Name("ab"))) == "'ab'"
    assert display(canonical(LyingFloat(2.5))) == "2.5"
    assert display(canonical(LyingTuple((1, 2.0)))) == "(1, 2.0)"
    assert display(canonical(Point(1.0, 2.0))) == "Point(x=1.0, y=2.0)"


@qnb.kernel
def template_length(x: qnb.Array[qnb.f32, 1], r: qnb.Template):
    x[0] = qnb.static(len(r))


@qnb.kernel
def template_arithmetic(x: qnb.Array[qnb.f32, 1], r: qnb.Template):
    x[0] = qnb.static(r * 2 + 1)


@qnb.kernel
def template_item(x: qnb.Array[qnb.f32, 1], r: qnb.Template):
    x[0] = qnb.static(r[0] + len(r))


def _run(kernel, *args):
    x = np.zeros(1, np.float32)
    kernel[1](x, *args)
    return float(x[0])


@pytest.mark.parametrize(
    "kernel, values, answers",
    [
        (template_length, [Name("ab"), Name("abcd"), Name("ab")], [2.0, 4.0, 2.0]),
        (template_length, [LyingStr("a"), LyingStr("abc")], [1.0, 3.0]),
        (template_arithmetic, [LyingInt(1), LyingInt(2)], [3.0, 5.0]),
        (template_arithmetic, [LyingFloat(1.5), LyingFloat(2.5)], [4.0, 6.0]),
        (template_item, [LyingTuple((1.0,)), LyingTuple((2.0, 5.0))], [2.0, 4.0]),
        (template_item, [Point(1.0, 9.0), Point(3.0, 9.0)], [3.0, 5.0]),
    ],
    ids=["str-repr", "str-len", "int", "float", "tuple", "named-tuple-getitem"],
)
def test_a_template_subclass_value_is_never_served_another_values_kernel(kernel, values, answers):
    with qnb.backend("cpu"):
        got = [_run(kernel, value) for value in values]
    assert got == answers


# Captured values of the same classes: the key, the launch memo and the compile all see
# the plain value.
CAPTURED_STR = LyingStr("ab")
CAPTURED_INT = LyingInt(2)
CAPTURED_TUPLE = LyingTuple((1.0, 2.0))


@qnb.kernel
def captured_subclasses(x: qnb.Array[qnb.f32, 1]):
    x[0] = qnb.static(len(CAPTURED_STR) + CAPTURED_INT + 1) + qnb.static(CAPTURED_TUPLE[1])


def test_a_captured_subclass_value_is_re_read_by_its_plain_value():
    global CAPTURED_STR, CAPTURED_INT, CAPTURED_TUPLE
    with qnb.backend("cpu"):
        assert _run(captured_subclasses) == 7.0
        try:
            CAPTURED_STR = LyingStr("abcd")  # equal to the old one by its own ==, hash alike
            assert _run(captured_subclasses) == 9.0
            CAPTURED_INT = LyingInt(5)
            assert _run(captured_subclasses) == 12.0
            CAPTURED_TUPLE = LyingTuple((1.0, -2.0))
            assert _run(captured_subclasses) == 8.0
            event = [e for e in qnb.cache.events() if e.kernel == captured_subclasses.name][-1]
            assert event.reason == "captured.CAPTURED_TUPLE: (1.0, 2.0) → (1.0, -2.0)"
        finally:
            CAPTURED_STR, CAPTURED_INT = LyingStr("ab"), LyingInt(2)
            CAPTURED_TUPLE = LyingTuple((1.0, 2.0))


# ---------------------------------------------------------------- enums


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2

    def __mul__(self, other):  # never run at compile time: a member computes as its int
        return 100

    def __bool__(self):
        return False


class Mode(enum.Enum):
    FAST = 1
    SLOW = 2


MODULE = types.ModuleType("qnb_test_enum_module")
MODULE.Mode = Mode
sys.modules[MODULE.__name__] = MODULE
MEMBER = Mode.FAST


@qnb.kernel
def int_enum_arithmetic(x: qnb.Array[qnb.f32, 1]):
    x[0] = qnb.static(Level.HIGH * 3)
    if qnb.static(Level.LOW):
        x[0] += 0.5


def test_an_int_enum_member_computes_as_its_int_whatever_its_class_defines():
    with qnb.backend("cpu"):
        assert _run(int_enum_arithmetic) == 6.5
        real = Level.__mul__
        try:
            Level.__mul__ = lambda self, other: 7  # replaced in a running process
            assert _run(int_enum_arithmetic) == 6.5
            assert qnb.cache.events()[-1].outcome == "memory-hit"
        finally:
            Level.__mul__ = real


@qnb.func
def count_modes(m):
    return qnb.static(len(m.Mode) + sum(mode.value for mode in m.Mode))


@qnb.kernel
def enum_class_through_a_module(x: qnb.Array[qnb.f32, 1]):
    x[0] = count_modes(MODULE)


@qnb.kernel
def enum_class_of_a_member(x: qnb.Array[qnb.f32, 1]):
    x[0] = qnb.static(len(MEMBER.__class__))


@qnb.kernel
def enum_class_by_type(x: qnb.Array[qnb.f32, 1]):
    x[0] = qnb.static(len(type(MEMBER)))


def test_an_enum_class_reached_as_a_value_is_keyed_by_its_members():
    global Mode
    with qnb.backend("cpu"):
        assert _run(enum_class_through_a_module) == 5.0
        assert _run(enum_class_of_a_member) == 2.0
        old = Mode
        try:

            class Mode(enum.Enum):  # the enum gains a member (a cell re-run)
                FAST = 1
                SLOW = 2
                EXACT = 3

            MODULE.Mode = Mode
            assert _run(enum_class_through_a_module) == 9.0
            event = qnb.cache.events()[-1]
            assert event.outcome == "miss" and "EXACT=3" in event.reason, event.reason
        finally:
            Mode = MODULE.Mode = old


def test_the_class_of_a_member_read_by_type_is_refused_with_what_to_do():
    with qnb.backend("cpu"), pytest.raises(QnbCaptureError) as info:
        _run(enum_class_by_type)
    assert "read the enum class itself" in info.value.message
    assert info.value.lineno == enum_class_by_type.__wrapped__.__code__.co_firstlineno + 2


@qnb.kernel
def enum_template(x: qnb.Array[qnb.f32, 1], mode: qnb.Template):
    x[0] = qnb.static(mode.value)
    if qnb.static(mode == Mode.FAST):
        x[0] += 10.0


def test_an_enum_member_as_a_template_value_is_keyed_by_its_form():
    with qnb.backend("cpu"):
        assert _run(enum_template, Mode.FAST) == 11.0
        assert _run(enum_template, Mode.SLOW) == 2.0
        reason = qnb.cache.events()[-1].reason
        assert reason.startswith("signature.mode: Template = <") and "Mode.SLOW: 2>" in reason
        assert _run(enum_template, Level.HIGH) == 2.0


def test_an_enum_of_an_unsupported_mixin_is_refused_as_a_template():
    class Pair(tuple, enum.Enum):
        A = (1, 2)

    with qnb.backend("cpu"), pytest.raises(qnb.QnbTypeError, match="Template parameter 'mode'"):
        _run(enum_template, Pair.A)


def test_a_named_tuple_with_lying_field_names_is_refused():
    Odd = collections.namedtuple("Odd", "a b")
    Odd._fields = ("a",)  # one name for two items: not a named tuple qnb can rebuild
    assert canonical(Odd(1, 2)) is None


def test_enum_members_alike_but_of_two_modules_are_two_template_keys():
    """Two enums of one name, member and value in two modules (a module loaded again under
    another name): ``mode == Mode.FAST`` differs between them, so must their kernels."""
    other = types.ModuleType("qnb_test_other_modes")
    exec("import enum\nclass Mode(enum.Enum):\n    FAST = 1\n    SLOW = 2\n", other.__dict__)
    sys.modules[other.__name__] = other
    try:
        with qnb.backend("cpu"):
            assert _run(enum_template, Mode.FAST) == 11.0
            assert _run(enum_template, other.Mode.FAST) == 1.0  # not this module's Mode.FAST
            assert qnb.cache.events()[-1].outcome == "miss"
            assert _run(enum_template, Mode.FAST) == 11.0
    finally:
        del sys.modules[other.__name__]
