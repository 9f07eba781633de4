"""prepared_strided"""

from __future__ import annotations

import numpy as np

from qnb import ir
from qnb.backends.cpu.prepared_base import _INT32, _grid_view, _tile_view, _tiles


class StridedWindowMixin:
    """Strategy: strided windows, tiles stepping a fixed amount from lane to lane as one view."""

    def lane_linear(self, e):
        """``(axis, factor, at, pure)`` when ``e`` is ``program_id(axis) * factor`` plus and
        minus values the same in every program (``factor`` 0, ``axis`` None where ``e``
        is itself the same in every program); ``at(st, p)`` is its value, as a Python
        int, where ``program_id(axis) == p``, or None where its int32 arithmetic would
        wrap; ``pure`` whether that value depends on nothing else (no scalar parameter,
        no variable). Else None."""
        if not self.is_varying(e):
            fn = self.expr(e)
            return None, 0, lambda st, p: int(fn(st)[0]), self.constant(e)
        found = self.pid_factor(e)
        if found is not None:
            factor = found[1]

            def scaled(st, p):
                v = factor * p
                return v if -_INT32 <= v < _INT32 else None

            return found[0], factor, scaled, True
        if not (isinstance(e, ir.Binary) and e.op in ("add", "sub")):
            return None
        left, right = self.lane_linear(e.left), self.lane_linear(e.right)
        if left is None or right is None:
            return None
        if left[1] and right[1]:  # (program_id on both sides: not one term)
            return None
        axis, factor = left[:2] if left[1] else right[:2]
        pure = left[3] and right[3]
        if e.op == "sub":
            if right[1]:
                return None
            sign = -1
        else:
            sign = 1
        lat, rat = left[2], right[2]

        def at(st, p):
            x, y = lat(st, p), rat(st, p)
            if x is None or y is None:
                return None
            v = x + sign * y
            return v if -_INT32 <= v < _INT32 else None

        return axis, factor, at, pure

    def strided_window(self, node, shape, edges=False):
        """``window(st) -> (array, b, r0, dr, c0, dc)`` for a window whose bounds step by
        a fixed amount from program to program (``program_id(a) * f + u``): every lane's
        tile is ``array[b, r0 + lane * dr + i, c0 + lane * dc + j]``, and all of them lie in
        the array and inside their window bounds, so no element is masked and no bound
        check can fail. None (at a launch) where that is not so; None (now) where the
        bounds are not of that form. With ``edges``, also ``(array, b, r0, dr, c0, dc,
        rows, cols)`` where tiles leave the array but no check can fail and every
        lane's window holds its first ``rows`` rows and ``cols`` columns (of the
        elements in the array)."""
        padded = getattr(node, "padded", False)
        v = node.view
        if v.batch is not None and self.is_varying(v.batch):
            return None
        linear = [self.lane_linear(x) for x in (node.r0, node.r1, node.c0, node.c1)]
        if None in linear or all(f == 0 for _, f, _, _ in linear):
            return None
        view = self.view(v, node)
        m, n = shape
        pure = all(x[3] for x in linear)
        memo = {}  # (grid, first pids, lanes, array shape) -> the window, for pure bounds

        def window(st):
            array, b = view(st)
            if not pure:
                found = find(st, array, b)
            else:
                key = (st.grid, st.first, st.n, array.shape, b)  # (the lanes' program ids)
                found = memo.get(key, memo)
                if found is memo:
                    if len(memo) >= 32:
                        memo.clear()
                    found = memo[key] = find(st, array, b)
            return None if found is None else (array, *found)

        def find(st, array, b):
            count = st.n
            one = count == 1
            if not one and st.grid[1] * st.grid[2] != 1:
                return _grid_window(st, array, b, linear, shape)
            ends = []  # each bound at the first lane and its step per lane
            for axis, factor, at, _ in linear:
                if factor == 0:
                    ends.append((at(st, 0), 0))
                    continue
                p = int(st.pid[axis][0])
                step = 0 if one or axis != 0 else factor
                first = at(st, p)
                # (linear in p: where neither end wraps, no lane between does)
                if first is None or (step and at(st, p + count - 1) is None):
                    return None
                ends.append((first, step))
            _, height, width = array.shape
            (r0, dr), (r1, dr1), (c0, dc), (c1, dc1) = ends
            lane = count - 1
            clean = True
            for lo, dlo, hi, dhi, side, extent in (
                (r0, dr, r1, dr1, m, height),
                (c0, dc, c1, dc1, n, width),
            ):
                for k in (0, lane):  # linear in the lane: both ends decide
                    start, end = lo + dlo * k, hi + dhi * k
                    if start < 0 or start + side > end or start + side > extent:
                        clean = False
                    if (start < 0 or end < 0) and not padded:
                        return None  # (the generic path's check, for the lanes that run)
            if clean:
                return b, r0, dr, c0, dc
            if not edges or dr1 != dr or dc1 != dc:
                return None
            # some tiles leave the array or their window: the window ends sit the same
            # distance from the starts in every lane, so the elements that exist are
            # the array's within [0, rows) x [0, cols) and the tiles' first r1 - r0 rows
            # and c1 - c0 columns
            return b, r0, dr, c0, dc, r1 - r0, c1 - c0

        return window

    def strided_load(self, e, base):
        """The generic load's fast path for a strided window (:meth:`strided_window`):
        the tiles are one strided view of the array, copied once."""
        shape = m, n = e.type.shape
        dtype = e.type.dtype.numpy
        if not self.constant(e.base):
            return None
        try:
            fill = base(None)
        except Exception:  # noqa: BLE001 - the generic load raises it at launch
            return None
        if not isinstance(fill, np.ndarray) or np.result_type(dtype, fill.dtype) != dtype:
            return None
        flat = fill.reshape(-1)
        value = flat[0]  # the fill of every element outside, where it is one value
        # (np.array_equal of flat and its first element broadcast, NaN equal to NaN,
        # without its broadcast and copies)
        same = bool((flat == value).all()) or (
            fill.dtype.kind in "fc" and bool(np.isnan(flat).all())
        )
        window = self.strided_window(e, shape, edges=same)
        if window is None:
            return None

        def load(st):
            found = window(st)
            if found is None:
                return None
            if len(found) == 6:
                array, b, r0, dr, c0, dc = found
                tiles = _tile_view(array, b, r0, dr, c0, dc, (st.n, m, n))
                return tiles.astype(dtype, order="C")  # (a C-ordered copy, as the gather)
            if len(found) == 5:  # the whole 2-D grid: (rows of programs, programs, M, N)
                array, b, r0, c0, steps = found
                gx, gy, _ = st.grid
                tiles = _grid_view(array, b, r0, c0, steps, (gy, gx, m, n))
                # (launch order: x fastest)
                return tiles.astype(dtype, order="C").reshape(st.n, m, n)
            array, b, r0, dr, c0, dc, rows, cols = found
            # the region the tiles span, filled, with the array's part copied in: the
            # tiles are then a strided view of it
            count = st.n
            height, width = dr * (count - 1) + m, dc * (count - 1) + n
            if height * width > 4 * count * m * n + 4096:  # (tiles far apart: gather)
                return None
            region = np.empty((height, width), dtype)
            region[...] = value
            _, h, w = array.shape
            rs, re = max(r0, 0), min(r0 + height, h)
            cs, ce = max(c0, 0), min(c0 + width, w)
            if rs < re and cs < ce:
                region[rs - r0 : re - r0, cs - c0 : ce - c0] = array[b, rs:re, cs:ce]
            tiles = _tile_view(region[None], 0, 0, dr, 0, dc, (count, m, n)).copy()
            if rows < m:
                tiles[:, max(rows, 0) :, :] = value
            if cols < n:
                tiles[:, :, max(cols, 0) :] = value
            return tiles

        return load

    def strided_store(self, s):
        """``store(st, v) -> done``: the generic store's fast path for a strided window
        (:meth:`strided_window`) and no mask: tiles that do not overlap are assigned
        through one strided view; tiles that overlap along one side keep the last lane's
        elements, as the interpreter's scatter does."""
        shape = m, n = s.value.type.shape
        window = self.strided_window(s, shape, edges=True)
        if window is None:
            return None

        def store(st, v):
            if st.mask is not None:
                return False
            found = window(st)
            if found is None:
                return False
            count = st.n
            if len(found) == 8:
                return store_edges(st, v, count, *found)
            if len(found) == 5:
                return store_grid(st, v, *found)
            array, b, r0, dr, c0, dc = found
            v = _tiles(st, v)
            if v.base is not None and np.may_share_memory(v, array):
                v = v.copy()
            if count == 1 or dr >= m or dc >= n:  # the tiles do not overlap
                _tile_view(array, b, r0, dr, c0, dc, (count, m, n), True)[...] = v
                return True
            a2 = array[b]
            if dc == 0:
                dst, step, side, width = a2[r0 : r0 + dr * (count - 1) + m, c0 : c0 + n], dr, m, n
            elif dr == 0:
                dst, step, side, width = a2[r0 : r0 + m, c0 : c0 + dc * (count - 1) + n].T, dc, n, m
                v = np.swapaxes(v, -1, -2)
            else:
                return False
            if v.shape[0] != count:
                v = np.broadcast_to(v, (count, side, width))
            # lane p's first `step` lines are its own; the last lane keeps all its lines
            dst[: step * (count - 1)] = v[:-1, :step].reshape(-1, width)
            dst[step * (count - 1) :] = v[-1]
            return True

        def store_grid(st, v, array, b, r0, c0, steps):
            """The whole 2-D grid's tiles through one view of the array, where no two
            overlap: each axis of the grid moves them along one side of the array, by
            at least a tile (else False: the generic store's scatter decides)."""
            gx, gy, _ = st.grid
            (dr_y, dc_y), (dr_x, dc_x) = steps
            rows_by_y = (
                dc_y == 0 and dr_x == 0 and (gy == 1 or dr_y >= m) and (gx == 1 or dc_x >= n)
            )
            rows_by_x = (
                dr_y == 0 and dc_x == 0 and (gx == 1 or dr_x >= m) and (gy == 1 or dc_y >= n)
            )
            if not (rows_by_y or rows_by_x):
                return False
            v = _tiles(st, v)
            if v.base is not None and np.may_share_memory(v, array):
                v = v.copy()
            view = _grid_view(array, b, r0, c0, steps, (gy, gx, m, n), True)
            view[...] = v.reshape(gy, gx, m, n) if v.shape[0] == st.n else v[0]
            return True

        def store_edges(st, v, count, array, b, r0, dr, c0, dc, rows, cols):
            """Tiles that leave the array or their window, stepping down the rows with
            no gap between the rows they write: the lanes' elements composed into the
            region they span (the last lane's where they overlap, as the scatter), and
            the region's part in the array assigned at once."""
            rows, cols = min(rows, m), min(cols, n)
            if rows <= 0 or cols <= 0:
                return True  # (no element is written)
            if dc != 0 or not (count == 1 or 1 <= dr <= rows):
                return False
            v = _tiles(st, v)
            if v.shape[0] != count:
                v = np.broadcast_to(v, (count, m, n))
            height = dr * (count - 1) + rows
            region = np.empty((height, cols), v.dtype)
            region[: dr * (count - 1)] = v[:-1, :dr, :cols].reshape(-1, cols)
            region[dr * (count - 1) :] = v[-1, :rows, :cols]
            _, h, w = array.shape
            rs, re = max(r0, 0), min(r0 + height, h)
            cs, ce = max(c0, 0), min(c0 + cols, w)
            if rs < re and cs < ce:
                array[b, rs:re, cs:ce] = region[rs - r0 : re - r0, cs - c0 : ce - c0]
            return True

        return store


