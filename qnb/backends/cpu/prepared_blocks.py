"""prepared_blocks"""

from __future__ import annotations

import numpy as np

from qnb import ir
from qnb.backends.cpu.prepared_base import _spans


class BlockGridMixin:
    """Strategy: block grids, tiles at ``program_id(a) * M`` seen as the array's M×N blocks."""

    def pid_block(self, e, side=16):
        """The grid axis ``a`` when ``e`` is ``program_id(a) * side``; else None."""
        found = self.pid_factor(e)
        return found[0] if found is not None and found[1] == side else None

    def pid_factor(self, e):
        """``(a, factor)`` when ``e`` is ``program_id(a) * factor`` (a positive constant;
        ``program_id(a)`` itself has factor 1); else None."""
        if isinstance(e, ir.Var):
            return self.pid_vars.get(e.name)
        if isinstance(e, ir.ProgramId):
            axis = self.pid_axis(e)
            return None if axis is None else (axis, 1)
        if isinstance(e, ir.Binary) and e.op == "mul":
            for p, k in ((e.left, e.right), (e.right, e.left)):
                if (
                    isinstance(k, ir.Const)
                    and type(k.value) is int
                    and 1 <= k.value <= ir.MAX_TILE_ELEMENTS
                ):
                    axis = self.pid_axis(p)
                    if axis is not None:
                        return axis, k.value
        return None

    def pid_axis(self, e):
        """The grid axis ``a`` when ``e`` is ``program_id(a)``; else None."""
        if isinstance(e, ir.ProgramId) and e.which == "id" and e.axis < 2:
            return e.axis
        if isinstance(e, ir.Var):
            found = self.pid_vars.get(e.name)
            return found[0] if found and found[1] == 1 else None
        return None

    def block_end(self, e, axis, side=16):
        """Whether ``e`` is ``program_id(axis) * side + side`` (a TileLoad's window end)."""
        return (
            isinstance(e, ir.Binary)
            and e.op == "add"
            and isinstance(e.right, ir.Const)
            and e.right.value == side
            and self.pid_block(e.left, side) == axis
        )

    def known_window(self, v, bounds, padded):
        """``(r0, r1, c0, c1)`` where a window's bounds are constants that pass their
        checks (of a parameter's own 2-D/1-D array, no batch index); else None."""
        if v.batch is not None or not all(self.constant(x) for x in bounds):
            return None
        with np.errstate(all="ignore"):
            known = tuple(int(self.expr(x)(None)[0]) for x in bounds)
        if min(known) < 0 and not padded:
            return None
        return known

    def store_known(self, s, v, known, generic):
        """A store of a constant tile to a constant window (``Tile16.full(4.0).store(d,
        0, 0)``): the value, the slices and the end a whole tile needs are made once."""
        param = s.view.param
        m, n = s.value.type.shape
        r0, r1, c0, c1 = known
        whole = v[0]
        index = (0, slice(r0, r0 + m), slice(c0, c0 + n))  # (of the array's one slab)
        # a whole tile fits where the array reaches these (and the window does)
        need_rows = r0 + m if r0 >= 0 and r1 >= r0 + m else None
        need_cols = c0 + n if c0 >= 0 and c1 >= c0 + n else None
        partial = need_rows is None or need_cols is None  # (a window that cuts the tile)
        compiler = self

        def store_known(st):
            array = st.arrays[param]
            if st.aliased:
                compiler.detach(st, array)
            if partial or st.mask is not None:
                generic(st, v, array, 0, r0, r1, c0, c1)
                return
            _, height, width = array.shape
            if need_rows <= height and need_cols <= width:
                array[index] = whole
                return
            rows = max(0, min(r1, height, need_rows) - r0)
            cols = max(0, min(c1, width, need_cols) - c0)
            array[0, r0 : r0 + rows, c0 : c0 + cols] = whole[:rows, :cols]

        return store_known

    def grid_pattern(self, node, shape):
        """``(row_axis, col_axis)`` for an M×N window ``(program_id(a) * M, … + M)`` /
        ``(program_id(b) * N, … + N)`` on either side (at least one; the other None, a
        uniform bound); else None."""
        m, n = shape
        rows = self.pid_block(node.r0, m)
        cols = self.pid_block(node.c0, n)
        if rows is not None and not self.block_end(node.r1, rows, m):
            rows = None
        if cols is not None and not self.block_end(node.c1, cols, n):
            cols = None
        if (rows is None and cols is None) or rows == cols:
            return None
        for axis, bounds in ((rows, (node.r0, node.r1)), (cols, (node.c0, node.c1))):
            if axis is None and any(self.is_varying(b) for b in bounds):
                return None
        if node.view.batch is not None and self.is_varying(node.view.batch):
            return None
        return rows, cols

    def block_spans(self, bounds, row_axis, col_axis, shape):
        """``spans(st, array)``: :func:`_spans` of a block-grid window with ``bounds``
        (r0, r1, c0, c1 nodes) whose rows and columns follow the grid axes ``row_axis``
        and ``col_axis``. Where the bounds of a side no grid axis follows are constants
        (or there is no such side), the spans depend on the grid and the array's shape
        only: worked out once for each and kept (a small launch pays for each step)."""
        r0, r1, c0, c1 = bounds
        r_fns, c_fns = (self.expr(r0), self.expr(r1)), (self.expr(c0), self.expr(c1))
        free_sides = [
            pair for axis, pair in ((row_axis, (r0, r1)), (col_axis, (c0, c1))) if axis is None
        ]
        if not all(self.constant(e) for pair in free_sides for e in pair):
            return lambda st, array: _spans(st, array, row_axis, col_axis, r_fns, c_fns, shape)
        kept: dict = {}

        def spans(st, array):
            key = (st.grid, array.shape)
            try:
                return kept[key]
            except KeyError:
                pass
            found = _spans(st, array, row_axis, col_axis, r_fns, c_fns, shape)
            if len(kept) >= 64:  # (a launcher sees few grids and shapes; bounded anyway)
                kept.clear()
            kept[key] = found
            return found

        return spans
