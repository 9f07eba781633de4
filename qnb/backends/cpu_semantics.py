"""What a window, its mask, a masked store and a bounds error mean on NumPy lanes, written
once for the cpu backend's two executors: the interpreter (:mod:`qnb.backends.cpu`) and
the prepared closures (:mod:`qnb.backends.cpu_prepared`), whose fast paths must give the
same bits (``tests/backends/test_cpu_paths.py`` holds them to it). A reduction's meaning
is :func:`qnb.backends.cpu.reduce_values`, which both call.

Values hold a leading lane axis (one entry per program, or 1 where every program agrees).
A window of ``shape`` (M×N) per lane starts at ``(r0, c0)``; its rows ``r0 ..
row_end - 1`` and columns ``c0 .. col_end - 1`` exist (the ends already clamped to the
array); the rest of the tile reads the load's fill and is not written by a store."""

from __future__ import annotations

import numpy as np

_ARANGE16 = np.arange(16, dtype=np.int64)


def _arange(n: int) -> np.ndarray:
    return _ARANGE16 if n == 16 else np.arange(n, dtype=np.int64)


def window_masks(r0, c0, row_end, col_end, shape=(16, 16)):
    """Per-lane row and column indices of an M×N window, and which of its elements exist."""
    rows = r0[:, None] + _arange(shape[0])
    cols = c0[:, None] + _arange(shape[1])
    row_ok = (rows >= 0) & (rows < row_end[:, None])  # a padded window may start before 0
    col_ok = (cols >= 0) & (cols < col_end[:, None])
    return rows, cols, row_ok[:, :, None] & col_ok[:, None, :]


def gather_window(array, batch, rows, cols, valid, dtype, fill):
    """Every lane's tile of the 3-D ``array`` (slab ``batch``) at the window
    :func:`window_masks` gave: the array's element cast to ``dtype`` where it exists,
    ``fill`` (the load's base tile, per lane or broadcast) elsewhere."""
    r = np.minimum(np.maximum(rows, 0), array.shape[1] - 1)
    c = np.minimum(np.maximum(cols, 0), array.shape[2] - 1)
    flat = array.reshape(-1)
    index = (batch[:, None, None] * array.shape[1] + r[:, :, None]) * array.shape[2]
    index = index + c[:, None, :]
    return np.where(valid, flat[index].astype(dtype, copy=False), fill)


def mask_lanes(mask) -> int:
    """The lanes a masked store must cover (a store the same in every program still
    writes only where the branch mask holds); 1 where no branch masks."""
    return 1 if mask is None else mask.shape[0]


def scatter_window(array, batch, rows, cols, valid, value, mask):
    """Store every lane's tile ``value`` into the 3-D ``array`` at the window
    :func:`window_masks` gave, where the element exists and the lane's branch ``mask``
    (None: every lane) holds. Lanes run in program order: where two programs store one
    element (a race), the later program's value is the one left."""
    shape = valid.shape[1:]
    lanes = max(value.shape[0], valid.shape[0], batch.shape[0], mask_lanes(mask))
    full = (lanes, *shape)
    valid = np.broadcast_to(valid, full)
    if mask is not None:
        valid = valid & mask[:, None, None]
    r = np.broadcast_to(rows[:, :, None], full)
    c = np.broadcast_to(cols[:, None, :], full)
    b = np.broadcast_to(batch[:, None, None], full)
    values = np.broadcast_to(value, full)
    array[b[valid], r[valid], c[valid]] = values[valid]


def batch_out_of_range(param: str, slabs: int) -> str:
    """The bounds error of a slab index (``x[b]`` of a 3-D array) outside the array."""
    return f"batch index out of range for {param!r} with {slabs} slabs"


def negative_bound(param: str) -> str:
    """The bounds error of an unpadded window with a bound below 0."""
    return f"negative window bound on {param!r}"
