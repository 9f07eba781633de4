"""Atomics on the cpu backend (``qnb.atomic_add``/``atomic_max``/``atomic_min``): the one
implementation that the interpreter (``interpreter``, the trace and ``qnb.check``) and the
launch path (``prepared``) both call, so the two cannot disagree.

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
    idx = [_index(i, full) for i in parts[:-1]]
    dims = array.shape[3 - len(idx) :]
    ok = None
    for i, d in zip(idx, dims):
        # a negative index reads as a huge unsigned one
        inside = i.view(np.uint32 if i.dtype == np.int32 else np.uint64) < d
        ok = inside if ok is None else ok & inside
    if lanes is not None:
        ok &= np.broadcast_to(lanes.reshape((n,) + (1,) * len(shape)), full)
    if len(idx) == 1:
        idx = [np.broadcast_to(np.zeros((1,) * len(full), np.int64), full), *idx]
    b = np.broadcast_to(batch.reshape((-1,) + (1,) * len(shape)), full)
    return b, idx[0], idx[1], np.broadcast_to(parts[-1], full), ok, n


def _index(i, full):
    """One axis's indices as a C-contiguous (``full``-shaped) int32 or int64 array: the
    loaded vec or tile itself where it already is one (no copy)."""
    if i.dtype != np.int32:
        return np.broadcast_to(i, full).astype(np.int64)
    return np.ascontiguousarray(np.broadcast_to(i, full))


def apply(op, array, b, r, c, v, ok, want_old):
    """Apply the updates of :func:`elements` to ``array`` (3-D). ``want_old`` (a scalar
    index): return, per program, the element's value just before its own update (0
    where the index was outside the array)."""
    ufunc = _UFUNCS[op]
    uniform = _one_integer(v)
    v = v.astype(array.dtype, copy=False)
    if not want_old:
        with np.errstate(over="ignore", invalid="ignore"):
            if array.flags.c_contiguous:
                flat = array.reshape(-1)
                _apply_flat(op, ufunc, flat, array.shape, b, r, c, v, ok, uniform)
            else:
                ufunc.at(array, (b[ok], r[ok], c[ok]), v[ok])
        return None
    old = np.zeros(b.shape[0], array.dtype)
    with np.errstate(over="ignore", invalid="ignore"):
        for lane in np.flatnonzero(ok):  # one program after another, in grid order
            where = (b[lane], r[lane], c[lane])
            old[lane] = array[where]
            array[where] = ufunc(array[where], v[lane])
    return old


def _apply_flat(op, ufunc, flat_array, shape, b, r, c, v, ok, uniform):
    """The vec and tile forms on a C-contiguous array, through one flat index per update
    (in the same order as the 3-D one). An integer add of one value to every index is
    order-free and exact as a count per element (``np.bincount``) times the value, which
    wraps as the sequence of i32 additions would; everything else goes through
    ``ufunc.at`` in order."""
    if shape[1] == 1:
        index = c
    elif shape[2] == 1:
        index = r
    else:
        index = r.astype(np.int64) * shape[2] + c
    if shape[0] > 1:
        index = index + b.astype(np.int64) * (shape[1] * shape[2])
    everywhere = bool(ok.all())
    if op == "add" and uniform and flat_array.dtype.kind in "iu":
        if not everywhere:  # the skipped updates count into one bin past the end
            index = np.where(ok, index, flat_array.size)
        counts = np.bincount(index.reshape(-1), minlength=flat_array.size + 1)
        step = np.int64(v[(0,) * v.ndim])
        flat_array += (counts[: flat_array.size] * step).astype(flat_array.dtype)
        return
    index = index.reshape(-1) if everywhere else index[ok]
    values = np.broadcast_to(v, ok.shape).reshape(-1) if everywhere else v[ok]
    ufunc.at(flat_array, index, values)


def _one_integer(v) -> bool:
    """Whether ``v`` (an integer array, maybe broadcast) holds one value throughout: read
    on the part that is not broadcast, so a tile of ones stretched over every program
    costs one tile."""
    if v.size == 0 or v.dtype.kind not in "iu":
        return False
    core = v[tuple(0 if step == 0 else slice(None) for step in v.strides)]
    return bool(core.min() == core.max())
