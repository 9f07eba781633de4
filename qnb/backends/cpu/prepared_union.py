"""prepared_union: windows loaded and stored back at the same place, as one region.

A kernel whose programs each load a window at their own offset, compute elementwise
over it and store the result at the same window (``t = Tile.load(x, pid, 0)`` then
``f(t).store(y, pid, 0)``: programs a row apart, their windows overlapping) computes, in
the interpreter's lock step, every program's tile and then stores them in program order,
a later program's elements over an earlier one's. Where windows overlap, every program
stores ``f`` of the same loaded element: the same bits. So the launch's stores are
``f`` over the region the windows cover, computed once and assigned once: for ``g``
programs a row apart that is ``g + 15`` rows of work, not ``16 g``, in a few NumPy
calls. The strategy holds only where that reasoning does; anything else runs the
statements as they are. One more: NumPy's loops give an op of two NaNs (or 0/0) one
NaN or the other depending on the array's length and strides, and the region is not
the tiles' array: a float value with a NaN in it is left to the statements too (found
by an outside tester: ``log(t) * s`` with ``s`` NaN), so the stored bits are the
interpreter's, NaNs' included.
"""

from __future__ import annotations

import numpy as np

from qnb import ir
from qnb.errors import QnbError

_ELEMENTWISE = (ir.Binary, ir.Unary, ir.Cast)
_MAX = np.maximum.reduce


