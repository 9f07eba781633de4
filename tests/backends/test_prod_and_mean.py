"""``prod`` and ``mean`` (contract: "The same forms for t.prod(...), t.mean(...), v.prod()
and v.mean()"), on every backend, at tile shapes 1×N, N×1 and M×N, every axis, with and
without keepdims, in f32, f16 and i32 (and bool for the mean), against NumPy: the product
of narrow floats accumulates in f32 and rounds once, an i32 product wraps, the mean is the
sum over the count in the float dtype (f32 for i32 and bool). One kernel per shape and
dtype computes every form; its outputs are poisoned first."""

from __future__ import annotations

import numpy as np
import pytest

import qnb
from tests.helpers import define, skip_unless_dtype_runs

SHAPES = [(1, 16), (16, 1), (8, 32)]
DTYPES = {"f32": np.float32, "f16": np.float16, "i32": np.int32, "bool": np.bool_}
FORMS = [
    (op, axis, keep) for op in ("prod", "mean") for axis in (None, 0, 1) for keep in (False, True)
]


def _source(shape, dtype_name) -> str:
    m, n = shape
    lines = [
        "@qnb.kernel",
        "def forms(x, " + ", ".join(f"o{k}" for k in range(len(FORMS))) + "):",
        f"    t = Tile[{m}, {n}].load(x, 0, 0)",
    ]
    for k, (op, axis, keep) in enumerate(FORMS):
        value = f"t.{op}(axis={axis}, keepdims={keep})"
        if axis is None and not keep:
            lines.append(f"    o{k}[0] = {value}")
        else:  # a vec (1-D array) or a kept tile (2-D array)
            lines.append(f"    {value}.store(o{k}, 0" + (", 0)" if keep else ")"))
    return "\n".join(lines) + "\n"


def _inputs(shape, dtype):
    rng = np.random.default_rng(sum(shape))
    if dtype == np.int32:
        return rng.integers(-7, 8, shape).astype(np.int32)  # products of 32 wrap
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    return rng.uniform(0.7, 1.3, shape).astype(dtype)  # products neither vanish nor overflow


def _expected(op, axis, keep, x):
    wide = x.astype(np.float64) if x.dtype != np.int32 else x
    if op == "prod":
        if x.dtype == np.int32:
            value = np.prod(x.astype(np.int64), axis=axis, keepdims=keep)
            return ((value + 2**31) % 2**32 - 2**31).astype(np.int32)  # i32 wraps
        if x.dtype == np.bool_:
            return np.prod(x.astype(np.int32), axis=axis, keepdims=keep).astype(np.int32)
        return np.prod(wide, axis=axis, keepdims=keep).astype(x.dtype)
    mean = np.mean(wide.astype(np.float64), axis=axis, keepdims=keep)
    return mean.astype(x.dtype if x.dtype in (np.float32, np.float16) else np.float32)


@pytest.mark.parametrize("dtype_name", list(DTYPES))
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_prod_and_mean_in_every_form_match_numpy(backend_name, shape, dtype_name):
    dtype = DTYPES[dtype_name]
    skip_unless_dtype_runs(backend_name, dtype)
    scope, _ = define(_source(shape, dtype_name), {"Tile": qnb.Tile})
    x = _inputs(shape, dtype)
    wants = [_expected(op, axis, keep, x) for op, axis, keep in FORMS]
    outs = []
    for want in wants:
        size = max(np.asarray(want).size, 1)
        out_shape = want.shape if want.ndim else (1,)
        poison = np.full(size, -12345 if want.dtype.kind in "iu" else np.nan).reshape(out_shape)
        outs.append(poison.astype(want.dtype))
    with qnb.backend(backend_name):
        scope["forms"][1](x, *outs)
    for (op, axis, keep), want, got in zip(FORMS, wants, outs):
        label = f"{op}(axis={axis}, keepdims={keep}) of {dtype_name} {shape}"
        got = got.reshape(np.shape(want))
        if want.dtype.kind in "iu":
            np.testing.assert_array_equal(got, want, err_msg=label)
        else:
            rtol = 2e-3 if want.dtype == np.float16 else 2e-6
            np.testing.assert_allclose(got, want, rtol=rtol, atol=0, err_msg=label)


def test_an_f16_product_accumulates_in_f32_and_rounds_once():
    """Sixteen factors of 1.0009765625 (1 + one f16 ulp): f16 after every step would stay
    at 1 + k ulps; f32 accumulation rounds the exact 1.01575… once."""
    scope, _ = define("@qnb.kernel\ndef p(x, out):\n    out[0] = qnb.Vec16.load(x, 0).prod()\n")
    x = np.full(16, 1.0009765625, np.float16)
    out = np.zeros(1, np.float16)
    with qnb.backend("cpu"):
        scope["p"][1](x, out)
    assert out[0] == np.float16(np.prod(x.astype(np.float32)))


@pytest.mark.parametrize("call", ["t.mean(axis=2)", "t.prod(keepdims=1)"])
def test_misuse_is_refused_at_the_user_s_line(call):
    scope, filename = define(
        f"@qnb.kernel\ndef bad(x, out):\n    t = qnb.Tile16.load(x, 0, 0)\n    out[0] = {call}\n"
    )
    with pytest.raises(qnb.QnbTypeError) as caught, qnb.backend("cpu"):
        scope["bad"][1](np.ones((16, 16), np.float32), np.zeros(1, np.float32))
    assert (caught.value.filename, caught.value.lineno) == (filename, 4)
