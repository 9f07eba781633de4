"""More scans beside ``test_scans.py`` (a second hand's cases, kept for what they add): a
Vec of 1, 2 and 4096 elements (the GPU backends' largest value: 16 slots a thread), scans
inside expressions on a 64×64 tile with 32 threads (lines past the threads, a scan of a
scan, ``.row`` of a scan, a bool mask's running count), and an f16 running product that
rounds each exact prefix once. References are computed wide (f64 for floats, i64 wrapped
to i32 for integers) on random non-zero inputs, outputs poisoned first."""

import numpy as np
import pytest

import qnb
from tests.helpers import define

_EPS = {"float32": 2.0**-24, "float16": 2.0**-11, "bfloat16": 2.0**-8}  # half an ulp


def _summands(shape, dtype, rng):
    """Random non-zero values: i32 large enough that its sums wrap, floats of both signs."""
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    if dtype == np.int32:
        return (rng.integers(1, 2**30, shape) * rng.choice([-1, 1], shape)).astype(np.int32)
    signs = rng.choice([-1.0, 1.0], shape)
    return (rng.uniform(0.25, 2.0, shape) * signs).astype(dtype)


def _factors(shape, dtype, rng):
    """Random non-zero factors: i32 in ±1..7 (products of 16 wrap), floats near 1 (a product
    of 64 stays finite), some negative."""
    if dtype == np.bool_:
        return rng.random(shape) < 0.8
    if dtype == np.int32:
        return (rng.integers(1, 8, shape) * rng.choice([-1, 1], shape)).astype(np.int32)
    signs = rng.choice([-1.0, 1.0], shape, p=[0.1, 0.9])
    return (rng.uniform(0.9, 1.1, shape) * signs).astype(dtype)


def reference(op, x, axis):
    """NumPy's inclusive scan of ``x`` along ``axis``, computed wide: f64 prefixes for
    floats; for integers and bools i64 wrapped to i32 (a product at every step, where the
    i64 product itself would overflow)."""
    if x.dtype.kind not in "bi":
        return getattr(np, f"cum{op}")(x.astype(np.float64), axis=axis)
    if op == "sum":
        wide = np.cumsum(x.astype(np.int64), axis=axis)
        return ((wide + 2**31) % 2**32 - 2**31).astype(np.int32)
    lines = np.moveaxis(x.astype(np.int64), axis, 0)
    out = np.empty(lines.shape, np.int32)
    acc = np.ones(lines.shape[1:], np.int64)
    for k in range(lines.shape[0]):
        acc = (acc * lines[k] + 2**31) % 2**32 - 2**31
        out[k] = acc
    return np.moveaxis(out, 0, axis)


def check_scan(got, want, x, op, axis, label):
    """Integers exactly; floats within what any order of f32 accumulation and one final
    rounding allow: |got - want| <= eps·|want| + n·2⁻²⁴·(the same scan of |x|)."""
    got = np.asarray(got).reshape(want.shape)
    if want.dtype.kind == "i":
        np.testing.assert_array_equal(got, want, err_msg=label)
        return
    n = x.shape[axis]
    scale = getattr(np, f"cum{op}")(np.abs(x.astype(np.float64)), axis=axis)
    bound = _EPS[x.dtype.name] * np.abs(want) + n * 2.0**-24 * scale
    wide = got.astype(np.float64)
    bad = ~(np.abs(wide - want) <= bound)  # (a NaN left by the poison fails too)
    assert not bad.any(), (
        f"{label}: {int(bad.sum())} of {want.size} elements off, first at "
        f"{np.argwhere(bad)[0].tolist()}: got {wide[bad][0]!r}, want {want[bad][0]!r}"
    )


def _poisoned(want_dtype, shape):
    if want_dtype == np.int32:
        return np.full(shape, -12345, np.int32)
    return np.full(shape, np.nan, want_dtype)


def _run(backend_name, kernel, grid, *args):
    """Run ``kernel`` on ``backend_name``; bf16 on wgpu must refuse with a BackendError."""
    with qnb.backend(backend_name):
        kernel[grid](*args)


