"""Configuration objects (DESIGN.md "Parameters and captured names"): an attribute read,
however deep, of a captured dataclass instance (frozen or not), ``SimpleNamespace``, named
tuple, class or instance whose value is a constant is a compile-time read, inside and
outside ``qnb.static``: keyed by its path and value, re-read at every launch (a change in
place gives a fresh kernel, through the launch memo and its hot entry too), and what is not a
constant is a ``QnbCaptureError`` at the read's own line, naming the path."""

from __future__ import annotations

import dataclasses
import types
from typing import NamedTuple

import numpy as np
import pytest

import qnb
import qnb.cache
from qnb.errors import QnbCaptureError
from tests.conftest import require_backend


@dataclasses.dataclass
class Block:
    m: int = 4


@dataclasses.dataclass
class Config:
    scale: float = 2.0
    use_bias: bool = True
    block: Block = dataclasses.field(default_factory=Block)


@dataclasses.dataclass(frozen=True)
class Frozen:
    scale: float = 1.5
    rows: int = 8


class Settings:
    SCALE = 3.0
    INNER = types.SimpleNamespace(offset=0.25)


class Pair(NamedTuple):
    scale: float
    use_bias: bool


CFG = Config()
FROZEN = Frozen()
NS = types.SimpleNamespace(scale=2.0, inner=types.SimpleNamespace(bias=1.0))
PAIR = Pair(2.0, True)


@qnb.kernel
def dataclass_kernel(x: qnb.Array[qnb.f32, 1]):
    x[0] = CFG.scale
    if CFG.use_bias:
        x[1] = 1.0
    x[2] = qnb.static(CFG.block.m * 2)


@qnb.kernel
def frozen_kernel(x: qnb.Array[qnb.f32, 1]):
    x[0] = FROZEN.scale * qnb.static(FROZEN.rows)


@qnb.kernel
def namespace_kernel(x: qnb.Array[qnb.f32, 1]):
    x[0] = NS.scale + NS.inner.bias


@qnb.kernel
def class_kernel(x: qnb.Array[qnb.f32, 1]):
    x[0] = Settings.SCALE + Settings.INNER.offset


@qnb.kernel
def named_tuple_kernel(x: qnb.Array[qnb.f32, 1]):
    x[0] = PAIR.scale  # (outside qnb.static: a QnbTypeError before)
    if PAIR.use_bias:
        x[1] = 1.0


@qnb.func
def scaled(c, v):
    return v * c.scale + c.inner.bias


@qnb.kernel
def passed_to_func(x: qnb.Array[qnb.f32, 1]):
    x[0] = scaled(NS, 2.0)


@qnb.kernel
def bound_to_a_local(x: qnb.Array[qnb.f32, 1]):
    block = CFG.block
    x[0] = qnb.static(block.m + 1)


def _launch(kernel, backend="cpu"):
    x = np.full(4, -1.0, np.float32)
    kernel[1](x)
    return x.tolist()


def _last(kernel):
    return [e for e in qnb.cache.events() if e.kernel == kernel.name][-1]


@pytest.fixture
def restore():
    """Puts every configuration object back after the test."""
    yield
    CFG.scale, CFG.use_bias, CFG.block = 2.0, True, Block()
    NS.scale, NS.inner = 2.0, types.SimpleNamespace(bias=1.0)
    Settings.SCALE, Settings.INNER = 3.0, types.SimpleNamespace(offset=0.25)
    global FROZEN, PAIR
    FROZEN, PAIR = Frozen(), Pair(2.0, True)