def _grid_window(st, array, b, linear, shape):
    """``(b, r0, c0, steps)`` for the whole 2-D grid at once (``steps``: the rows
    and columns a tile moves per program along axis 1, then axis 0, none of them
    negative), where every tile lies in the array and inside its window (no
    element masked, no check that could fail); else None."""
    gx, gy, gz = st.grid
    m, n = shape
    if not st.whole or gz != 1:
        return None
    ends = []  # each bound at program (0, 0), and its step along axes 0 and 1
    for axis, factor, at, _ in linear:
        first = at(st, 0)
        if first is None:
            return None
        if factor == 0 or axis == 2:
            ends.append((first, 0, 0))
            continue
        if factor < 0 or at(st, (gx if axis == 0 else gy) - 1) is None:
            return None  # (linear in p: where neither end wraps, no lane between does)
        ends.append((first, factor, 0) if axis == 0 else (first, 0, factor))
    _, height, width = array.shape
    (r0, *r0_steps), (r1, *r1_steps), (c0, *c0_steps), (c1, *c1_steps) = ends
    corners = ((0, 0), (gx - 1, 0), (0, gy - 1), (gx - 1, gy - 1))
    for lo, lo_steps, hi, hi_steps, side, extent in (
        (r0, r0_steps, r1, r1_steps, m, height),
        (c0, c0_steps, c1, c1_steps, n, width),
    ):
        for px, py in corners:  # linear in each axis: the corners decide
            start = lo + lo_steps[0] * px + lo_steps[1] * py
            end = hi + hi_steps[0] * px + hi_steps[1] * py
            if start < 0 or start + side > end or start + side > extent:
                return None
    steps = ((r0_steps[1], c0_steps[1]), (r0_steps[0], c0_steps[0]))
    return b, r0, c0, steps