@pytest.mark.parametrize("n", [1, 2, 4096])
def test_vec_scans_at_the_smallest_and_largest_lengths(backend_name, n):
    """A Vec[1] (the scan is the element), a Vec[2] and a Vec[4096] (the GPU backends'
    largest value: 16 slots a thread), f32 sums and i32 products."""
    scope, _ = define(
        f"""
@qnb.kernel
def vecs(x, k, o, q):
    Vec[{n}].load(x, 0).cumsum().store(o, 0)
    Vec[{n}].load(k, 0).cumprod().store(q, 0)
""",
        {"Vec": qnb.Vec},
    )
    rng = np.random.default_rng(n)
    x, k = _summands((n,), np.float32, rng), _factors((n,), np.int32, rng)
    o, q = _poisoned(np.float32, (n,)), _poisoned(np.int32, (n,))
    _run(backend_name, scope["vecs"], 1, x, k, o, q)
    check_scan(o, reference("sum", x, 0), x, "sum", 0, f"Vec[{n}] cumsum")
    check_scan(q, reference("prod", k, 0), k, "prod", 0, f"Vec[{n}] cumprod")


_COMPOSED = """
@qnb.kernel(threads=32)
def composed(x, exclusive, twice, rows, lanes):
    i = qnb.program_id(0)
    t = Tile[64, 64].load(x, i * 64, 0)
    (t.cumsum(axis=1) - t).store(exclusive, i * 64, 0)
    t.cumsum(0).cumsum(1).store(twice, i * 64, 0)
    u = Vec[64].load_row(x, i * 64 + 5, 0)
    (u.cumsum() + t.cumsum(axis=1).row(5)).store_row(rows, i, 0)
    (t > 0.0).cumsum(axis=0).store(lanes, i * 64, 0)
"""


def test_scans_inside_expressions_and_wider_than_the_program(backend_name):
    """32 threads (``threads=32``) scan 64 lines of a 64×64 tile, two programs; the scans
    feed elementwise ops, another scan, ``.row`` and a bool mask's running count."""
    scope, _ = define(_COMPOSED, {"Tile": qnb.Tile, "Vec": qnb.Vec})
    rng = np.random.default_rng(5)
    x = _summands((128, 64), np.float32, rng)
    exclusive, twice = _poisoned(np.float32, (128, 64)), _poisoned(np.float32, (128, 64))
    rows, lanes = _poisoned(np.float32, (2, 64)), _poisoned(np.int32, (128, 64))
    _run(backend_name, scope["composed"], 2, x, exclusive, twice, rows, lanes)
    for i in range(2):
        block = x[i * 64 : (i + 1) * 64].astype(np.float64)
        here = slice(i * 64, (i + 1) * 64)
        incl = np.cumsum(block, axis=1)
        np.testing.assert_allclose(exclusive[here], incl - block, rtol=1e-5, atol=1e-4)
        np.testing.assert_allclose(
            twice[here], np.cumsum(np.cumsum(block, 0), 1), rtol=1e-5, atol=1e-3
        )
        np.testing.assert_allclose(rows[i], 2 * incl[5], rtol=1e-5, atol=1e-4)
        np.testing.assert_array_equal(lanes[here], np.cumsum(block > 0, axis=0))


def test_f16_scans_accumulate_in_f32_and_round_each_element_once():
    """Sixteen 1 + 2⁻¹⁰ (one f16 ulp over 1): f16 after every step would stay at 1 + k
    ulps; the f32 running product rounds each exact prefix once."""
    scope, _ = define("@qnb.kernel\ndef p(x, o):\n    qnb.Vec16.load(x, 0).cumprod().store(o, 0)\n")
    x = np.full(16, 1.0009765625, np.float16)
    o = np.zeros(16, np.float16)
    with qnb.backend("cpu"):
        scope["p"][1](x, o)
    np.testing.assert_array_equal(o, np.cumprod(x.astype(np.float32)).astype(np.float16))