class UnionWindows:
    """Strategy: the last two statements ``t = load(x, w)`` and ``f(t).store(y, w)``."""

    def union_pair(self, body):
        """``run(st) -> done`` for a body that ends in ``t = <window load>`` and a store of
        an elementwise function of ``t`` to a window of the same place and shape (its
        start ``program_id(0) * f + u`` along one side, uniform on the other, uniform
        ends), ``t`` read nowhere else: it does both as one region (module doc), or
        returns False for the caller to run the two statements. None (now) where the
        body is not of that form."""
        if len(body) < 2 or self.lane_exit_depth:
            return None
        assign, store = body[-2], body[-1]
        if not (
            isinstance(assign, ir.Assign)
            and isinstance(assign.value, ir.LoadWindow)
            and isinstance(store, ir.StoreWindow)
        ):
            return None
        load, name = assign.value, assign.name
        if load.type.shape != store.value.type.shape:  # (padded or not: starts of 0 or more)
            return None
        if self.assign_count.get(name) != 1 or not self._elementwise_of(store.value, name):
            return None
        if any(isinstance(n, ir.Var) and n.name == name for n in ir.walk_body(body[:-2])):
            return None
        for view in (load.view, store.view):
            if view.batch is not None and self.is_varying(view.batch):
                return None
        sides = self._union_sides(load), self._union_sides(store)
        # the same window form on both (steps of starts and of ends), so where the two
        # regions agree in a launch, so does every lane's window
        if None in sides or sides[0][1] != sides[1][1]:
            return None
        (load_bounds, steps), (store_bounds, _) = sides
        m, n = load.type.shape
        dtype = load.type.dtype.numpy
        load_view, store_view = self.view(load.view, load), self.view(store.view, store)
        value = self.expr(store.value)
        # (the fill is never stored, but where it may raise, it must run: as the load)
        fill = None if self.constant(load.base) else self.expr(load.base)
        floats = store.value.type.dtype.numpy.kind not in "iub"
        compiler = self
        kept: dict = {}  # (grid, lanes, shapes) -> the region both windows cover, or None

        def run(st):
            count = st.n
            if count == 1 or st.mask is not None or st.grid[1] * st.grid[2] != 1:
                return False
            try:
                found = computed(st, count)
            except QnbError:  # (nothing stored yet: the statements raise it, in their order)
                return False
            if found is None:
                return False
            y, yb, (r0, re, c0, ce), v = found
            compiler.detach(st, y)
            y[yb, r0:re, c0:ce] = v[0]
            return True

        def computed(st, count):
            """``(y, batch, region, value)`` to store, or None."""
            if fill is not None:
                fill(st)
            x, xb = load_view(st)
            y, yb = store_view(st)
            if x.dtype != dtype:
                return None
            key = (st.grid, st.first, count, x.shape, y.shape)
            covered = kept.get(key, kept)
            if covered is kept:  # (the bounds are the lanes' program ids and constants)
                # the load's elements past its ends are the fill: none may be stored
                covered = _region(st, load_bounds, steps, (m, n), x, count)
                if covered != _region(st, store_bounds, steps, (m, n), y, count):
                    covered = None
                if len(kept) >= 32:
                    kept.clear()
                kept[key] = covered
            if covered is None:
                return None
            r0, re, c0, ce = covered
            env, saved = dict(st.env), st.env
            env[name] = x[xb, r0:re, c0:ce][None]
            st.env, st.n = env, 1  # (one lane holding the region: elementwise ops only)
            try:
                v = value(st)
            finally:
                st.env, st.n = saved, count
            if v.shape != (1, re - r0, ce - c0):
                return None
            if floats and v.size:  # (a NaN anywhere makes the max one: one pass)
                top = _MAX(v, axis=None)
                if top != top:
                    return None  # (which NaN an op of two NaNs gives depends on NumPy's loop)
            return y, yb, covered, v

        return run

    def _union_sides(self, node):
        """``(bounds, steps)`` of a window for :meth:`union_pair`: ``bounds`` the rows'
        and the columns' ``(start_at, end_at)`` (:meth:`lane_linear`'s ``at``), ``steps``
        their ``(start step, end step)`` per program along ``program_id(0)``: at most
        one side steps, by a step of 0 or more, and its end stays or steps with its
        start. None otherwise."""
        found = [self.lane_linear(x) for x in (node.r0, node.r1, node.c0, node.c1)]
        if None in found or any(axis not in (None, 0) for axis, _, _, _ in found):
            return None
        if not all(pure for _, _, _, pure in found):  # (bounds of program ids and constants)
            return None
        (_, r_step, r0, _), (_, r_end, r1, _), (_, c_step, c0, _), (_, c_end, c1, _) = found
        if (r_step and c_step) or r_step < 0 or c_step < 0:
            return None  # (one rectangle, from the first lane's window on)
        if not (r_step or c_step):  # (one window for every program: the store's own form)
            return None
        if r_end not in (0, r_step) or c_end not in (0, c_step):
            return None
        return ((r0, r1), (c0, c1)), ((r_step, r_end), (c_step, c_end))

    def _elementwise_of(self, e, name) -> bool:
        """Whether ``e`` is elementwise ops over the tile variable ``name`` (read at least
        once) and values the same in every program that are not tiles (a tile constant
        or any other tile has the tile's shape, not the region's) and read nothing of
        the tile (its sum over the region would not be its sum over the tile)."""
        reads = False
        stack = [e]
        while stack:
            node = stack.pop()
            if isinstance(node, ir.Var) and node.name == name:
                reads = True
            elif isinstance(node, _ELEMENTWISE) and node.type.kind == "tile":
                stack.extend(ir.children(node))
            elif node.type.kind != "scalar" or self.is_varying(node):
                return False
            elif any(isinstance(n, ir.Var) and n.name == name for n in ir.walk(node)):
                return False  # (a reduction of the tile: of the region, it would differ)
        return reads


def _region(st, bounds, steps, shape, array, count):
    """``(r0, re, c0, ce)``: the rows and columns of ``array`` that the windows of the
    chunk's ``count`` lanes cover (``bounds`` and ``steps`` as
    :meth:`UnionWindows._union_sides` gives them, ``shape`` the tile's), or None where a
    bound is negative or wraps in int32, or the windows leave gaps between them."""
    p, last = st.first, st.first + count - 1
    out = []
    for (start_at, end_at), (step, end_step), side, extent in zip(
        bounds, steps, shape, array.shape[1:]
    ):
        start, end = start_at(st, p), end_at(st, p)
        if start is None or end is None or start_at(st, last) is None:
            return None
        if end_at(st, last) is None or start < 0 or end < 0:
            return None  # (the generic path raises the interpreter's error)
        length = side if not end_step else max(0, min(side, end - start))
        if step > length and length:  # (gaps between the windows)
            return None
        stop = start + step * (count - 1) + length if length else start
        out += [start, max(start, min(stop, extent, end if not end_step else stop))]
    return tuple(out)
