"""prepared_tiles"""

from __future__ import annotations

import numpy as np

from qnb.backends.cpu import prepared_scalars
from qnb.backends.cpu.lanes import _expand
from qnb.backends.cpu.prepared_base import (
    _Blocks,
    _clamp,
    _op,
    _reduce_blocks,
    _tiles,
    spare_buffer,
)
from qnb.backends.cpu.semantics import _REDUCE, index_reduce_values, reduce_values, scan_values
from qnb.frontend.checks import tile_index_message

# The most elements (at f32; fewer of a wider dtype) a reduction keeps a buffer of
# between launches for the chain it reduces (``reduce_into_spare``): 64 MiB.
SPARE_MAX = 1 << 24


class TileClosures:
    """Tile closures: fills, gets and sets, transposes, reductions, scans, reshapes, broadcasts."""

    def e_TileFill(self, e):
        dtype = e.type.dtype.numpy
        if e.kind in ("eye", "arange"):
            size = e.type.shape[0]
            made = np.eye(size, dtype=dtype) if e.kind == "eye" else np.arange(size)
            made = made.astype(dtype)[None]
            made.flags.writeable = False
            return lambda st: made
        value = self.expr(e.value)
        shape_tail = e.type.shape
        to_kind = e.type.kind

        def fill(st):
            v = value(st)
            shape = (v.shape[0], *shape_tail)
            return np.broadcast_to(_expand(v, "scalar", to_kind), shape).astype(dtype)

        return fill

    def tile_index(self, node, value, limit, shape):
        """An index into a side of ``limit`` elements of a ``shape`` tile or vec, checked
        as the interpreter checks it (and clamped, for the lanes that do not count)."""
        fn = self.expr(value)
        check = self.checker(tile_index_message(shape), node)

        def index(st):
            i = fn(st)
            if i.shape == (1,) and i.dtype != np.uint64:  # the same everywhere: Python ints
                k = int(i[0])
                if not 0 <= k < limit:
                    check(st, np.ones(1, bool))
                    k = min(max(k, 0), limit - 1)
                return np.array([k], np.int64)
            i = i.astype(np.int64, copy=False)
            check(st, (i < 0) | (i >= limit))
            return _clamp(i, 0, limit - 1)

        return index

    def e_TileGet(self, e):
        base = self.expr(e.base)
        shape = e.base.type.shape
        i_fn = self.tile_index(e, e.i, shape[0], shape)
        j_fn = self.tile_index(e, e.j, shape[1], shape) if e.j is not None else None

        def get(st):
            b = _tiles(st, base(st))
            i = i_fn(st)
            n = max(b.shape[0], i.shape[0])
            lanes = np.arange(n) if b.shape[0] > 1 else np.zeros(n, np.int64)
            if j_fn is None:
                return b[lanes, np.broadcast_to(i, (n,))]
            j = j_fn(st)
            n = max(n, j.shape[0])
            lanes = np.arange(n) if b.shape[0] > 1 else np.zeros(n, np.int64)
            return b[lanes, np.broadcast_to(i, (n,)), np.broadcast_to(j, (n,))]

        return get

    def e_TileSet(self, e):
        base = self.expr(e.base)
        shape = e.base.type.shape
        i_fn = self.tile_index(e, e.i, shape[0], shape)
        value = self.expr(e.value)
        j_fn = self.tile_index(e, e.j, shape[1], shape) if e.j is not None else None

        def put(st):
            b = _tiles(st, base(st))
            i = i_fn(st)
            v = value(st)
            j = j_fn(st) if j_fn is not None else None
            n = max(b.shape[0], i.shape[0], v.shape[0], 1 if j is None else j.shape[0])
            out = np.array(np.broadcast_to(b, (n, *b.shape[1:])))
            lanes = np.arange(n)
            if j is None:
                out[lanes, np.broadcast_to(i, (n,))] = np.broadcast_to(v, (n,))
            else:
                out[lanes, np.broadcast_to(i, (n,)), np.broadcast_to(j, (n,))] = np.broadcast_to(
                    v, (n,)
                )
            return out

        return put

    def e_Transpose(self, e):
        operand = self.expr(e.operand)

        def transpose(st):
            v = operand(st)
            if isinstance(v, _Blocks):  # block (r, c) becomes block (c, r), transposed
                return _Blocks(v.a4.transpose(0, 3, 2, 1), v.ra)
            return np.swapaxes(v, -1, -2)

        return transpose

    def e_Reduce(self, e):
        operand = self.expr(e.operand)
        _op(_REDUCE, e.op)  # an op the interpreter does not know: left to it
        axis, op = e.axis, e.op

        def reduce(st):
            value = operand(st)
            if isinstance(value, _Blocks):
                if axis == 1:  # along rows: NumPy sums in the interpreter's order
                    return _reduce_blocks(st, value, op, axis)
                value = value.tiles(st.grid)
            axes = tuple(range(1, value.ndim)) if axis is None else axis + 1
            return reduce_values(op, value, axes)

        if axis != 1 or not self.chains.get(id(e.operand), False):
            return reduce
        return self.reduce_into_spare(e, operand, reduce)

    def reduce_into_spare(self, e, operand, reduce):
        """A reduction along rows of an elementwise chain over a block grid: the chain
        computes into a buffer the reduction keeps from launch to launch (a new array
        of many MiB is fresh pages from the system each time, which cost more than the
        op), from ``IN_PLACE_MIN`` elements up to ``SPARE_MAX``. A launch takes the
        buffer while it runs (one on another thread meanwhile makes its own)."""
        m, n = e.operand.type.shape
        dtype = e.operand.type.dtype.numpy
        op = e.op
        limit = SPARE_MAX * 4 // dtype.itemsize
        spare = []
        over = self.overwritable(e)  # (dead tiles' buffers the chain may take instead)

        def reduce_into(st):
            grid = st.grid
            size = grid[0] * grid[1] * m * n
            if not st.whole or grid[2] != 1 or not prepared_scalars.IN_PLACE_MIN <= size <= limit:
                return reduce(st)
            shape = (grid[0], m, grid[1], n)
            buffer = next((st.env[k] for k in over if k in st.env), None) if over else None
            own = buffer is None or buffer.shape != shape or buffer.dtype != dtype
            if own:
                buffer = spare_buffer(spare, shape, dtype)
            try:  # (the result is a new array: nothing keeps the buffer)
                value = operand(st, _Blocks(buffer, 0))
                if isinstance(value, _Blocks):
                    return _reduce_blocks(st, value, op, 1)
                return reduce_values(op, value, 2)
            finally:
                if own:
                    spare.append(buffer)

        return reduce_into

    def e_Scan(self, e):
        operand = self.expr(e.operand)
        op, axis = e.op, e.axis

        def scan(st):
            value = operand(st)
            if isinstance(value, _Blocks):
                value = value.tiles(st.grid)
            return scan_values(op, value, axis)

        return scan

    def e_IndexReduce(self, e):
        operand = self.expr(e.operand)
        op, axis = e.op, e.axis

        def index_reduce(st):
            value = operand(st)
            if isinstance(value, _Blocks):
                if axis is not None:  # along one axis of each tile: on the grid itself
                    return _reduce_blocks(st, value, op, axis, index=True)
                value = value.tiles(st.grid)
            return index_reduce_values(op, value, axis)

        return index_reduce

    def e_Reshape(self, e):
        operand = self.expr(e.operand)
        shape = e.type.shape

        def reshape(st):
            value = _tiles(st, operand(st))
            return value.reshape(value.shape[0], *shape)

        return reshape

    def e_Broadcast(self, e):
        operand = self.expr(e.operand)
        shape = e.type.shape

        def broadcast(st):  # NumPy's rule: missing leading sides are 1 (a read-only view)
            value = operand(st)
            if type(value) is _Blocks and len(shape) == 2:  # (the blocks' view, ungathered)
                rb, _, cb, _ = value.a4.shape
                return _Blocks(np.broadcast_to(value.a4, (rb, shape[0], cb, shape[1])), value.ra)
            value = _tiles(st, value)
            extra = len(shape) - (value.ndim - 1)
            value = value.reshape(value.shape[0], *(1,) * extra, *value.shape[1:])
            return np.broadcast_to(value, (value.shape[0], *shape))

        return broadcast
