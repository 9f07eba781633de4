"""prepared_scalars"""

from __future__ import annotations

import numpy as np

from qnb.backends.cpu.lanes import _expand
from qnb.backends.cpu.prepared_base import _as_blocks, _Blocks, _expand_axes, _op
from qnb.backends.cpu.semantics import _BINARY, _UNARY, cast_values


class ScalarClosures:
    """Scalar closures: constants folded, uniform values as Python ints, elementwise ops."""

    def constant(self, e) -> bool:
        """Whether ``e`` is known now: a literal, an identity tile, or a foldable op of
        such (see :class:`_Facts`)."""
        return self.facts.constant[id(e)]

    def e_Const(self, e):
        value = e.value
        if type(value) is int:  # (a kernel's bounds and sides repeat a few ints: one each)
            key = (value, e.type.dtype)
            fn = self.ints.get(key)
            if fn is None:
                fn = self.ints[key] = self.const_closure(e)
            return fn
        return self.const_closure(e)

    @staticmethod
    def const_closure(e):
        value = np.array([e.value], e.type.dtype.numpy)
        value.flags.writeable = False
        return lambda st: value

    def e_Var(self, e):
        name = e.name
        return lambda st: st.env[name]

    def e_ProgramId(self, e):
        axis = e.axis
        if e.which == "id":
            return lambda st: st.pid[axis]
        return lambda st: np.array([st.grid[axis]], np.int32)

    def e_ArrayDim(self, e):
        param, axis = e.param, e.axis
        return lambda st: np.array([st.shapes[param][axis]], np.int32)

    def e_Unary(self, e):
        fn = _op(_UNARY, e.op)
        operand = self.expr(e.operand)

        def unary(st):
            v = operand(st)
            if isinstance(v, _Blocks):
                return _Blocks(fn(v.a4), v.ra)
            return fn(v)

        return unary

    def e_Binary(self, e):
        fn = _op(_BINARY, e.op)
        kind = e.type.kind
        left_kind, right_kind = e.left.type.kind, e.right.type.kind
        left, right = self.expr(e.left), self.expr(e.right)
        # the interpreter casts all but comparisons and logic ops, whose result (bool) is
        # already the node's dtype: casting every result to it is the same, and new ops
        # need no list of their own here
        dtype = e.type.dtype.numpy

        # (_expand, decided now: only a scalar side of a tile or vec result needs axes)
        left_axes, right_axes = _expand_axes(left_kind, kind), _expand_axes(right_kind, kind)

        def binary(st):
            a, b = left(st), right(st)
            if type(a) is _Blocks or type(b) is _Blocks:
                ra = a.ra if type(a) is _Blocks else b.ra
                result = fn(
                    _as_blocks(a, left_kind, ra, st.grid), _as_blocks(b, right_kind, ra, st.grid)
                )
                return _Blocks(result.astype(dtype, copy=False), ra)
            if left_axes is not None:
                a = a[left_axes]
            if right_axes is not None:
                b = b[right_axes]
            result = fn(a, b)
            return result if result.dtype is dtype else result.astype(dtype, copy=False)

        return binary

    def e_Logical(self, e):
        left, right = self.expr(e.left), self.expr(e.right)
        is_and = e.op == "and"
        if not self.is_varying(e.left):

            def uniform(st):
                a = left(st)
                if bool(a[0]) != is_and:
                    return a
                b = right(st)
                return (a & b) if is_and else (a | b)

            return uniform

        def logical(st):
            a = left(st)
            saved = st.mask
            decided = ~a if is_and else a
            lanes = (np.ones(st.n, bool) if saved is None else saved) & ~np.broadcast_to(
                decided, (st.n,)
            )
            if not lanes.any():
                return a
            st.mask = lanes
            try:
                b = right(st)
            finally:
                st.mask = saved
            return (a & b) if is_and else (a | b)

        return logical

    def e_Select(self, e):
        kind = e.type.kind
        parts = [(self.expr(x), x.type.kind) for x in (e.cond, e.if_true, e.if_false)]

        def select(st):
            values = [(f(st), k) for f, k in parts]
            blocks = [v for v, _ in values if isinstance(v, _Blocks)]
            if blocks:
                ra = blocks[0].ra
                c, a, b = (_as_blocks(v, k, ra, st.grid) for v, k in values)
                return _Blocks(np.where(c, a, b), ra)
            c, a, b = (_expand(v, k, kind) for v, k in values)
            return np.where(c, a, b)

        return select

    def e_Cast(self, e):
        operand = self.expr(e.operand)
        target = e.type.dtype

        def cast(st):
            v = operand(st)
            if isinstance(v, _Blocks):
                return _Blocks(cast_values(v.a4, target), v.ra)
            return cast_values(v, target)

        return cast
