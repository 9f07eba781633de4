"""Scans (contract: "``t.cumsum(axis)``, ``t.cumprod(axis)`` (axis 0 or 1), ``v.cumsum()``,
``v.cumprod()`` → same shape, inclusive, as NumPy's"), on every backend, at tile shapes
1×N, N×1 and M×N and vecs of 1 to 128, in f32, f16, bf16, i32 (wrapping) and bool,
against NumPy in f64 (or exact integers); outputs poisoned first. Then a two-level scan
of 10⁶ elements (each program scans its block, a second launch scans the block totals,
a third adds each block's offset), the way a scan longer than a tile is written.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import qnb
from tests.helpers import define, skip_unless_dtype_runs

SHAPES = [(1, 16), (16, 1), (8, 32), (16, 16), (4, 128)]
DTYPES = {
    "f32": np.float32,
    "f16": np.float16,
    "bf16": ml_dtypes.bfloat16,
    "i32": np.int32,
    "bool": np.bool_,
}
FORMS = [(op, axis) for op in ("cumsum", "cumprod") for axis in (0, 1)]


def _tile_source(shape) -> str:
    m, n = shape
    lines = [
        "@qnb.kernel",
        "def forms(x, o0, o1, o2, o3):",
        f"    t = Tile[{m}, {n}].load(x, 0, 0)",
    ]
    for k, (op, axis) in enumerate(FORMS):
        lines.append(f"    t.{op}(axis={axis}).store(o{k}, 0, 0)")
    return "\n".join(lines) + "\n"


def _inputs(shape, dtype):
    rng = np.random.default_rng(sum(shape) + np.dtype(dtype).itemsize)
    if dtype == np.int32:  # large enough that sums of 128 and products of 3 wrap
        return rng.integers(-(2**29), 2**29, shape).astype(np.int32)
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    return rng.uniform(0.8, 1.25, shape).astype(dtype)  # products neither vanish nor overflow


def _expected(op, axis, x):
    """NumPy's scan of ``x``: exact (and wrapped) for integers, in f64 for floats."""
    if x.dtype in (np.int32, np.bool_):
        wide = x.astype(np.int64)
        value = np.cumsum(wide, axis) if op == "cumsum" else _wrapped_cumprod(wide, axis)
        return ((value + 2**31) % 2**32 - 2**31).astype(np.int32)
    wide = x.astype(np.float64)
    value = np.cumsum(wide, axis) if op == "cumsum" else np.cumprod(wide, axis)
    return value.astype(x.dtype)


def _wrapped_cumprod(wide, axis):
    """An i32 running product wraps at every step (an int64 product of 128 would not)."""
    out = np.moveaxis(wide.copy(), axis, 0)
    for k in range(1, out.shape[0]):
        out[k] = ((out[k - 1] * out[k] + 2**31) % 2**32) - 2**31
    return np.moveaxis(out, 0, axis)


def _poison(want):
    fill = -12345 if want.dtype.kind in "iu" else np.nan
    return np.full(want.shape, fill).astype(want.dtype)


def _close(got, want, label):
    if want.dtype.kind in "iu":
        np.testing.assert_array_equal(got, want, err_msg=label)
        return
    # one rounding per element from an f32 running value (f16, bf16), or f32 rounding
    # over up to 128 in-order steps
    rtol = {np.float16: 2e-3, ml_dtypes.bfloat16: 1.6e-2}.get(want.dtype.type, 3e-5)
    np.testing.assert_allclose(
        got.astype(np.float64), want.astype(np.float64), rtol=rtol, atol=0, err_msg=label
    )


@pytest.mark.parametrize("dtype_name", list(DTYPES))
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_tile_scans_along_each_axis_match_numpy(backend_name, shape, dtype_name):
    dtype = DTYPES[dtype_name]
    skip_unless_dtype_runs(backend_name, dtype)
    scope, _ = define(_tile_source(shape), {"Tile": qnb.Tile})
    x = _inputs(shape, dtype)
    wants = [_expected(op, axis, x) for op, axis in FORMS]
    outs = [_poison(w) for w in wants]
    if backend_name == "wgpu" and dtype is ml_dtypes.bfloat16:  # WGSL has no bf16
        with pytest.raises(qnb.BackendError, match="no bf16"), qnb.backend(backend_name):
            scope["forms"][1](x, *outs)
        return
    with qnb.backend(backend_name):
        scope["forms"][1](x, *outs)
    for (op, axis), want, got in zip(FORMS, wants, outs):
        _close(got, want, f"{op}(axis={axis}) of {dtype_name} {shape} on {backend_name}")


@pytest.mark.parametrize("dtype_name", ["f32", "i32", "bool"])
@pytest.mark.parametrize("n", [1, 16, 128])
def test_vec_scans_match_numpy(backend_name, n, dtype_name):
    dtype = DTYPES[dtype_name]
    scope, _ = define(
        f"@qnb.kernel\ndef forms(x, a, b):\n"
        f"    v = qnb.Vec[{n}].load(x, 0)\n"
        f"    v.cumsum().store(a, 0)\n"
        f"    v.cumprod(axis=0).store(b, 0)\n"
    )
    x = _inputs((n,), dtype)
    wants = [_expected("cumsum", 0, x), _expected("cumprod", 0, x)]
    outs = [_poison(w) for w in wants]
    with qnb.backend(backend_name):
        scope["forms"][1](x, *outs)
    for op, want, got in zip(("cumsum", "cumprod"), wants, outs):
        _close(got, want, f"v.{op}() of {dtype_name} Vec[{n}] on {backend_name}")