@pytest.mark.parametrize("backend", ["cpu", "wgpu"])
def test_a_dataclass_field_changed_in_place_gives_a_fresh_kernel(backend, restore):
    require_backend(backend)
    with qnb.backend(backend):
        assert _launch(dataclass_kernel) == [2.0, 1.0, 8.0, -1.0]
        assert _launch(dataclass_kernel) == [2.0, 1.0, 8.0, -1.0]
        assert _last(dataclass_kernel).outcome == "memory-hit"
        CFG.scale = 3.0
        assert _launch(dataclass_kernel) == [3.0, 1.0, 8.0, -1.0]
        event = _last(dataclass_kernel)
        assert event.outcome == "miss" and event.reason == "captured.CFG.scale: 2.0 → 3.0"
        CFG.use_bias = False
        assert _launch(dataclass_kernel) == [3.0, -1.0, 8.0, -1.0]
        assert _last(dataclass_kernel).reason == "captured.CFG.use_bias: True → False"
        CFG.block.m = 5  # nested, in place
        assert _launch(dataclass_kernel) == [3.0, -1.0, 10.0, -1.0]
        assert _last(dataclass_kernel).reason == "captured.CFG.block.m: 4 → 5"
        CFG.block = Block(7)  # the inner object replaced
        assert _launch(dataclass_kernel) == [3.0, -1.0, 14.0, -1.0]
        CFG.scale, CFG.use_bias, CFG.block = 2.0, True, Block()
        assert _launch(dataclass_kernel) == [2.0, 1.0, 8.0, -1.0]
        assert _last(dataclass_kernel).outcome == "memory-hit"  # the first kernel again


@pytest.mark.parametrize(
    "kernel, change, before, after, reason",
    [
        (frozen_kernel, lambda: globals().update(FROZEN=Frozen(rows=4)), 12.0, 6.0,
         "captured.FROZEN.rows: 8 → 4"),
        (namespace_kernel, lambda: setattr(NS.inner, "bias", -1.0), 3.0, 1.0,
         "captured.NS.inner.bias: 1.0 → -1.0"),
        (class_kernel, lambda: setattr(Settings, "SCALE", 5.0), 3.25, 5.25,
         "captured.Settings.SCALE: 3.0 → 5.0"),
        (class_kernel, lambda: setattr(Settings, "INNER", types.SimpleNamespace(offset=0.5)),
         3.25, 3.5, "captured.Settings.INNER.offset: 0.25 → 0.5"),
        (named_tuple_kernel, lambda: globals().update(PAIR=Pair(3.0, True)), 2.0, 3.0,
         "captured.PAIR.scale: 2.0 → 3.0"),
        (passed_to_func, lambda: setattr(NS, "scale", 4.0), 5.0, 9.0,
         "captured.NS.scale: 2.0 → 4.0"),
        (passed_to_func, lambda: setattr(NS, "inner", types.SimpleNamespace(bias=0.0)), 5.0,
         4.0, "captured.NS.inner.bias: 1.0 → 0.0"),
        (bound_to_a_local, lambda: setattr(CFG.block, "m", 9), 5.0, 10.0,
         "captured.CFG.block.m: 4 → 9"),
    ],
    ids=["frozen", "namespace", "class", "class-inner", "named-tuple", "func-arg",
         "func-arg-inner", "local-name"],
)  # fmt: skip
def test_each_kind_of_object_is_keyed_by_the_leaf_it_reads(
    kernel, change, before, after, reason, restore
):
    with qnb.backend("cpu"):
        assert _launch(kernel)[0] == before
        assert _launch(kernel)[0] == before
        assert _last(kernel).outcome == "memory-hit"
        change()
        assert _launch(kernel)[0] == after
        event = _last(kernel)
        assert event.outcome == "miss"
        assert event.reason == reason, event.reason
        assert _launch(kernel)[0] == after


@qnb.kernel
def through_an_alias(x: qnb.Array[qnb.f32, 1]):
    c = NS
    x[0] = c.scale * 2.0 + qnb.static(c.inner.bias)


def test_an_object_read_whole_takes_the_hot_entry_and_still_sees_changes(restore):
    """``c = NS`` reads NS whole (the snapshot holds which object it is), so the launch
    memo's hot entry serves it; the attributes read through ``c`` are re-checked on that
    path, from NS, so a change in place or a replaced inner object is seen."""
    with qnb.backend("cpu"):
        for _ in range(3):
            assert _launch(through_an_alias)[0] == 5.0
        assert through_an_alias._memo.hot is not None
        NS.scale = 1.0
        assert _launch(through_an_alias)[0] == 3.0
        assert _last(through_an_alias).reason == "captured.NS.scale: 2.0 → 1.0"
        for _ in range(2):
            assert _launch(through_an_alias)[0] == 3.0
        assert through_an_alias._memo.hot is not None
        NS.inner = types.SimpleNamespace(bias=10.0)  # replaced past the snapshot's reach
        assert _launch(through_an_alias)[0] == 12.0
        NS.scale, NS.inner = 2.0, types.SimpleNamespace(bias=1.0)
        assert _launch(through_an_alias)[0] == 5.0
        assert _last(through_an_alias).outcome == "memory-hit"


