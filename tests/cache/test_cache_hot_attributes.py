"""The launch memo's hot entry for names read through attributes of an object the
snapshot does not walk (``Tile16.full`` with ``from qnb import Tile16``, an attribute of
an enum member): the entry depends on which objects the names are bound to, and what
lowering read past them is re-checked at each hit, so a rebound name or a changed
attribute still recompiles. A named tuple's field (``CFG.value``), like an Enum class's
member and a configuration object's attribute, is read by the snapshot itself (it is
keyed by its own value), so such a kernel takes no hot entry."""

from __future__ import annotations

import enum
from typing import NamedTuple

import numpy as np

import qnb
import qnb.cache
from qnb import Tile16


class Scale(NamedTuple):
    value: float


class Mode(enum.Enum):
    DOUBLE = 2.0
    TRIPLE = 3.0


T = Tile16
CFG = Scale(2.0)
MODE = Mode
MEMBER = Mode.DOUBLE
Mode.DOUBLE.extra = 2.0


@qnb.kernel(backend="cpu")
def _imported_tile(x: qnb.Array[qnb.f32, 2]):
    Tile16.full(4.0).store(x, 0, 0)


@qnb.kernel(backend="cpu")
def _rebindable_tile(x: qnb.Array[qnb.f32, 2]):
    T.full(1.0).store(x, 0, 0)


@qnb.kernel(backend="cpu")
def _member_attribute(x: qnb.Array[qnb.f32, 2]):
    Tile16.full(qnb.static(MEMBER.extra)).store(x, 0, 0)


@qnb.kernel(backend="cpu")
def _named_tuple_field(x: qnb.Array[qnb.f32, 2]):
    Tile16.full(qnb.static(CFG.value)).store(x, 0, 0)


@qnb.kernel(backend="cpu")
def _enum_member(x: qnb.Array[qnb.f32, 2]):
    Tile16.full(MODE.DOUBLE.value).store(x, 0, 0)


def _run(kernel) -> np.ndarray:
    x = np.zeros((16, 16), np.float32)
    kernel(x)
    return x


def _outcomes(kernel):
    return [e.outcome for e in qnb.cache.events() if e.kernel == kernel.name]


def test_an_imported_tile_type_takes_the_hot_entry(cache_dir):
    for _ in range(3):
        assert (_run(_imported_tile) == 4.0).all()
    assert _imported_tile._memo.hot is not None
    assert _outcomes(_imported_tile)[1:] == ["memory-hit", "memory-hit"]


def test_a_rebound_tile_type_recompiles_after_the_hot_entry_was_set(cache_dir):
    global T
    assert (_run(_rebindable_tile) == 1.0).all() and (_run(_rebindable_tile) == 1.0).all()
    assert _rebindable_tile._memo.hot is not None
    try:
        T = qnb.Tile[8, 8]
        x = _run(_rebindable_tile)
        assert (x[:8, :8] == 1.0).all() and (x[8:] == 0).all() and (x[:, 8:] == 0).all()
        assert _outcomes(_rebindable_tile)[-1] != "memory-hit"
    finally:
        T = Tile16
    assert (_run(_rebindable_tile) == 1.0).all()


def test_a_changed_member_attribute_recompiles_after_the_hot_entry_was_set(cache_dir):
    assert (_run(_member_attribute) == 2.0).all() and (_run(_member_attribute) == 2.0).all()
    assert _member_attribute._memo.hot is not None
    try:
        Mode.DOUBLE.extra = 5.0
        assert (_run(_member_attribute) == 5.0).all()
        assert (_run(_member_attribute) == 5.0).all()
        Mode.DOUBLE.extra = -0.0
        assert np.signbit(_run(_member_attribute)).all()
    finally:
        Mode.DOUBLE.extra = 2.0
    assert (_run(_member_attribute) == 2.0).all()


def test_a_rebound_named_tuple_recompiles_after_the_hot_entry_was_set(cache_dir):
    global CFG
    assert (_run(_named_tuple_field) == 2.0).all()
    assert (_run(_named_tuple_field) == 2.0).all()
    assert _named_tuple_field._memo.hot is None  # (the field is walked: keyed by its value)
    try:
        CFG = Scale(7.0)
        assert (_run(_named_tuple_field) == 7.0).all()
        CFG = Scale(2.0)  # equal to the first one, another object: the same kernel
        assert (_run(_named_tuple_field) == 2.0).all()
        assert _outcomes(_named_tuple_field)[-1] == "memory-hit"
    finally:
        CFG = Scale(2.0)


def test_an_enum_class_is_walked_so_it_takes_no_hot_entry(cache_dir):
    """A chain through an Enum class reaches a member (as through a module): the snapshot
    depends on more than the class object, so the hot entry stays off."""
    assert (_run(_enum_member) == 2.0).all() and (_run(_enum_member) == 2.0).all()
    assert _enum_member._memo.hot is None
    assert _outcomes(_enum_member)[-1] == "memory-hit"
