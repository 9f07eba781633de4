"""Rows longer than a tile: a row softmax and a layer norm over rows of 1,000 and 4,096
features (and one column past a tile), as a loop over 128-wide column tiles, on every
backend, against NumPy in f64.

The softmax is online (one pass keeps each row's running max ``m`` and the sum ``d`` of
``exp(x - m)``, rescaling ``d`` when ``m`` grows; a second pass writes ``exp(x - m) / d``);
the layer norm takes the mean in one pass, the variance of the centred values in another
(the padding masked out, since ``x - mean`` is not 0 there), then normalises. Notebook 06
teaches both; this file holds them on every backend. Outputs are poisoned with NaN, so an
element no program writes shows; the 40 rows leave the last program a partial tile.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import qnb
from qnb import Tile

ROWS = 40
WIDTHS = [129, 1000, 4096]
GRID = qnb.cdiv(ROWS, 16)  # programs of 16 rows each, the last one partial


@qnb.kernel
def wide_softmax(x: qnb.Array[qnb.f32, 2], out: qnb.Array[qnb.f32, 2]):
    row = qnb.program_id(0) * 16
    m = Tile[16, 1].full(-math.inf, qnb.f32)  # each row's running max
    d = Tile[16, 1].zeros(qnb.f32)  # each row's running sum of exp(x - m)
    for col in range(0, x.shape[1], 128):
        t = Tile[16, 128].load(x, row, col, other=-math.inf)
        m_new = qnb.maximum(m, t.max(axis=1, keepdims=True))
        d = d * qnb.exp(m - m_new) + qnb.exp(t - m_new).sum(axis=1, keepdims=True)
        m = m_new
    for col in range(0, x.shape[1], 128):
        t = Tile[16, 128].load(x, row, col, other=-math.inf)
        (qnb.exp(t - m) / d).store(out, row, col)


@qnb.kernel
def wide_layer_norm(x: qnb.Array[qnb.f32, 2], out: qnb.Array[qnb.f32, 2], eps: qnb.f32):
    row = qnb.program_id(0) * 16
    n = x.shape[1]
    total = Tile[16, 1].zeros(qnb.f32)
    for col in range(0, n, 128):
        total = total + Tile[16, 128].load(x, row, col).sum(axis=1, keepdims=True)
    mean = total / n
    squares = Tile[16, 1].zeros(qnb.f32)
    for col in range(0, n, 128):
        cols = col + qnb.arange(128)[None, :]
        centred = qnb.where(cols < n, Tile[16, 128].load(x, row, col) - mean, 0.0)
        squares = squares + (centred * centred).sum(axis=1, keepdims=True)
    inv = 1.0 / qnb.sqrt(squares / n + eps)
    for col in range(0, n, 128):
        ((Tile[16, 128].load(x, row, col) - mean) * inv).store(out, row, col)


def _rows(width: int) -> np.ndarray:
    rng = np.random.default_rng(width)
    return (rng.standard_normal((ROWS, width)) * 3 + 0.5).astype(np.float32)


@pytest.mark.parametrize("width", WIDTHS)
def test_a_row_softmax_over_column_tiles_matches_numpy(backend_name, width):
    x = _rows(width)
    out = np.full_like(x, np.nan)
    with qnb.backend(backend_name):
        wide_softmax[GRID](x, out)
    wide = x.astype(np.float64)
    e = np.exp(wide - wide.max(axis=1, keepdims=True))
    expected = e / e.sum(axis=1, keepdims=True)
    assert np.isfinite(out).all(), "an element no program wrote (still NaN)"
    np.testing.assert_allclose(out, expected, rtol=2e-5, atol=1e-7)
    np.testing.assert_allclose(out.sum(axis=1), 1.0, rtol=1e-4)


@pytest.mark.parametrize("width", WIDTHS)
def test_a_layer_norm_over_column_tiles_matches_numpy(backend_name, width):
    x = _rows(width)
    out = np.full_like(x, np.nan)
    with qnb.backend(backend_name):
        wide_layer_norm[GRID](x, out, 1e-5)
    wide = x.astype(np.float64)
    centred = wide - wide.mean(axis=1, keepdims=True)
    expected = centred / np.sqrt((centred * centred).mean(axis=1, keepdims=True) + 1e-5)
    assert np.isfinite(out).all(), "an element no program wrote (still NaN)"
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=2e-5)
