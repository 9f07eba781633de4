"""``qnb.check``'s surface: what it takes, what it refuses, what it leaves alone, and the
cpu executor's one-at-a-time orders it runs."""

from __future__ import annotations

import numpy as np
import pytest

import qnb
from qnb import Vec16


@qnb.kernel
def reads_past_the_end(x, out):
    i = qnb.program_id(0)
    out[i] = x[i + 10]  # the out-of-range read


@qnb.kernel
def modulo_store(x, out, s: qnb.f32, n: qnb.Template):
    i = qnb.program_id(0)
    out[i % n] = x[i] * s


@qnb.kernel
def store_one(out):
    out[0] = 1.0


@qnb.kernel
def copy_vecs(x, out):
    i = qnb.program_id(0) * 16
    Vec16.load(x, i).store(out, i)


def _line(kernel, text: str) -> int:
    import inspect

    lines, first = inspect.getsourcelines(kernel.__wrapped__)
    return first + next(k for k, line in enumerate(lines) if text in line)


def test_a_kernel_alone_is_one_program():
    found = qnb.check(store_one, np.zeros(1, np.float32))
    assert found.ok and found.hazards == [] and found.grid == (1, 1, 1)
    assert found.summary() == "store_one[1×1×1]: no hazard between programs"
    assert not found.order_dependent


def test_scalars_templates_and_a_3d_grid():
    x = np.ones(8, np.float32)
    found = qnb.check(modulo_store[2, 2, 2], x, np.zeros(8, np.float32), 2.0, 8)
    first = found.hazards[0]
    assert (first.kind, first.array, first.index) == ("write-write", "out", (0,))
    assert first.programs == ((0, 0, 0), (0, 1, 0)) and first.values == (2.0, 2.0)
    assert found.elements == {"out": 2}
    assert "(6 program pairs)" in found.summary()


def test_device_arrays_and_empty_arrays():
    assert not qnb.check(store_one[2], qnb.to_device(np.zeros(1, np.float32), "cpu")).ok
    assert "(1 program pair)" in qnb.check(store_one[2], np.zeros(1, np.float32)).summary()
    assert qnb.check(copy_vecs[3], np.zeros(0, np.float32), np.zeros(0, np.float32)).ok


def test_an_error_of_the_launch_is_the_checks_at_the_users_line():
    with pytest.raises(qnb.QnbIndexError, match="index out of range for 'x'") as caught:
        qnb.check(reads_past_the_end[4], np.zeros(4, np.float32), np.zeros(4, np.float32))
    assert caught.value.lineno == _line(reads_past_the_end, "the out-of-range read")


def test_what_it_refuses():
    with pytest.raises(qnb.QnbTypeError, match=r"qnb\.check takes a launch"):
        qnb.check(np.zeros(3))
    with pytest.raises(qnb.QnbTypeError, match="not C-contiguous"):
        qnb.check(copy_vecs[1], np.zeros(32, np.float32)[::2], np.zeros(16, np.float32))


def test_the_arguments_are_not_changed_and_aliases_stay_aliases():
    x = np.arange(64, dtype=np.float32)
    kept = x.copy()
    found = qnb.check(copy_vecs[3], x[:48], x[16:])  # out is x shifted by 16: a race
    np.testing.assert_array_equal(x, kept)
    first = found.hazards[0]
    assert first.kind == "read-write" and first.array == "out" and first.index == (0,)
    assert first.programs == ((1, 0, 0), (0, 0, 0))


def test_the_cpu_runs_programs_one_at_a_time_in_either_order():
    from qnb.backends.cpu import interpreter

    @qnb.kernel
    def last_one_wins(out):
        out[0] = qnb.program_id(0) * 1.0

    out = np.zeros(1, np.float32)
    kernel_ir = last_one_wins._lower_for([out])[0]
    for order, want in (("forward", 4.0), ("reverse", 0.0), (None, 4.0)):
        interpreter.run(kernel_ir, (5, 1, 1), [out], order=order)
        assert out[0] == want, order
    with pytest.raises(ValueError, match="order is None, 'forward' or 'reverse'"):
        interpreter.run(kernel_ir, (5, 1, 1), [out], order="random")
    found = qnb.check(last_one_wins[5], out)
    assert found.order_dependent and found.hazards[0].values == (0.0, 1.0)
