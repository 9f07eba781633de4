"""Atomics on the cpu backend (``qnb.atomic_add``/``atomic_max``/``atomic_min``): the one
implementation that the interpreter (``cpu.py``, the trace and ``qnb.check``) and the
launch path (``cpu_prepared.py``) both call, so the two cannot disagree.

The cpu runs every statement for all the programs of a chunk at once; an atomic is applied
in a fixed order, programs in grid order and, within a program, a vec's or tile's
elements in flat order (NumPy's ``ufunc.at``, which applies repeated indices one after the
other). An index outside the array is skipped.
"""

from __future__ import annotations

import numpy as np

_UFUNCS = {"add": np.add, "max": np.maximum, "min": np.minimum}


def elements(array, batch, indices, value, lanes):
    """The updates one atomic makes: ``(b, r, c, v, ok, n)``, each an ``(n, *shape)``
    array (``ok``: the element exists and its program is active), for per-lane
    ``indices`` (one per axis of the view, ``(n or 1, *shape)``), ``value`` and ``batch``
    (an int or per-lane int64 array), ``lanes`` the active programs (None: all)."""
    parts = [np.asarray(i) for i in indices] + [np.asarray(value)]
    shape = parts[-1].shape[1:]
    batch = np.asarray(batch, np.int64).reshape(-1)
    n = max([p.shape[0] for p in parts] + [batch.shape[0]])
    if lanes is not None:
        n = max(n, lanes.shape[0])
    full = (n, *shape)
    idx = [np.broadcast_to(i, full).astype(np.int64) for i in parts[:-1]]
    dims = array.shape[3 - len(idx) :]
    ok = np.ones(full, bool)
    for i, d in zip(idx, dims):
        ok &= (i >= 0) & (i < d)
    if lanes is not None:
        ok &= np.broadcast_to(lanes.reshape((n,) + (1,) * len(shape)), full)
    if len(idx) == 1:
        idx = [np.zeros(full, np.int64), *idx]
    b = np.broadcast_to(batch.reshape((-1,) + (1,) * len(shape)), full)
    return b, idx[0], idx[1], np.broadcast_to(parts[-1], full), ok, n


def apply(op, array, b, r, c, v, ok, want_old):
    """Apply the updates of :func:`elements` to ``array`` (3-D). ``want_old`` (a scalar
    index): return, per program, the element's value just before its own update (0
    where the index was outside the array)."""
    ufunc = _UFUNCS[op]
    v = v.astype(array.dtype, copy=False)
    if not want_old:
        with np.errstate(over="ignore", invalid="ignore"):
            ufunc.at(array, (b[ok], r[ok], c[ok]), v[ok])
        return None
    old = np.zeros(b.shape[0], array.dtype)
    with np.errstate(over="ignore", invalid="ignore"):
        for lane in np.flatnonzero(ok):  # one program after another, in grid order
            where = (b[lane], r[lane], c[lane])
            old[lane] = array[where]
            array[where] = ufunc(array[where], v[lane])
    return old
