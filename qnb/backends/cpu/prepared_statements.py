"""The prepared path's statements other than loops: assignments, atomics and branches
(uniform ones as plain Python, per-program ones under lane masks)."""

from __future__ import annotations

import operator

import numpy as np

from qnb import ir
from qnb.backends.cpu import atomics
from qnb.backends.cpu.lanes import _expand
from qnb.backends.cpu.prepared_base import _Blocks, _tiles
from qnb.backends.cpu.prepared_lanes import restore

_ORDERS = {"lt": operator.lt, "le": operator.le, "gt": operator.gt, "ge": operator.ge}
_MIRRORED = {"lt": "gt", "le": "ge", "gt": "lt", "ge": "le"}  # (u < p is p > u)


class StatementClosures:
    """Statement closures: assignments, atomics, branches (loops: ``prepared_loops``)."""

    def note_pid_var(self, stmt):
        if self.assign_count.get(stmt.name) != 1:
            return
        if self.constant(stmt.value) and not (
            isinstance(stmt.value, ir.TileFill) and stmt.value.kind == "eye"
        ):
            with np.errstate(all="ignore"):
                try:
                    value = self.expr(stmt.value)(None)
                except Exception:  # noqa: BLE001 - it raises at launch, as it should
                    return
            if isinstance(value, np.ndarray) and value.dtype == stmt.value.type.dtype.numpy:
                self.const_vars[stmt.name] = value
            return
        axis = self.pid_axis(stmt.value)
        if axis is not None:
            self.pid_vars[stmt.name] = (axis, 1)
            return
        found = self.pid_factor(stmt.value)
        if found is not None:
            self.pid_vars[stmt.name] = found

    def s_Assign(self, s):
        value = self.expr(s.value)
        name = s.name
        dtype = s.value.type.dtype.numpy
        kind = s.value.type.kind

        def assign(st):
            v = value(st)
            if isinstance(v, _Blocks):
                if v.dtype != dtype:
                    v = _Blocks(v.a4.astype(dtype), v.ra)
                if st.mask is None:
                    st.env[name] = v
                    if v.a4.base is not None:
                        st.aliased.add(name)
                    else:
                        st.aliased.discard(name)
                    return
                v = v.tiles(st.grid)
            elif v.dtype != dtype:
                v = v.astype(dtype)
            if st.mask is None:
                st.env[name] = v
                if v.base is not None and any(
                    np.may_share_memory(v, a) for a in st.arrays.values()
                ):
                    st.aliased.add(name)
                else:
                    st.aliased.discard(name)
                return
            old = _tiles(st, st.env[name])
            st.env[name] = np.where(_expand(st.mask, "scalar", kind), v, old)
            st.aliased.discard(name)

        if name in self.spare_names and self.chains.get(id(s.value), False):
            return self.assign_into_spare(s, value, assign)
        return assign

    def s_Atomic(self, s):
        """An atomic, through the interpreter's own implementation (``atomics``); the
        scalar form's old value assigned as the interpreter assigns it (masked)."""
        result = s.result
        value = self.expr(s.value)
        indices = [self.expr(i) for i in s.indices]
        view = self.view(s.view, s)
        compiler, op = self, s.op

        def atomic(st):
            v = _tiles(st, value(st))
            idx = [_tiles(st, i(st)) for i in indices]
            array, batch = view(st)
            if st.aliased:
                compiler.detach(st, array)
            lanes = np.ones(st.n, bool) if st.mask is None else st.mask
            b, r, c, v, ok, _ = atomics.elements(array, batch, idx, v, lanes)
            old = atomics.apply(op, array, b, r, c, v, ok, result is not None)
            if old is None:
                return
            if st.mask is not None:
                old = np.where(st.mask, old, _tiles(st, st.env[result]))
            st.env[result] = old
            st.aliased.discard(result)

        return atomic

    def s_If(self, s):
        cond = self.expr(s.cond)
        if self.lane_exit_depth:
            return self.if_in_exits(s, cond)
        if not self.is_varying(s.cond):
            then_body = self.block(s.then_body)
            else_body = self.block(s.else_body)

            def uniform_if(st):
                if cond(st)[0]:
                    then_body(st)
                else:
                    else_body(st)

            return uniform_if
        self.masked += 1
        try:
            then_body = self.block(s.then_body)
            else_body = self.block(s.else_body) if s.else_body else None
        finally:
            self.masked -= 1
        decided = self.grid_decides(s.cond)

        def masked_if(st):
            if decided is not None:
                every = decided(st)
                if every is not None:  # (the same in every program of this chunk)
                    if every:
                        then_body(st)
                    elif else_body is not None:
                        else_body(st)
                    return
            c = cond(st)
            saved = st.mask
            if saved is None and c.all():  # every program takes the branch
                then_body(st)
                return
            lanes = np.ones(st.n, bool) if saved is None else saved
            taken = lanes & c
            if taken.any():
                st.mask = taken
                try:
                    then_body(st)
                finally:
                    st.mask = saved
            if else_body is not None:
                other = lanes & ~c
                if other.any():
                    st.mask = None if saved is None and other.all() else other
                    try:
                        else_body(st)
                    finally:
                        st.mask = saved

        return masked_if

    def if_in_exits(self, s, cond):
        """An ``if`` inside a loop with per-program exits, as the interpreter runs it:
        after each branch the mask drops the programs that left the loop in it
        (``prepared_lanes.restore``), and the ``else`` runs for those still in."""
        varying = self.is_varying(s.cond)
        self.masked += varying
        try:
            then_body = self.block(s.then_body)
            else_body = self.block(s.else_body) if s.else_body else None
        finally:
            self.masked -= varying

        if not varying:

            def uniform_if_in_exits(st):
                saved = st.mask
                if cond(st)[0]:
                    then_body(st)
                elif else_body is not None:
                    else_body(st)
                restore(st, saved)

            return uniform_if_in_exits

        def masked_if_in_exits(st):
            c = np.broadcast_to(cond(st), (st.n,))
            saved = st.mask
            lanes = np.ones(st.n, bool) if saved is None else saved
            taken = lanes & c
            if taken.any():
                st.mask = taken
                then_body(st)
                restore(st, saved)
            if else_body is not None:
                other = (lanes if st.mask is None else st.mask) & ~c
                if other.any():
                    st.mask = other
                    else_body(st)
            restore(st, saved)

        return masked_if_in_exits

    def grid_decides(self, cond):
        """``decided(st) -> True | False | None`` for a condition ``program_id(a) * f < u``
        (any order, any of ``<``, ``<=``, ``>``, ``>=``; ``u`` an i32 the same in every
        program): over a chunk of consecutive programs of a 1-D grid, where it holds
        (or fails) at both ends it holds (fails) for all between, which two Python
        comparisons decide without the per-program ids and mask (None: compute them);
        where no i32 product could wrap. None where the condition is not such."""
        if not isinstance(cond, ir.Binary) or cond.op not in _ORDERS:
            return None
        op = cond.op
        pid = self.pid_factor(cond.left)
        bound = cond.right
        if pid is None:
            pid, bound, op = self.pid_factor(cond.right), cond.left, _MIRRORED[cond.op]
        if pid is None or self.is_varying(bound) or bound.type.dtype.numpy != np.int32:
            return None
        axis, factor = pid
        if axis != 0:
            return None
        compare = _ORDERS[op]
        limit = self.expr(bound)

        def decided(st):
            if not st.run0 or st.mask is not None:
                return None
            last = (st.first + st.n - 1) * factor
            if last >= 2**31:
                return None
            u = int(limit(st)[0])
            low, high = compare(st.first * factor, u), compare(last, u)
            return low if low == high else None

        return decided
