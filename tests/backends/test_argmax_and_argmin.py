"""``argmax`` and ``argmin`` (contract: "Index reductions"), on every backend, at 1×N, N×1
and M×N tiles and on vecs, every axis, in f32 (with ties and NaNs), f16, i32 and bool,
against NumPy: i32 results, the first index of the extreme value, the flat C-order index
for axis None, and a NaN counting as the extreme. One kernel per shape and dtype computes
every form; its outputs are poisoned first."""

from __future__ import annotations

import numpy as np
import pytest

import qnb
from tests.helpers import define, skip_unless_dtype_runs

SHAPES = [(1, 16), (16, 1), (8, 32)]
DTYPES = {"f32": np.float32, "f16": np.float16, "i32": np.int32, "bool": np.bool_}
FORMS = [(op, axis) for op in ("argmax", "argmin") for axis in (None, 0, 1)]


def _source(shape) -> str:
    m, n = shape
    outs = ", ".join(f"o{k}" for k in range(len(FORMS)))
    lines = [
        "@qnb.kernel",
        f"def forms(x, v, {outs}, ov):",
        f"    t = Tile[{m}, {n}].load(x, 0, 0)",
    ]
    for k, (op, axis) in enumerate(FORMS):
        if axis is None:
            lines.append(f"    o{k}[0] = t.{op}()")
        else:
            lines.append(f"    t.{op}(axis={axis}).store(o{k}, 0)")
    lines += ["    w = Vec[32].load(v, 0)", "    ov[0] = w.argmax()", "    ov[1] = w.argmin()"]
    return "\n".join(lines) + "\n"


def _values(shape, dtype, rng, nans):
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    x = rng.integers(-3, 4, shape).astype(dtype)  # few values: many ties
    if nans and dtype != np.int32 and x.size > 4:
        flat = x.reshape(-1)
        flat[rng.choice(flat.size, 2, replace=False)] = np.nan
    return x


@pytest.mark.parametrize("nans", [False, True], ids=["ties", "nans"])
@pytest.mark.parametrize("dtype_name", list(DTYPES))
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_argmax_and_argmin_in_every_form_match_numpy(backend_name, shape, dtype_name, nans):
    dtype = DTYPES[dtype_name]
    if nans and dtype in (np.int32, np.bool_):
        pytest.skip("no NaN in an integer or bool array")
    skip_unless_dtype_runs(backend_name, dtype)
    scope, _ = define(_source(shape), {"Tile": qnb.Tile, "Vec": qnb.Vec})
    rng = np.random.default_rng(sum(shape) + nans)
    x, v = _values(shape, dtype, rng, nans), _values((32,), dtype, rng, nans)
    wants = [np.asarray(getattr(np, op)(x, axis=axis)) for op, axis in FORMS]
    outs = [np.full(max(w.size, 1), -7, np.int32) for w in wants]
    out_v = np.full(2, -7, np.int32)
    with qnb.backend(backend_name):
        scope["forms"][1](x, v, *outs, out_v)
    for (op, axis), want, got in zip(FORMS, wants, outs):
        np.testing.assert_array_equal(got, want.reshape(-1), err_msg=f"{op}(axis={axis})")
    assert out_v.tolist() == [int(np.argmax(v)), int(np.argmin(v))]


def test_an_index_reduction_refuses_keepdims_and_a_bad_axis_at_the_user_s_line():
    for call in ("t.argmax(axis=3)", "t.argmin(keepdims=True)"):
        scope, filename = define(
            f"@qnb.kernel\ndef bad(x, out):\n    t = qnb.Tile16.load(x, 0, 0)\n    out[0] = {call}\n"
        )
        with pytest.raises(qnb.QnbTypeError) as caught, qnb.backend("cpu"):
            scope["bad"][1](np.ones((16, 16), np.float32), np.zeros(1, np.int32))
        assert (caught.value.filename, caught.value.lineno) == (filename, 4), call