def test_scans_of_every_program_s_own_tile(backend_name):
    """Each of a 2-D grid's programs scans its own tile (the cpu runs all of them at
    once, a GPU one per workgroup or block)."""
    scope, _ = define(
        "@qnb.kernel\ndef rows(x, y):\n"
        "    i = qnb.program_id(0) * 8\n"
        "    j = qnb.program_id(1) * 16\n"
        "    (Tile[8, 16].load(x, i, j).cumsum(axis=1) * 2.0).store(y, i, j)\n",
        {"Tile": qnb.Tile},
    )
    x = _inputs((24, 48), np.float32)
    y = np.full_like(x, np.nan)
    with qnb.backend(backend_name):
        scope["rows"][3, 3](x, y)
    want = np.cumsum(x.reshape(24, 3, 16).astype(np.float64), axis=2).reshape(24, 48) * 2
    np.testing.assert_allclose(y, want, rtol=3e-6)


BLOCK = 1024

TWO_LEVEL, _ = define(f"""
    @qnb.kernel
    def block_scans(x: qnb.Array[qnb.f32, 1], out: qnb.Array[qnb.f32, 1],
                    totals: qnb.Array[qnb.f32, 1]):
        i = qnb.program_id(0)
        v = qnb.Vec[{BLOCK}].load(x, i * {BLOCK}).cumsum()  # (past the end: zeros)
        v.store(out, i * {BLOCK})
        totals[i] = v[{BLOCK - 1}]

    @qnb.kernel
    def scan_totals(totals: qnb.Array[qnb.f32, 1], offsets: qnb.Array[qnb.f32, 1]):
        carry = 0.0  # one program: the totals, a vec at a time, each carried into the next
        for start in range(0, totals.shape[0], {BLOCK}):
            v = qnb.Vec[{BLOCK}].load(totals, start).cumsum() + carry
            v.store(offsets, start)
            carry = v[{BLOCK - 1}]

    @qnb.kernel
    def add_offsets(out: qnb.Array[qnb.f32, 1], offsets: qnb.Array[qnb.f32, 1]):
        i = qnb.program_id(0)
        if i > 0:
            (qnb.Vec[{BLOCK}].load(out, i * {BLOCK}) + offsets[i - 1]).store(out, i * {BLOCK})
    """)


@pytest.mark.parametrize("n", [1, 5000, 10**6])
def test_a_two_level_scan_over_many_blocks_matches_numpy(backend_name, n):
    if backend_name != "cpu" and n > 10**5:
        n = 200_003  # (lavapipe and cuda-host run a program at a time: the shape, smaller)
    x = np.random.default_rng(n).uniform(-1.0, 1.0, n).astype(np.float32)
    blocks = qnb.cdiv(n, BLOCK)
    out = np.full(n, np.nan, np.float32)
    totals = np.full(blocks, np.nan, np.float32)
    offsets = np.full(blocks, np.nan, np.float32)
    with qnb.backend(backend_name):
        TWO_LEVEL["block_scans"][blocks](x, out, totals)
        TWO_LEVEL["scan_totals"][1](totals, offsets)
        TWO_LEVEL["add_offsets"][blocks](out, offsets)
    want = np.cumsum(x.astype(np.float64))
    # f32 running sums: each element's error grows with the steps that made it (a block's
    # 1,024, then the carried offsets), against a magnitude of at most sqrt(n) or so
    scale = np.maximum(np.abs(want), np.sqrt(np.arange(1, n + 1)))
    assert np.isfinite(out).all(), "an element no program wrote (still NaN)"
    assert (np.abs(out - want) <= 2e-6 * (BLOCK + blocks) * scale).all()


@pytest.mark.parametrize(
    "call,words",
    [
        ("t.cumsum()", "axis 0 or 1"),
        ("t.cumsum(axis=2)", "axis 0 or 1"),
        ("t.row(0).cumprod(axis=1)", "axis None or 0"),
        ("t.cumsum(axis=i)", "compile-time"),
    ],
)
def test_misuse_is_refused_at_the_user_s_line(call, words):
    scope, filename = define(
        "@qnb.kernel\ndef bad(x, out):\n    i = qnb.program_id(0)\n"
        f"    t = qnb.Tile16.load(x, 0, 0)\n    {call}.store(out, 0, 0)\n"
    )
    with pytest.raises(qnb.QnbTypeError) as caught, qnb.backend("cpu"):
        scope["bad"][1](np.ones((16, 16), np.float32), np.zeros((16, 16), np.float32))
    assert (caught.value.filename, caught.value.lineno) == (filename, 5)
    assert words in str(caught.value)