@qnb.kernel
def uses_the_object_as_a_value(x: qnb.Array[qnb.f32, 1]):
    x[0] = CFG.scale
    x[1] = qnb.static(len(CFG))


@qnb.kernel
def calls_a_class(x: qnb.Array[qnb.f32, 1]):
    x[0] = qnb.static(Settings().SCALE)


@qnb.kernel
def branches_on_the_object(x: qnb.Array[qnb.f32, 1]):
    if NS:
        x[0] = 1.0


@qnb.kernel
def adds_to_the_object(x: qnb.Array[qnb.f32, 1]):
    x[0] = NS.scale
    x[1] = NS + 1.0


ARRAYS = types.SimpleNamespace(weights=np.ones(3), items=[1, 2], table={"a": 1})


class FC:
    scale = 2.0
    use_bias = [True]  # not a constant


@qnb.kernel
def reads_two_fields(x: qnb.Array[qnb.f32, 1]):
    x[0] = FC.scale
    x[1] = FC.use_bias


@qnb.kernel
def reads_an_array(x: qnb.Array[qnb.f32, 1]):
    x[0] = 1.0
    x[1] = ARRAYS.weights[0]


@qnb.kernel
def reads_a_list_inside_static(x: qnb.Array[qnb.f32, 1]):
    x[0] = 1.0
    x[1] = qnb.static(ARRAYS.items[0])


@qnb.kernel
def reads_a_dict(x: qnb.Array[qnb.f32, 1]):
    x[0] = ARRAYS.table


class WithMethod:
    def scale(self):
        return 2.0


WITH_METHOD = WithMethod()


@qnb.kernel
def calls_a_method(x: qnb.Array[qnb.f32, 1]):
    x[0] = qnb.static(WITH_METHOD.scale())


def _error(kernel):
    with pytest.raises(QnbCaptureError) as info:
        _launch(kernel)
    return info.value


def _line_of(kernel, text):
    source, first = kernel.__wrapped__.__code__, kernel.__wrapped__.__code__.co_firstlineno
    import inspect

    lines = inspect.getsource(kernel.__wrapped__).splitlines()
    assert source  # (the kernel's own function)
    return first + next(i for i, line in enumerate(lines) if text in line)


@pytest.mark.parametrize(
    "kernel, line, words",
    [
        (reads_two_fields, "x[1] = FC.use_bias", ["'FC.use_bias'", "list", "make it a tuple"]),
        (reads_an_array, "ARRAYS.weights[0]", ["'ARRAYS.weights'", "numpy.ndarray",
                                                 "pass it as a parameter"]),
        (reads_a_list_inside_static, "ARRAYS.items", ["'ARRAYS.items'", "make it a tuple"]),
        (reads_a_dict, "ARRAYS.table", ["'ARRAYS.table'", "dict", "SimpleNamespace"]),
        (calls_a_method, "WITH_METHOD.scale()", ["'WITH_METHOD.scale'", "a method of",
                                                  "cannot follow", "qnb.Template"]),
        (uses_the_object_as_a_value, "len(CFG)", ["'CFG'", "as a value", "attributes only"]),
        (calls_a_class, "Settings()", ["calls 'Settings'", "the class", "cannot key"]),
        (branches_on_the_object, "if NS:", ["'NS'", "as a value"]),
        (adds_to_the_object, "NS + 1.0", ["'NS'", "as a value"]),
    ],
    ids=["list-field", "array", "list-in-static", "dict", "method", "len", "class-call",
         "truth", "arithmetic"],
)  # fmt: skip
def test_what_is_not_a_constant_is_a_capture_error_at_its_own_line(kernel, line, words):
    err = _error(kernel)
    assert err.lineno == _line_of(kernel, line), (err.lineno, str(err))
    for word in words:
        assert word in err.message, err.message
    assert "only functions" not in err.message  # (says what was read)
