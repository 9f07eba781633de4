"""prepared_scalars"""

from __future__ import annotations

import numpy as np

from qnb import ir
from qnb.backends.cpu.lanes import _expand
from qnb.backends.cpu.prepared_base import _as_blocks, _Blocks, _expand_axes, _op
from qnb.backends.cpu.semantics import _BINARY, _UNARY, cast_values

# Elements below which an elementwise op allocates its result as any op does: a new
# array under 256 KiB comes from the allocator's free lists; from there up it may be
# fresh pages from the system, which cost more than the op.
IN_PLACE_MIN = 1 << 16


def _fits(target: tuple, shape: tuple) -> bool:
    """Whether an operand of ``shape`` broadcasts to ``target`` without making it larger
    (then a result of ``target``'s shape may be written over, or into, ``target``)."""
    if shape == target or (shape == (1,) and target):  # (the common cases, first)
        return True
    if len(shape) > len(target):
        return False
    for have, want in zip(reversed(shape), reversed(target)):
        if have != want and have != 1:
            return False
    return True


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

    def writes_over(self, e, fn, operands) -> bool:
        """Whether ``e``'s closure may write its result over an operand's array or into
        an ``out`` it is given, and so may its parent over ``e``'s: an elementwise ufunc
        whose operands and result all have ``e``'s dtype (its loop then gives the same
        bits wherever it writes) and that is not folded to a constant (a read-only
        array every launch shares). Noted in ``self.chains``, for the parent to ask."""
        dtype = e.type.dtype.numpy
        ok = (
            isinstance(fn, np.ufunc)
            and fn.nout == 1
            and not self.constant(e)
            and all(x.type.dtype == e.type.dtype for x in operands)
        )
        if ok:
            try:
                ok = fn.resolve_dtypes((dtype,) * len(operands) + (None,))[-1] == dtype
            except (TypeError, ValueError):  # (no loop of its own for this dtype)
                ok = False
        self.chains[id(e)] = ok
        return ok

    def chain_target(self, s):
        """``free(st) -> bool`` for a store ``s`` whose value is an elementwise chain that
        takes ``out=`` (:meth:`writes_over`): whether this launch's stored array may be
        written as the chain computes (its dtype the chain's, and no array the chain
        reads sharing memory with it: a later operand would read what an earlier op
        wrote); None where the value is not such a chain."""
        if not self.chains.get(id(s.value), False):
            return None
        reads = sorted({n.param for n in ir.walk(s.value) if isinstance(n, ir.ArrayView)})
        dtype = s.value.type.dtype.numpy
        param = s.view.param

        def free(st):
            arrays = st.arrays
            array = arrays[param]
            if array.dtype != dtype:
                return False
            return not any(np.may_share_memory(arrays[name], array) for name in reads)

        return free

    def e_Unary(self, e):
        fn = _op(_UNARY, e.op)
        operand = self.expr(e.operand)
        if not self.writes_over(e, fn, (e.operand,)):

            def unary(st):
                v = operand(st)
                if isinstance(v, _Blocks):
                    return _Blocks(fn(v.a4), v.ra)
                return fn(v)

            return unary
        over = self.chains.get(id(e.operand), False)

        def unary_over(st, out=None):
            v = operand(st, out) if over and out is not None else operand(st)
            blocks = type(v) is _Blocks
            a = v.a4 if blocks else v
            if out is not None and (type(out) is _Blocks) == blocks:
                target = out.a4 if blocks else out
                if a.shape == target.shape:
                    fn(a, out=target)
                    return out
            if over and a.size >= IN_PLACE_MIN:  # (a new array of the operand's own)
                fn(a, out=a)
                return v
            return _Blocks(fn(a), v.ra) if blocks else fn(a)

        return unary_over

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

        if not self.writes_over(e, fn, (e.left, e.right)):

            def binary(st):
                a, b = left(st), right(st)
                if type(a) is _Blocks or type(b) is _Blocks:
                    ra = a.ra if type(a) is _Blocks else b.ra
                    result = fn(
                        _as_blocks(a, left_kind, ra, st.grid),
                        _as_blocks(b, right_kind, ra, st.grid),
                    )
                    return _Blocks(result.astype(dtype, copy=False), ra)
                if left_axes is not None:
                    a = a[left_axes]
                if right_axes is not None:
                    b = b[right_axes]
                result = fn(a, b)
                return result if result.dtype is dtype else result.astype(dtype, copy=False)

            return binary
        return self.binary_over(e, fn, left, right, left_axes, right_axes)

    def binary_over(self, e, fn, left, right, left_axes, right_axes):
        """An elementwise ufunc of operands of its own dtype (:meth:`writes_over`): it
        computes into the ``out`` a parent or a store gives it (an array, or the block
        grid's :class:`_Blocks`), passing it down to its left operand where that may take
        it, or else over a large operand that is a new array of its own; otherwise as
        any binary op. The loop is the same wherever it writes: the same bits."""
        left_kind, right_kind = e.left.type.kind, e.right.type.kind
        over_left = self.chains.get(id(e.left), False)
        over_right = self.chains.get(id(e.right), False)

        def binary_over(st, out=None):
            a = left(st, out) if over_left and out is not None else left(st)
            b = right(st)
            if type(a) is _Blocks or type(b) is _Blocks:
                if type(out) is _Blocks:
                    ra = out.ra
                    x, y = (
                        _as_blocks(a, left_kind, ra, st.grid),
                        _as_blocks(b, right_kind, ra, st.grid),
                    )
                    target = out.a4.shape
                    if _fits(target, x.shape) and _fits(target, y.shape):
                        fn(x, y, out=out.a4)
                        return out
                ra = a.ra if type(a) is _Blocks else b.ra
                x, y = _as_blocks(a, left_kind, ra, st.grid), _as_blocks(b, right_kind, ra, st.grid)
                if x.size >= IN_PLACE_MIN or y.size >= IN_PLACE_MIN:
                    if over_left and type(a) is _Blocks and a.ra == ra and _fits(x.shape, y.shape):
                        fn(x, y, out=x)
                        return a
                    if over_right and type(b) is _Blocks and b.ra == ra and _fits(y.shape, x.shape):
                        fn(x, y, out=y)
                        return b
                return _Blocks(fn(x, y), ra)
            if left_axes is not None:
                a = a[left_axes]
            if right_axes is not None:
                b = b[right_axes]
            if (
                out is not None
                and type(out) is not _Blocks
                and _fits(out.shape, a.shape)
                and _fits(out.shape, b.shape)
            ):
                fn(a, b, out=out)
                return out
            if a.size >= IN_PLACE_MIN or b.size >= IN_PLACE_MIN:
                if over_left and left_axes is None and _fits(a.shape, b.shape):
                    fn(a, b, out=a)
                    return a
                if over_right and right_axes is None and _fits(b.shape, a.shape):
                    fn(a, b, out=b)
                    return b
            return fn(a, b)

        return binary_over

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
