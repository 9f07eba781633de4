"""prepared_windows"""

from __future__ import annotations

import numpy as np

from qnb import ir
from qnb.backends.cpu import semantics
from qnb.backends.cpu.lanes import _move_blocks
from qnb.backends.cpu.prepared_base import (
    _as_blocks,
    _Blocks,
    _clamp,
    _consecutive,
    _lane_arrays,
    _tiles,
)
from qnb.backends.cpu.semantics import window_masks as _masks
from qnb.errors import QnbError


class WindowClosures:
    """The generic forms of window loads and stores (masked gather and scatter), detach."""

    def view(self, v: ir.ArrayView, node):
        """``view(st) -> (array, batch)``: batch an int where uniform, else an int64 array."""
        param = v.param
        if v.batch is None:
            return lambda st: (st.arrays[param], 0)
        batch = self.expr(v.batch)
        check = self.checker("", node)
        uniform = not self.is_varying(v.batch)
        compiler = self

        def view(st):
            array = st.arrays[param]
            b = batch(st)
            slabs = array.shape[0]
            message = semantics.batch_out_of_range(param, slabs)
            if uniform:
                index = int(b[0])
                if not 0 <= index < slabs:
                    raise compiler.error(
                        f"{message} (in program {compiler.first_active(st)})", node
                    )
                return array, index
            b = b.astype(np.int64, copy=False)
            check(st, (b < 0) | (b >= slabs), message)
            return array, _clamp(b, 0, slabs - 1)

        return view

    def window_bounds(self, node, v, bounds, padded=False):
        """``bounds(st) -> (array, batch, r0, r1, c0, c1)``: Python ints where uniform.
        A ``padded`` window may start before the array: its bounds are not checked."""
        view = self.view(v, node)
        fns = tuple(self.expr(x) for x in bounds)
        uniform = not any(self.is_varying(x) for x in bounds)
        uniform_view = v.batch is None or not self.is_varying(v.batch)
        message = semantics.negative_bound(v.param)
        check = self.checker(message, node)
        compiler = self

        constant = all(self.constant(x) for x in bounds)
        if constant:  # known now: the bounds of every launch
            known = tuple(int(f(None)[0]) for f in fns)
            if min(known) < 0 and not padded:
                constant = False

        def window(st):
            array, batch = view(st)
            if constant:
                return (array, batch, *known)
            if uniform:
                r0, r1, c0, c1 = (int(f(st)[0]) for f in fns)
                if not padded and (r0 < 0 or c0 < 0 or r1 < 0 or c1 < 0):
                    raise compiler.error(
                        f"{message} (in program {compiler.first_active(st)})", node
                    )
                return array, batch, r0, r1, c0, c1
            r0, r1, c0, c1 = (f(st).astype(np.int64, copy=False) for f in fns)
            if not padded:
                check(st, (r0 < 0) | (c0 < 0) | (r1 < 0) | (c1 < 0))
            return array, batch, r0, r1, c0, c1

        return window, uniform and uniform_view, uniform

    def e_LoadWindow(self, e):
        base = self.expr(e.base)
        bounds = (e.r0, e.r1, e.c0, e.c1)
        window, uniform, uniform_bounds = self.window_bounds(e, e.view, bounds, e.padded)
        base_uniform = not self.is_varying(e.base)
        shape = m, n = e.type.shape
        pattern = self.grid_pattern(e, shape) if base_uniform else None
        dtype = e.type.dtype.numpy
        generic = self.generic_load(e, base, window)
        if uniform and base_uniform:

            def load_uniform(st):
                array, b, r0, r1, c0, c1 = window(st)
                if r0 < 0 or c0 < 0 or array.dtype != dtype:  # padded, or converting
                    return generic(st)
                fill = base(st)
                rows = max(0, min(r1, array.shape[1], r0 + m) - r0)
                cols = max(0, min(c1, array.shape[2], c0 + n) - c0)
                if rows == m and cols == n:
                    return array[b, r0 : r0 + m, c0 : c0 + n][None]
                out = np.array(fill)
                out[0, :rows, :cols] = array[b, r0 : r0 + rows, c0 : c0 + cols]
                return out

            return load_uniform
        if uniform_bounds and base_uniform:  # one window of each program's slab (x[b])

            def load_slabs(st):
                array, b, r0, r1, c0, c1 = window(st)
                if array.size == 0 or r0 < 0 or c0 < 0 or array.dtype != dtype:
                    return generic(st)
                rows = max(0, min(r1, array.shape[1], r0 + m) - r0)
                cols = max(0, min(c1, array.shape[2], c0 + n) - c0)
                first = _consecutive(b)
                if rows == m and cols == n:
                    if first is not None:  # a view, as the interpreter's slab_blocks
                        return array[first : first + len(b), r0 : r0 + m, c0 : c0 + n]
                    return array[b, r0 : r0 + m, c0 : c0 + n]
                out = np.empty((len(b), m, n), array.dtype)
                out[...] = base(st)
                out[:, :rows, :cols] = array[b, r0 : r0 + rows, c0 : c0 + cols]
                return out

            return load_slabs
        strided = self.strided_load(e, base) if base_uniform else None
        if strided is not None:
            plain = generic

            def generic(st):
                out = strided(st)
                return plain(st) if out is None else out

        if pattern is None:
            return generic
        row_axis, col_axis = pattern
        ra = row_axis if row_axis is not None else 1 - col_axis
        spans_of = self.block_spans((e.r0, e.r1, e.c0, e.c1), row_axis, col_axis, shape)
        view = self.view(e.view, e)
        fill_const = isinstance(e.base, ir.TileFill) and e.base.kind == "full"

        def load_blocks(st):
            grid = st.grid
            if not st.whole or grid[2] != 1 or not fill_const:
                return generic(st)
            array, b = view(st)
            if array.dtype != dtype:
                return generic(st)
            spans = spans_of(st, array)
            if spans is None:
                return generic(st)
            (rs, re, nrb), (cs, ce, ncb) = spans
            sub = array[b, rs:re, cs:ce]
            if sub.shape == (nrb * m, ncb * n):
                a4 = np.ascontiguousarray(sub).reshape(nrb, m, ncb, n)
            else:
                padded = np.empty((nrb * m, ncb * n), array.dtype)
                padded[...] = base(st)[0, 0, 0]
                padded[: sub.shape[0], : sub.shape[1]] = sub
                a4 = padded.reshape(nrb, m, ncb, n)
            return _Blocks(a4, ra)

        return load_blocks

    def generic_load(self, e, base, window):
        """The interpreter's window load, for any lanes."""
        dtype = e.type.dtype.numpy
        shape = e.type.shape

        m, n = shape

        def load(st):
            fill = _tiles(st, base(st))
            array, batch, r0, r1, c0, c1 = window(st)
            batch, r0, r1, c0, c1 = _lane_arrays(batch, r0, r1, c0, c1)
            if array.size == 0:
                return np.array(fill)
            if r0.shape == c0.shape == r1.shape == c1.shape == batch.shape == (1,):
                # the same window in every program (a loop counter these programs share
                # this turn): one copy of it where it lies in the array and its bounds
                b, top, left = int(batch[0]), int(r0[0]), int(c0[0])
                if (
                    top >= 0
                    and left >= 0
                    and top + m <= min(int(r1[0]), array.shape[1])
                    and left + n <= min(int(c1[0]), array.shape[2])
                    and array.dtype == dtype
                ):
                    return array[b, top : top + m, left : left + n][None].copy()
            row_end = np.minimum(r1, array.shape[1])
            col_end = np.minimum(c1, array.shape[2])
            rows, cols, valid = _masks(r0, c0, row_end, col_end, shape)
            return semantics.gather_window(array, batch, rows, cols, valid, dtype, fill)

        return load

    def detach(self, st, array):
        """Before a store to ``array``: copy the variables that are views of it."""
        for name in list(st.aliased):
            value = st.env[name]
            held = value.a4 if isinstance(value, _Blocks) else value
            if np.may_share_memory(held, array):
                st.env[name] = (
                    _Blocks(np.array(value.a4), value.ra)
                    if isinstance(value, _Blocks)
                    else np.array(value)
                )
                st.aliased.discard(name)

    def s_StoreWindow(self, s):
        value = self.expr(s.value)
        window, uniform, uniform_bounds = self.window_bounds(
            s, s.view, (s.r0, s.r1, s.c0, s.c1), s.padded
        )
        shape = m, n = s.value.type.shape
        pattern = self.grid_pattern(s, shape)
        compiler = self

        def generic(st, v, array, batch, r0, r1, c0, c1):
            v = _tiles(st, v)
            batch, r0, r1, c0, c1 = _lane_arrays(batch, r0, r1, c0, c1)
            row_end = np.minimum(r1, array.shape[1])
            col_end = np.minimum(c1, array.shape[2])
            rows, cols, valid = _masks(r0, c0, row_end, col_end, shape)
            semantics.scatter_window(array, batch, rows, cols, valid, v, st.mask)

        known = self.known_window(s.view, (s.r0, s.r1, s.c0, s.c1), s.padded)
        if known is not None and self.constant(s.value):
            try:
                v = value(None)  # folded: the one value of every launch
            except Exception:  # noqa: BLE001 - it raises at launch, where it should
                v = None
            if isinstance(v, np.ndarray) and v.shape == (1, *shape):
                return self.store_known(s, v, known, generic)

        if uniform:

            def store_uniform(st):
                v = value(st)
                array, b, r0, r1, c0, c1 = window(st)
                if st.aliased:
                    compiler.detach(st, array)
                if (
                    st.mask is not None
                    or isinstance(v, _Blocks)
                    or v.shape[0] != 1
                    or r0 < 0
                    or c0 < 0
                ):
                    generic(st, v, array, b, r0, r1, c0, c1)
                    return
                _, height, width = array.shape
                if r0 + m <= min(r1, height) and c0 + n <= min(c1, width):  # a whole tile
                    array[b, r0 : r0 + m, c0 : c0 + n] = v[0]
                    return
                rows = max(0, min(r1, height, r0 + m) - r0)
                cols = max(0, min(c1, width, c0 + n) - c0)
                array[b, r0 : r0 + rows, c0 : c0 + cols] = v[0, :rows, :cols]

            return store_uniform

        if uniform_bounds:  # one window of each program's slab (x[b])

            def store_slabs(st):
                v = value(st)
                array, b, r0, r1, c0, c1 = window(st)
                compiler.detach(st, array)
                if st.mask is not None or isinstance(v, _Blocks) or r0 < 0 or c0 < 0:
                    generic(st, v, array, b, r0, r1, c0, c1)
                    return
                rows = max(0, min(r1, array.shape[1], r0 + m) - r0)
                cols = max(0, min(c1, array.shape[2], c0 + n) - c0)
                v = np.broadcast_to(v, (len(b), m, n))[:, :rows, :cols]
                first = _consecutive(b)
                if first is not None:
                    array[first : first + len(b), r0 : r0 + rows, c0 : c0 + cols] = v
                else:  # where programs share a slab (a race), the last program's wins
                    array[b, r0 : r0 + rows, c0 : c0 + cols] = v

            return store_slabs

        strided = self.strided_store(s)
        store_blocks = into = None
        if pattern is not None:
            store_blocks, destination = self.block_grid_store(s, pattern, shape)
            into = self.computes_into(s, value, destination)

        def store(st):
            if into is not None and into(st):
                return
            v = value(st)
            if store_blocks is not None and store_blocks(st, v):
                return
            if strided is not None:
                array = st.arrays[s.view.param]
                compiler.detach(st, array)
                if strided(st, v):
                    return
            array, b, r0, r1, c0, c1 = window(st)
            compiler.detach(st, array)
            generic(st, v, array, b, r0, r1, c0, c1)

        return store

    def block_grid_store(self, s, pattern, shape):
        """``(store_blocks, destination)`` for a window store whose programs tile the
        array as a block grid (``pattern``: the grid axes the window's rows and columns
        follow). ``store_blocks(st, v)`` does it as one assignment of the programs' tiles
        laid side by side, False where this launch's grid, mask or spans do not allow it
        (the caller's other forms then run); ``destination(st)`` is the array's region as
        a :class:`_Blocks` the value may be computed straight into, where it is exactly
        the grid's blocks, or None."""
        row_axis, col_axis = pattern
        ra = row_axis if row_axis is not None else 1 - col_axis
        spans_of = self.block_spans((s.r0, s.r1, s.c0, s.c1), row_axis, col_axis, shape)
        view = self.view(s.view, s)
        kind = s.value.type.kind
        m, n = shape
        compiler = self

        def region(st):
            """``(array, b, spans)`` of the grid's blocks in this launch, or None."""
            if st.mask is not None or not st.whole or st.grid[2] != 1:
                return None
            # programs along an axis the window does not follow must be one
            grid = st.grid
            if not (row_axis is not None or grid[1 - col_axis] == 1) or not (
                col_axis is not None or grid[1 - row_axis] == 1
            ):
                return None
            array, b = view(st)
            spans = spans_of(st, array)
            return None if spans is None else (array, b, spans)

        def store_blocks(st, v):
            found = region(st)
            if found is None:
                return False
            array, b, spans = found
            compiler.detach(st, array)
            (rs, re, nrb), (cs, ce, ncb) = spans
            a4 = np.broadcast_to(_as_blocks(v, kind, ra, st.grid), (nrb, m, ncb, n))
            flat = a4.reshape(nrb * m, ncb * n) if a4.flags.c_contiguous else None
            if flat is not None:
                array[b, rs:re, cs:ce] = flat[: re - rs, : ce - cs]
                return True
            dst = array[b, rs:re, cs:ce]
            if dst.shape == (nrb * m, ncb * n):
                _move_blocks(dst.reshape(nrb, m, ncb, n), a4)
            else:
                dst[...] = np.asarray(a4).reshape(nrb * m, ncb * n)[: re - rs, : ce - cs]
            return True

        def destination(st):
            found = region(st)
            if found is None:
                return None
            array, b, ((rs, re, nrb), (cs, ce, ncb)) = found
            dst = array[b, rs:re, cs:ce]
            if dst.shape != (nrb * m, ncb * n):  # (edge blocks hang over the array)
                return None
            compiler.detach(st, array)
            return _Blocks(dst.reshape(nrb, m, ncb, n), ra)

        return store_blocks, destination

    def computes_into(self, s, value, destination):
        """``into(st) -> done`` for a store whose value is an elementwise chain that takes
        ``out=`` (:meth:`ScalarClosures.writes_over`): the value computed straight into
        ``destination(st)`` (the stored region, or None), so no full-grid temporary is
        made, where :meth:`chain_target` allows it; None where the value is not such a
        chain."""
        free = self.chain_target(s)
        if free is None:
            return None

        def into(st):
            if not free(st):
                return False
            try:
                out = destination(st)
            except QnbError:  # (raised where the interpreter raises: after the value)
                return False
            if out is None:
                return False
            v = value(st, out)
            if v is not out:  # (the chain could not take it: stored as any value)
                out.a4[...] = _as_blocks(v, s.value.type.kind, out.ra, st.grid)
            return True

        return into
