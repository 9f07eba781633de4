"""The prepared path's loops: ``for`` and ``while`` as plain Python where every program
runs the same turns, and in the interpreter's lock step (``prepared_lanes``) where the
trip count differs between programs or a ``break``/``continue`` is per program."""

from __future__ import annotations

import numpy as np

from qnb.backends.cpu.prepared_base import _Break, _Continue, exits_per_program
from qnb.backends.cpu.prepared_lanes import LaneExits, Turns, carried


class LoopClosures:
    """Loop closures: uniform loops (the K-loop GEMM among them), lock-step loops, exits."""

    def loop_body(self, body, lane_exits=False):
        """The closure of a loop's body; an exit in it is the loop's own only outside
        any per-program branch the body opens (see s_Break); ``lane_exits``
        (``prepared_base.exits_per_program``): its blocks stop where no program is
        left, and its ``if``s drop the programs that left (as the interpreter's)."""
        self.loops += 1
        self.exit_depths.append(self.masked)
        self.lane_exit_depth += lane_exits
        try:
            return self.block(body)
        finally:
            self.loops -= 1
            self.exit_depths.pop()
            self.lane_exit_depth -= lane_exits

    def s_For(self, s):
        start, stop, step = (self.expr(x) for x in (s.start, s.stop, s.step))
        exits = exits_per_program(s.body, self.is_varying)
        body = self.loop_body(s.body, exits)
        name = s.var
        zero_step = self.error("range() step must not be zero", s)
        if exits or any(self.is_varying(x) for x in (s.start, s.stop, s.step)):
            names = carried(self.kernel, s)
            return self.lockstep_for(start, stop, step, body, name, zero_step, names, exits)
        has_exits = id(s) in self.facts.exits
        gemm = self.gemm_loop(s)
        batched = None if gemm is not None else self.batched_loop(s)

        def run_for(st):
            first, last, by = int(start(st)[0]), int(stop(st)[0]), int(step(st)[0])
            if by == 0:
                raise zero_step
            if gemm is not None and gemm(st, first, last, by):
                return
            if batched is not None and batched(st, first, last, by):
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

    def lockstep_for(self, start, stop, step, body, name, zero_step, names, exits):
        """A ``for`` whose bounds differ between programs, or with per-program exits
        (``exits``): the interpreter's lock step (each program's own counter, a turn
        while any is inside and has not left), each turn run over the run of lanes
        still inside (``prepared_lanes.Turns``)."""

        def run_lockstep_for(st):
            n = st.n
            first, last, by = start(st), stop(st), step(st)
            if (by == 0).any():
                raise zero_step
            i = np.broadcast_to(first, (n,)).astype(np.int32)
            up = by > 0
            outer = st.mask
            turns = Turns(st, names)
            left = entered(st) if exits else None
            try:
                while True:
                    inside = np.where(up, i < last, i > last)
                    lanes = np.broadcast_to(inside, (n,)) if outer is None else inside & outer
                    if left is not None:
                        lanes = lanes & ~left.broken
                        left.continued[:] = False
                    if not lanes.any():
                        break
                    try:
                        turns.run(lanes, body, name, i, left)
                    except _Continue:
                        pass
                    except _Break:
                        break
                    i = (i + by).astype(np.int32)
            finally:
                if left is not None:
                    st.exits.pop()

        return run_lockstep_for

    def s_While(self, s):
        cond = self.expr(s.cond)
        exits = exits_per_program(s.body, self.is_varying)
        body = self.loop_body(s.body, exits)
        if exits or self.is_varying(s.cond):
            return self.lockstep_while(cond, body, carried(self.kernel, s), exits)

        def run_while(st):
            while cond(st)[0]:
                try:
                    body(st)
                except _Continue:
                    continue
                except _Break:
                    break

        return run_while

    def lockstep_while(self, cond, body, names, exits):
        """A ``while`` whose condition differs between programs, or with per-program
        exits, in the interpreter's lock step: the condition over every program around
        the loop that has not left it, then a turn of those for which it holds
        (``prepared_lanes.Turns``)."""

        def run_lockstep_while(st):
            n = st.n
            outer = st.mask
            turns = Turns(st, names)
            left = entered(st) if exits else None
            try:
                while True:
                    if left is not None:
                        st.mask = (np.ones(n, bool) if outer is None else outer) & ~left.broken
                    try:
                        holds = np.broadcast_to(cond(st), (n,))
                    finally:
                        around, st.mask = st.mask, outer
                    lanes = holds if around is None else holds & around
                    if not lanes.any():
                        break
                    if left is not None:
                        left.continued[:] = False
                    try:
                        turns.run(lanes, body, exits=left)
                    except _Continue:
                        pass
                    except _Break:
                        break
            finally:
                if left is not None:
                    st.exits.pop()

        return run_lockstep_while

    def exits_the_loop(self):
        """Whether an exit built now leaves its loop for every program running it: no
        per-program branch opened inside the loop's body lies around it."""
        return bool(self.exit_depths) and self.exit_depths[-1] == self.masked

    def s_Break(self, s):
        return self.exit(_Break, "broken")

    def s_Continue(self, s):
        return self.exit(_Continue, "continued")

    def exit(self, signal, which: str):
        """A ``break`` or ``continue``: where every program running it leaves, the
        ``signal`` exception its loop catches; else the per-program form
        (:func:`lane_exit`, marking ``which`` of the loop's :class:`LaneExits`)."""
        if not self.exits_the_loop():
            return lane_exit(which)

        def leave_all(st):
            raise signal

        return leave_all


def entered(st) -> LaneExits:
    """A loop with per-program exits begins: its :class:`LaneExits` on top of the chunk's."""
    exits = LaneExits(st.n)
    if st.exits is None:
        st.exits = [exits]
    else:
        st.exits.append(exits)
    return exits


def lane_exit(which: str):
    """A ``break`` (``which`` "broken") or ``continue`` ("continued") under a per-program
    branch, as the interpreter's: the programs running it leave the innermost loop (for
    good, or for this turn), and nothing more runs for them in the body."""

    def leave(st):
        lanes = getattr(st.exits[-1], which)
        lanes |= np.ones(st.n, bool) if st.mask is None else st.mask
        st.mask = np.zeros(st.n, bool)

    return leave
