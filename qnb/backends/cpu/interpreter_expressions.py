"""interpreter_expressions"""

from __future__ import annotations

import numpy as np

from qnb.backends.cpu.lanes import _EYE, _expand, _lanes, _lanes_last
from qnb.backends.cpu.semantics import (
    _BINARY,
    _UNARY,
    _cholesky,
    _solve_lower,
    cast_values,
    index_reduce_values,
    is_narrow_float,
    reduce_values,
    scan_values,
)
from qnb.frontend.checks import tile_index_message


class ExpressionsMixin:
    """The interpreter's expressions: scalars, tiles, reductions and linear algebra."""

    def e_Const(self, e):
        found = self.consts.get(id(e))
        if found is None:
            found = self.consts[id(e)] = np.array([e.value], e.type.dtype.numpy)
        return found

    def e_Var(self, e):
        return self.read(e.name)

    def e_ProgramId(self, e):
        return self.pid[e.axis] if e.which == "id" else self.grid[e.axis]

    def e_Unary(self, e):
        return _UNARY[e.op](self.ev(e.operand))

    def e_Binary(self, e):
        kind = e.type.kind
        left = _expand(self.ev(e.left), e.left.type.kind, kind)
        right = _expand(self.ev(e.right), e.right.type.kind, kind)
        result = _BINARY[e.op](left, right)
        if e.op not in ("lt", "le", "gt", "ge", "eq", "ne", "and", "or", "xor"):
            result = result.astype(e.type.dtype.numpy, copy=False)
        return result

    def e_Logical(self, e):
        left = self.ev(e.left)
        saved = self.mask
        decided = ~left if e.op == "and" else left
        lanes = _lanes(saved, self.n) & ~np.broadcast_to(decided, (self.n,))
        if not lanes.any():
            return left
        self.mask = lanes
        try:
            right = self.ev(e.right)
        finally:
            self.mask = saved
        return (left & right) if e.op == "and" else (left | right)

    def e_Select(self, e):
        kind = e.type.kind
        cond = _expand(self.ev(e.cond), e.cond.type.kind, kind)
        a = _expand(self.ev(e.if_true), e.if_true.type.kind, kind)
        b = _expand(self.ev(e.if_false), e.if_false.type.kind, kind)
        return np.where(cond, a, b)

    def e_Cast(self, e):
        return cast_values(self.ev(e.operand), e.type.dtype)

    def e_ArrayDim(self, e):
        _array, shape = self.arrays[e.param]
        return np.array([shape[e.axis]], np.int32)

    def e_TileFill(self, e):
        dtype = e.type.dtype.numpy
        if e.kind in ("eye", "arange"):
            key = (e.kind, dtype, e.type.shape)
            found = _EYE.get(key)
            if found is None:
                size = e.type.shape[0]
                made = np.eye(size, dtype=dtype) if e.kind == "eye" else np.arange(size)
                found = _EYE[key] = made.astype(dtype)[None]
                found.flags.writeable = False
            return found
        value = self.ev(e.value)
        shape = (value.shape[0], *e.type.shape)
        return np.broadcast_to(_expand(value, "scalar", e.type.kind), shape).astype(dtype)

    def tile_index(self, node, value, limit=16, shape=None):
        index = self.ev(value).astype(np.int64)
        message = tile_index_message(shape or (limit,))
        self.check((index < 0) | (index >= limit), message, node)
        return np.clip(index, 0, limit - 1)

    def e_TileGet(self, e):
        base = self.ev(e.base)
        shape = e.base.type.shape
        i = self.tile_index(e, e.i, shape[0], shape)
        n = max(base.shape[0], i.shape[0])
        lanes = np.arange(n) if base.shape[0] > 1 else np.zeros(n, np.int64)
        if e.j is None:
            return base[lanes, np.broadcast_to(i, (n,))]
        j = self.tile_index(e, e.j, shape[1], shape)
        n = max(n, j.shape[0])
        lanes = np.arange(n) if base.shape[0] > 1 else np.zeros(n, np.int64)
        return base[lanes, np.broadcast_to(i, (n,)), np.broadcast_to(j, (n,))]

    def e_TileSet(self, e):
        base = self.ev(e.base)
        shape = e.base.type.shape
        i = self.tile_index(e, e.i, shape[0], shape)
        value = self.ev(e.value)
        j = self.tile_index(e, e.j, shape[1], shape) if e.j is not None else None
        n = max(base.shape[0], i.shape[0], value.shape[0], 1 if j is None else j.shape[0])
        out = np.array(np.broadcast_to(base, (n, *base.shape[1:])))
        lanes = np.arange(n)
        if j is None:
            out[lanes, np.broadcast_to(i, (n,))] = np.broadcast_to(value, (n,))
        else:
            out[lanes, np.broadcast_to(i, (n,)), np.broadcast_to(j, (n,))] = np.broadcast_to(
                value, (n,)
            )
        return out

    def e_Transpose(self, e):
        return np.swapaxes(self.ev(e.operand), -1, -2)

    def e_Reshape(self, e):
        value = self.ev(e.operand)
        return value.reshape(value.shape[0], *e.type.shape)

    def e_Broadcast(self, e):
        value = self.ev(e.operand)
        shape = e.type.shape
        extra = len(shape) - (value.ndim - 1)  # NumPy's rule: missing leading sides are 1
        value = value.reshape(value.shape[0], *(1,) * extra, *value.shape[1:])
        return np.broadcast_to(value, (value.shape[0], *shape))

    def e_Reduce(self, e):
        value = self.ev(e.operand)
        if e.axis is None:
            axes = tuple(range(1, value.ndim))
        else:
            axes = e.axis + 1
        return reduce_values(e.op, value, axes)

    def e_IndexReduce(self, e):
        return index_reduce_values(e.op, self.ev(e.operand), e.axis)

    def e_Scan(self, e):
        return scan_values(e.op, self.ev(e.operand), e.axis)

    def e_Matmul(self, e):
        a, b = self.ev(e.a), self.ev(e.b)
        out = e.type.dtype.numpy
        if is_narrow_float(a.dtype):  # f16 and bf16 products accumulate in f32
            a, b = a.astype(np.float32), b.astype(np.float32)
        # np.matmul calls BLAS per 16×16 matrix of the stack (as fast as einsum's batched
        # path on NumPy 2, without its per-call path search); broadcasting is its own.
        result = np.matmul(a, b).astype(out, copy=False)
        if e.acc is not None:
            acc = self.ev(e.acc)
            if result.shape[0] >= acc.shape[0] and result.dtype == acc.dtype:
                result += acc  # result is a fresh array: add in place, no second allocation
            else:
                result = acc + result
        return result

    def e_Outer(self, e):
        return self.ev(e.u)[:, :, None] * self.ev(e.v)[:, None, :]

    def e_RowCol(self, e):
        base = self.ev(e.operand)
        side = e.operand.type.shape[0 if e.which == "row" else 1]
        index = self.tile_index(e, e.index, side)
        n = max(base.shape[0], index.shape[0])
        lanes = np.arange(n) if base.shape[0] > 1 else np.zeros(n, np.int64)
        index = np.broadcast_to(index, (n,))
        return base[lanes, index, :] if e.which == "row" else base[lanes, :, index]

    def e_Cholesky(self, e):
        return _lanes_last(_cholesky, self.ev(e.operand), self.ev(e.eps), shape=e.type.shape)

    def e_SolveTriangular(self, e):
        lower = self.ev(e.lower)
        rhs = self.ev(e.rhs)
        return _lanes_last(_solve_lower, lower, rhs, shape=e.type.shape, dtype=rhs.dtype)
