"""prepared_statements"""

from __future__ import annotations

import numpy as np

from qnb import ir
from qnb.backends.cpu import atomics
from qnb.backends.cpu.lanes import _expand
from qnb.backends.cpu.prepared_base import _Blocks, _Break, _Continue, _tiles, _Unsupported


class StatementClosures:
    """Statement closures: assignments, atomics, branches and loops (uniform ones as plain Python)."""

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

        return assign

    def s_Atomic(self, s):
        """An atomic, through the interpreter's own implementation (``atomics``); the
        scalar form that returns the old value runs in the interpreter."""
        if s.result is not None:
            raise _Unsupported("an atomic's old value")
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
            atomics.apply(op, array, b, r, c, v, ok, False)

        return atomic

    def s_If(self, s):
        cond = self.expr(s.cond)
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

        def masked_if(st):
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

    def s_For(self, s):
        if self.masked or any(self.is_varying(x) for x in (s.start, s.stop, s.step)):
            raise _Unsupported("a loop that differs between programs")
        start, stop, step = (self.expr(x) for x in (s.start, s.stop, s.step))
        self.loops += 1
        try:
            body = self.block(s.body)
        finally:
            self.loops -= 1
        name = s.var
        zero_step = self.error("range() step must not be zero", s)
        has_exits = id(s) in self.facts.exits
        gemm = self.gemm_loop(s)

        def run_for(st):
            first, last, by = int(start(st)[0]), int(stop(st)[0]), int(step(st)[0])
            if by == 0:
                raise zero_step
            if gemm is not None and gemm(st, first, last, by):
                return
            env = st.env
            for i in range(first, last, by):
                env[name] = np.array([i], np.int32)
                st.aliased.discard(name)
                if has_exits:
                    try:
                        body(st)
                    except _Continue:
                        continue
                    except _Break:
                        break
                else:
                    body(st)

        return run_for

    def s_While(self, s):
        if self.masked or self.is_varying(s.cond):
            raise _Unsupported("a loop that differs between programs")
        cond = self.expr(s.cond)
        self.loops += 1
        try:
            body = self.block(s.body)
        finally:
            self.loops -= 1

        def run_while(st):
            while cond(st)[0]:
                try:
                    body(st)
                except _Continue:
                    continue
                except _Break:
                    break

        return run_while

    def s_Break(self, s):
        if self.masked:
            raise _Unsupported("break in a per-program branch")

        def run_break(st):
            raise _Break

        return run_break

    def s_Continue(self, s):
        if self.masked:
            raise _Unsupported("continue in a per-program branch")

        def run_continue(st):
            raise _Continue

        return run_continue
