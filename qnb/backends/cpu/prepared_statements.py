"""prepared_statements"""

from __future__ import annotations

import numpy as np

from qnb import ir
from qnb.backends.cpu import atomics
from qnb.backends.cpu.lanes import _expand
from qnb.backends.cpu.prepared_base import _Blocks, _Break, _Continue, _tiles, _Unsupported
from qnb.backends.cpu.prepared_lanes import Turns, carried

_ORDERS = {
    "lt": lambda a, b: a < b,
    "le": lambda a, b: a <= b,
    "gt": lambda a, b: a > b,
    "ge": lambda a, b: a >= b,
}
_MIRRORED = {"lt": "gt", "le": "ge", "gt": "lt", "ge": "le"}  # (u < p is p > u)


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

    def loop_body(self, body):
        """The closure of a loop's body; an exit in it is the loop's own only outside
        any per-program branch the body opens (see s_Break)."""
        self.loops += 1
        self.exit_depths.append(self.masked)
        try:
            return self.block(body)
        finally:
            self.loops -= 1
            self.exit_depths.pop()

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

    def s_For(self, s):
        start, stop, step = (self.expr(x) for x in (s.start, s.stop, s.step))
        body = self.loop_body(s.body)
        name = s.var
        zero_step = self.error("range() step must not be zero", s)
        if any(self.is_varying(x) for x in (s.start, s.stop, s.step)):
            names = carried(self.kernel, s)
            return self.varying_for(start, stop, step, body, name, zero_step, names)
        has_exits = id(s) in self.facts.exits
        gemm = self.gemm_loop(s)

        def run_for(st):
            first, last, by = int(start(st)[0]), int(stop(st)[0]), int(step(st)[0])
            if by == 0:
                raise zero_step
            if gemm is not None and gemm(st, first, last, by):
                return
            env, mask = st.env, st.mask
            for i in range(first, last, by):
                if mask is None:
                    env[name] = np.array([i], np.int32)
                else:  # (the programs outside the branch keep their value)
                    env[name] = np.where(mask, np.int32(i), env[name]).astype(np.int32)
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

    def varying_for(self, start, stop, step, body, name, zero_step, names):
        """A ``for`` whose bounds differ between programs: the interpreter's lock step
        (each program's own counter, a turn while any is inside), each turn run over the
        run of lanes still inside (``prepared_lanes.Turns``)."""

        def run_varying_for(st):
            n = st.n
            first, last, by = start(st), stop(st), step(st)
            if (by == 0).any():
                raise zero_step
            i = np.broadcast_to(first, (n,)).astype(np.int32)
            up = by > 0
            outer = st.mask
            turns = Turns(st, names)
            while True:
                inside = np.where(up, i < last, i > last)
                lanes = np.broadcast_to(inside, (n,)) if outer is None else inside & outer
                if not lanes.any():
                    break
                try:
                    turns.run(lanes, body, name, i)
                except _Continue:
                    pass
                except _Break:
                    break
                i = (i + by).astype(np.int32)

        return run_varying_for

    def s_While(self, s):
        cond = self.expr(s.cond)
        body = self.loop_body(s.body)
        if self.is_varying(s.cond):
            return self.varying_while(cond, body, carried(self.kernel, s))

        def run_while(st):
            while cond(st)[0]:
                try:
                    body(st)
                except _Continue:
                    continue
                except _Break:
                    break

        return run_while

    def varying_while(self, cond, body, names):
        """A ``while`` whose condition differs between programs, in the interpreter's
        lock step: the condition over every program around the loop, then a turn of
        those for which it holds (``prepared_lanes.Turns``)."""

        def run_varying_while(st):
            n = st.n
            outer = st.mask
            turns = Turns(st, names)
            while True:
                holds = np.broadcast_to(cond(st), (n,))
                lanes = holds if outer is None else holds & outer
                if not lanes.any():
                    break
                try:
                    turns.run(lanes, body)
                except _Continue:
                    pass
                except _Break:
                    break

        return run_varying_while

    def exits_the_loop(self):
        """Whether an exit built now leaves its loop for every program running it: no
        per-program branch opened inside the loop's body lies around it."""
        return bool(self.exit_depths) and self.exit_depths[-1] == self.masked

    def s_Break(self, s):
        if not self.exits_the_loop():
            raise _Unsupported("break in a per-program branch")

        def run_break(st):
            raise _Break

        return run_break

    def s_Continue(self, s):
        if not self.exits_the_loop():
            raise _Unsupported("continue in a per-program branch")

        def run_continue(st):
            raise _Continue

        return run_continue
