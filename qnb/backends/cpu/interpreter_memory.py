"""interpreter_memory"""

from __future__ import annotations

import numpy as np

from qnb import ir
from qnb.backends.cpu import atomics, semantics
from qnb.backends.cpu.lanes import _arange, _Blocks, _gathered, _lanes, _mask_lanes, _move_blocks
from qnb.backends.cpu.semantics import cast_values
from qnb.backends.cpu.semantics import window_masks as _masks
from qnb.errors import QnbIndexError


class MemoryMixin:
    """The interpreter's memory: views, windows (gather and scatter), vecs, elements, atomics."""

    def index_error(self, message, node):
        err = QnbIndexError(message)
        err.ir_loc = node.loc
        if node.loc is not None and node.loc.unit < len(self.kernel.units):
            err.ir_unit = self.kernel.units[node.loc.unit].qualname
        return err

    def check(self, bad, message, node):
        """Raise if any *active* lane is out of bounds."""
        if self.mask is None and not bad.any():  # the common case: nothing to find
            return
        bad = np.broadcast_to(bad, (self.n, *bad.shape[1:])) if bad.shape[:1] == (1,) else bad
        if bad.ndim > 1:
            bad = bad.reshape(bad.shape[0], -1).any(axis=1)
        if self.mask is not None:
            bad = bad & self.mask
        if bad.any():
            lane = int(np.argmax(bad))
            raise self.index_error(
                f"{message} (in program {tuple(int(p[lane]) for p in self.pid)})", node
            )

    def view(self, v: ir.ArrayView, node):
        array, _shape = self.arrays[v.param]
        if v.batch is None:
            return array, np.zeros(1, np.int64)
        batch = self.ev(v.batch).astype(np.int64)
        self.check(
            (batch < 0) | (batch >= array.shape[0]),
            semantics.batch_out_of_range(v.param, array.shape[0]),
            node,
        )
        return array, np.clip(batch, 0, array.shape[0] - 1)

    def window(self, node, v, r0, r1, c0, c1, padded=False, shape=(16, 16), write=False):
        """An M×N window per lane: ``(array, batch, r0, c0, row_end, col_end)``, where
        rows ``r0 .. row_end - 1`` and columns ``c0 .. col_end - 1`` exist (clamped to the
        array). Only O(lanes) work: the per-element masks are built by :func:`_masks`
        when a window is not a whole block."""
        array, batch = self.view(v, node)
        r0, r1, c0, c1 = (self.ev(x).astype(np.int64) for x in (r0, r1, c0, c1))
        if not padded:
            self.check(
                (r0 < 0) | (c0 < 0) | (r1 < 0) | (c1 < 0),
                semantics.negative_bound(v.param),
                node,
            )
        row_end = np.minimum(r1, array.shape[1])
        col_end = np.minimum(c1, array.shape[2])
        self.observer.window(v.param, batch, r0, c0, row_end, col_end, shape, write)
        return array, batch, r0, c0, row_end, col_end

    def aligned_blocks(self, array, batch, r0, c0, row_end, col_end, shape=(16, 16)):
        """``(blocks, batch, row_block, col_block)`` when every lane's window is a whole
        aligned M×N block of ``array``; None otherwise."""
        m, n = shape
        if array.shape[1] % m or array.shape[2] % n:
            return None
        if (r0 % m).any() or (c0 % n).any() or (r0 < 0).any() or (c0 < 0).any():
            return None
        if (r0 + m > row_end).any() or (c0 + n > col_end).any():
            return None
        blocks = array.reshape(array.shape[0], array.shape[1] // m, m, array.shape[2] // n, n)
        return blocks, batch, r0 // m, c0 // n

    def grid_blocks(self, blocks, batch, rb, cb):
        """A strided view of ``blocks`` whose k-th M×N block is program k's, when the
        programs tile the array in launch order (the common ``load(x, i*16, j*16)``
        pattern); None otherwise. Reading or writing it moves whole blocks at once."""
        n = self.n
        if n == 1:  # one program: a plain block (slab_blocks) costs less
            return None
        if batch.shape[0] != 1 or rb.shape[0] != n or cb.shape[0] != n or self.pid[0][0] != 0:
            return None
        slab = blocks[int(batch[0])]  # (RB, M, CB, N)
        rows_b, cols_b = slab.shape[0], slab.shape[2]
        if n != rows_b * cols_b:
            return None
        x, y = self.pid[0], self.pid[1]
        gx, gy, gz = (int(g[0]) for g in self.grid)
        if gz != 1:  # (a third grid axis repeats the tiles: not one block each)
            return None
        if (gx, gy) == (rows_b, cols_b) and np.array_equal(rb, x) and np.array_equal(cb, y):
            return slab.transpose(2, 0, 1, 3)  # k = cb * RB + rb
        if (gy, gx) == (rows_b, cols_b) and np.array_equal(rb, y) and np.array_equal(cb, x):
            return slab.transpose(0, 2, 1, 3)  # k = rb * CB + cb
        return None

    def slab_blocks(self, blocks, batch, rb, cb):
        """A view of ``blocks`` holding program k's block at [k], when the lanes read one
        block position of consecutive slabs (``load(x[b], ...)`` with ``b`` the program
        id: batched kernels); None otherwise."""
        n = self.n
        if rb.shape[0] != 1 or cb.shape[0] != 1 or batch.shape[0] != n:
            return None
        first = int(batch[0])
        if n > 1 and not (int(batch[-1]) - first == n - 1 and (np.diff(batch) == 1).all()):
            return None
        return blocks[first : first + n, int(rb[0]), :, int(cb[0]), :]

    def e_LoadWindow(self, e, defer=False):
        """The loaded tiles. A whole-block load may return a *view* of the array (the
        executor copies it before any store that could change it: see ``detach``);
        with ``defer`` a launch-order tiling returns it deferred (``_Blocks``) instead of
        gathering it (only an assignment asks: the value may go straight to a store)."""
        base = self.ev(e.base)
        shape = e.type.shape
        array, batch, r0, c0, row_end, col_end = self.window(
            e, e.view, e.r0, e.r1, e.c0, e.c1, e.padded, shape
        )
        if array.size == 0:  # nothing to read: every element keeps the base's value
            return np.array(base)
        dtype = e.type.dtype.numpy
        # a load converting to another dtype (``dtype=``) takes the elementwise path
        aligned = (
            self.aligned_blocks(array, batch, r0, c0, row_end, col_end, shape)
            if array.dtype == dtype
            else None
        )
        if aligned is not None:
            blocks, b, rb, cb = aligned
            tiled = self.grid_blocks(blocks, b, rb, cb)
            if tiled is not None:
                held = _Blocks.of_launch_order(tiled)
                return held if defer else held.tiles()
            slab = self.slab_blocks(blocks, b, rb, cb)
            if slab is not None:
                return slab
            if b.shape[0] == 1 and (rb.shape[0] == 1 or cb.shape[0] == 1):
                # One block row or column is shared by every lane (a loop over k): copy
                # that strip once, then pick whole blocks from it.
                if cb.shape[0] == 1:
                    strip = np.ascontiguousarray(blocks[b[0], :, :, cb[0], :])
                    return strip[rb]
                strip = np.ascontiguousarray(blocks[b[0], rb[0]].transpose(1, 0, 2))
                return strip[cb]
            return blocks[b, rb, :, cb, :]
        rows, cols, valid = _masks(r0, c0, row_end, col_end, shape)
        return semantics.gather_window(array, batch, rows, cols, valid, dtype, base)

    def s_StoreWindow(self, s):
        self.observer.store_begins(s)
        value = self.value_of(s.value)
        shape = s.value.type.shape
        array, batch, r0, c0, row_end, col_end = self.window(
            s, s.view, s.r0, s.r1, s.c0, s.c1, s.padded, shape, write=True
        )
        self.detach(array)
        if self.mask is None:
            aligned = self.aligned_blocks(array, batch, r0, c0, row_end, col_end, shape)
            if aligned is not None:
                blocks, b, rb, cb = aligned
                tiled = self.grid_blocks(blocks, b, rb, cb)
                if tiled is not None:
                    held = value.launch_order() if isinstance(value, _Blocks) else None
                    if held is not None and held.shape == tiled.shape:
                        _move_blocks(tiled, held)  # block for block, no gather
                    else:
                        value = _gathered(value)
                        flat = np.broadcast_to(value, (self.n, *shape))
                        _move_blocks(tiled, flat.reshape(tiled.shape))
                    self.observer.stored(s, value)
                    return
                value = _gathered(value)
                slab = self.slab_blocks(blocks, b, rb, cb)
                if slab is not None:
                    slab[...] = value
                else:  # where programs share a block (a race), the last program's wins
                    n = max(value.shape[0], b.shape[0], rb.shape[0], cb.shape[0])
                    b, rb, cb = (np.broadcast_to(x, (n,)) for x in (b, rb, cb))
                    blocks[b, rb, :, cb, :] = np.broadcast_to(value, (n, *shape))
                self.observer.stored(s, value)
                return
        value = _gathered(value)
        rows, cols, valid = _masks(r0, c0, row_end, col_end, shape)
        semantics.scatter_window(array, batch, rows, cols, valid, value, self.mask)
        self.observer.stored(s, value)

    def vec_window(self, node, v, start, stop, col, padded=False, n=16, axis=0, write=False):
        """An N-element line per lane: ``(array, batch, index, ok, fixed)``: ``index`` runs
        along the array's last axis (1-D, or a row: ``axis`` 1) or its rows (a column),
        ``fixed`` is the column (or, for a row, the row) that stays, ``ok`` which elements
        exist inside the window."""
        array, batch = self.view(v, node)
        start, stop = self.ev(start).astype(np.int64), self.ev(stop).astype(np.int64)
        if not padded:
            self.check((start < 0) | (stop < 0), f"negative bound on {v.param!r}", node)
        index = start[:, None] + _arange(n)
        fixed = None
        if col is None or axis == 1:  # 1-D or a row: index runs along the last axis
            limit = array.shape[2]
        else:
            limit = array.shape[1]
        fixed_ok = True
        if col is not None:
            fixed = self.ev(col).astype(np.int64)
            size = array.shape[1] if axis == 1 else array.shape[2]
            outside = (fixed < 0) | (fixed >= size)
            if padded:  # a line outside the array has no elements: none is read or written
                fixed_ok = ~outside[:, None]
            else:
                what = "row" if axis == 1 else "column"
                self.check(outside, f"{what} index out of range for {v.param!r}", node)
        end = np.minimum(stop, limit)
        ok = (index >= 0) & (index < end[:, None]) & fixed_ok
        self.observer.line(v.param, batch, start, end, fixed, axis, n, write)
        return array, batch, index, ok, fixed

    def line_elements(self, array, index, fixed, axis):
        """The (row, column) indices of a line's elements, clamped into the array."""
        if fixed is None:
            return np.zeros((1, 1), np.int64), np.clip(index, 0, array.shape[2] - 1)
        if axis == 1:
            return np.clip(fixed, 0, array.shape[1] - 1)[:, None], np.clip(
                index, 0, array.shape[2] - 1
            )
        return np.clip(index, 0, array.shape[1] - 1), np.clip(fixed, 0, array.shape[2] - 1)[:, None]

    def e_VecLoad(self, e):
        n = e.type.shape[0]
        array, batch, index, ok, fixed = self.vec_window(
            e, e.view, e.start, e.stop, e.col, e.padded, n, e.axis
        )
        dtype = e.type.dtype.numpy
        other = np.zeros((), dtype) if e.other is None else self.ev(e.other)[:, None]
        if array.size == 0:  # nothing to read: every element is other
            return np.broadcast_to(other, ok.shape).astype(dtype)
        rows, cols = self.line_elements(array, index, fixed, e.axis)
        values = array[batch[:, None], rows, cols]
        if values.dtype != dtype:
            values = cast_values(values, e.type.dtype)
        return np.where(ok, values, other).astype(dtype, copy=False)

    def s_VecStore(self, s):
        self.observer.store_begins(s)
        value = self.ev(s.value)
        size = s.value.type.shape[0]
        array, batch, index, ok, fixed = self.vec_window(
            s, s.view, s.start, s.stop, s.col, s.padded, size, s.axis, write=True
        )
        self.detach(array)
        n = max(
            value.shape[0],
            index.shape[0],
            batch.shape[0],
            _mask_lanes(self.mask),
            ok.shape[0],
        )
        ok = np.broadcast_to(ok, (n, size))
        if self.mask is not None:
            ok = ok & self.mask[:, None]
        rows, cols = self.line_elements(array, index, fixed, s.axis)
        r = np.broadcast_to(rows, (n, size))
        c = np.broadcast_to(cols, (n, size))
        b = np.broadcast_to(batch[:, None], (n, size))
        array[b[ok], r[ok], c[ok]] = np.broadcast_to(value, (n, size))[ok]
        self.observer.stored(s, value)

    def element(self, node, v, indices, write=False):
        array, batch = self.view(v, node)
        dims = array.shape[3 - len(indices) :]
        idx = [self.ev(i).astype(np.int64) for i in indices]
        bad = np.zeros(1, bool)
        for i, d in zip(idx, dims):
            bad = bad | (i < 0) | (i >= d)
        self.check(
            bad, f"index out of range for {v.param!r} of shape {self.arrays[v.param][1]}", node
        )
        idx = [np.clip(i, 0, d - 1) for i, d in zip(idx, dims)]
        if len(idx) == 1:
            idx = [np.zeros(1, np.int64), *idx]
        self.observer.element(v.param, batch, *idx, write)
        return array, batch, idx

    def e_ArrayLoad(self, e):
        array, batch, (r, c) = self.element(e, e.view, e.indices)
        return array[batch, r, c]

    def s_ArrayStore(self, s):
        self.observer.store_begins(s)
        value = self.ev(s.value)
        array, batch, (r, c) = self.element(s, s.view, s.indices, write=True)
        self.detach(array)
        # One write per program, or one for all when nothing varies and no branch masks.
        n = max(value.shape[0], r.shape[0], c.shape[0], batch.shape[0])
        n = n if self.mask is None else self.n
        lanes = _lanes(self.mask, n)
        b, r, c = (np.broadcast_to(x, (n,))[lanes] for x in (batch, r, c))
        array[b, r, c] = np.broadcast_to(value, (n,))[lanes]
        self.observer.stored(s, value)

    def s_Atomic(self, s):
        self.observer.store_begins(s)
        value = self.ev(s.value)
        indices = [self.ev(i) for i in s.indices]
        array, batch = self.view(s.view, s)
        self.detach(array)
        b, r, c, v, ok, _ = atomics.elements(
            array, batch, indices, value, _lanes(self.mask, self.n)
        )
        self.observer.atomic(s, s.view.param, b, r, c, ok)
        old = atomics.apply(s.op, array, b, r, c, v, ok, s.result is not None)
        if old is not None:
            self.assign(s.result, old, "scalar")
        self.observer.stored(s, value)
