"""Names as Python users write them: a local rebound to a value of another shape or dtype
holds the new value from that assignment on (``m = m[:, None]``, ``mask = qnb.where(mask,
0.0, -math.inf)``); inside a loop or a runtime branch a name keeps one type, and a change
there is refused at the assignment that makes it; a local holding a compile-time number
stays compile-time when passed to a ``@qnb.func``. On every backend, against NumPy."""

from __future__ import annotations

import math

import numpy as np
import pytest

import qnb
from qnb import Tile

BM = 32
HALF = 16


@qnb.kernel
def centre_rows(x: qnb.Array[qnb.f32, 2], out: qnb.Array[qnb.f32, 2]):
    t = Tile[16, 32].load(x, qnb.program_id(0) * 16, 0)
    m = t.max(axis=1)  # a Vec[16]
    m = m[:, None]  # now a Tile[16, 1]
    mask = t > 0.0  # a bool tile
    mask = qnb.where(mask, 0.0, -math.inf)  # now an f32 tile
    (t - m + mask).store(out, qnb.program_id(0) * 16, 0)


@qnb.kernel
def scalar_rebound(out: qnb.Array[qnb.f32, 1], n: qnb.i32):
    k = n * 3  # an i32
    k = k * 0.5  # now an f32
    out[0] = k
    k = k > 2.0  # now a bool
    out[1] = qnb.where(k, 10.0, 20.0)


@qnb.kernel
def rebound_in_a_loop_body(x: qnb.Array[qnb.f32, 2], out: qnb.Array[qnb.f32, 2]):
    acc = Tile[16, 1].zeros(qnb.f32)
    for col in range(0, x.shape[1], 16):
        m = Tile[16, 16].load(x, 0, col).max(axis=1)  # bound in the body, then rebound there
        m = m[:, None]
        acc = acc + m
    acc.store(out, 0, 0)


@qnb.func
def first_rows(rows, x):
    return Tile[rows, 16].load(x, 0, 0)


@qnb.kernel
def static_local_to_func(x: qnb.Array[qnb.f32, 2], out: qnb.Array[qnb.f32, 2]):
    b = qnb.static(BM // 2)
    first_rows(b, x).store(out, 0, 0)


@qnb.kernel
def captured_local_to_func(x: qnb.Array[qnb.f32, 2], out: qnb.Array[qnb.f32, 2]):
    b = HALF
    first_rows(b, x).store(out, 0, 0)


def test_a_tile_and_a_mask_rebound_to_other_types(backend_name):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((32, 32)).astype(np.float32)
    out = np.full_like(x, np.nan)
    with qnb.backend(backend_name):
        centre_rows[2](x, out)
    expected = x - x.max(axis=1, keepdims=True) + np.where(x > 0, 0.0, -np.inf)
    np.testing.assert_allclose(out, expected.astype(np.float32), rtol=1e-6)


def test_a_scalar_rebound_from_int_to_float_to_bool(backend_name):
    out = np.full(2, np.nan, np.float32)
    with qnb.backend(backend_name):
        scalar_rebound[1](out, 3)
    assert out.tolist() == [4.5, 10.0]  # 3 * 3 = 9 (an int), * 0.5 = 4.5 (a float) > 2


def test_a_name_bound_and_rebound_inside_one_loop_body(backend_name):
    rng = np.random.default_rng(4)
    x = rng.standard_normal((16, 64)).astype(np.float32)
    out = np.full((16, 1), np.nan, np.float32)
    with qnb.backend(backend_name):
        rebound_in_a_loop_body[1](x, out)
    expected = x.reshape(16, 4, 16).max(axis=2).sum(axis=1, keepdims=True)
    np.testing.assert_allclose(out, expected, rtol=1e-5)


@pytest.mark.parametrize("kernel", [static_local_to_func, captured_local_to_func])
def test_a_compile_time_local_passed_to_a_func_stays_compile_time(backend_name, kernel):
    x = np.random.default_rng(5).standard_normal((32, 16)).astype(np.float32)
    out = np.full((16, 16), np.nan, np.float32)
    with qnb.backend(backend_name):
        kernel[1](x, out)
    np.testing.assert_array_equal(out, x[:16])


def test_the_trace_names_a_rebound_variable_as_the_user_wrote_it():
    x = np.random.default_rng(6).standard_normal((32, 32)).astype(np.float32)
    trace = centre_rows.trace[2](x, np.zeros_like(x))
    names = {step.target for step in trace.steps(0)}
    assert {"m", "mask"} <= names, names


def _error_line(kernel, *args) -> tuple[int, str]:
    with pytest.raises(qnb.QnbTypeError) as caught:
        kernel[1](*args)
    return caught.value.lineno - kernel.parsed.firstlineno, caught.value.message


def test_a_loop_carried_change_of_dtype_is_refused_at_the_assignment_that_makes_it():
    @qnb.kernel
    def carried(x: qnb.Array[qnb.f32, 2], out: qnb.Array[qnb.f32, 2]):
        t = Tile[16, 16].load(x, 0, 0)
        mask = t > 0.0
        for _i in range(2):
            mask = mask & (t < 1.0)
            mask = qnb.where(mask, 0.0, -math.inf)
        mask.store(out, 0, 0)

    x = np.ones((16, 16), np.float32)
    line, message = _error_line(carried, x, x.copy())
    assert line == 5, message  # the where line (def + 5), not the & line before it
    assert "'mask'" in message and "keeps its type there" in message


def test_a_change_of_shape_under_a_runtime_branch_is_refused_at_its_assignment():
    @qnb.kernel
    def branch(x: qnb.Array[qnb.f32, 2], out: qnb.Array[qnb.f32, 2]):
        m = Tile[16, 16].load(x, 0, 0).max(axis=1)
        if qnb.program_id(0) == 0:
            m = m[:, None]
        m.store(out, 0, 0)

    x = np.ones((16, 16), np.float32)
    line, message = _error_line(branch, x, x.copy())
    assert line == 3, message
    assert "Vec16" in message and "Tile[16, 1]" in message
