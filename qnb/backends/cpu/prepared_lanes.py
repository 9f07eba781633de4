"""Loops whose trip count differs between programs, on the prepared path.

The interpreter runs such a loop in lock step: at each turn, the programs still inside it
run the body under a mask, the others wait (``interpreter_statements.s_For``). The
prepared path keeps that meaning, turn by turn, but runs a turn's body only over the run
of lanes that holds its active programs (:meth:`Turns.run`): the lanes from the first
active program to the last become a chunk of their own (:func:`narrowed`, a ``_State``
with those programs' ids and variables), masked only where programs inside that run sit
the turn out. A causal loop (``range(block + 1)``) then computes the triangle's block
steps, not the square's: at turn ``k`` only the programs past ``k`` run. What a turn
assigned goes back into the whole chunk's variables (:meth:`Turns.merge`) before the next,
for the variables a later turn or the code after the loop may read (:func:`carried`): a
turn's temporaries (the scores and weights of an attention step) stay in the turn.

Strategies that need the whole grid (block grids, the K-loop GEMM, whole-grid strided
windows) see ``whole = False`` on a narrowed chunk and take their chunk forms, which a
launch in chunks already uses.
"""

from __future__ import annotations

import numpy as np

from qnb import ir
from qnb.backends.cpu.prepared_base import _Blocks, _State, _tiles


def _reads(nodes) -> set[str]:
    return {n.name for n in ir.walk_body(nodes) if type(n) is ir.Var}


def carried(kernel: ir.KernelIR, loop: ir.For | ir.While) -> frozenset[str]:
    """The variables whose value after a turn of ``loop`` someone may read: a read
    anywhere outside the loop's body (after it, before it in an enclosing loop, in its
    own bounds or condition), or a read in the body that no assignment earlier in the
    body's own statements (those every turn runs up to there) comes before."""
    inside = {id(n) for n in ir.walk_body(loop.body)}
    outside = {
        n.name for n in ir.walk_body(kernel.body) if type(n) is ir.Var and id(n) not in inside
    }
    defined = {loop.var} if isinstance(loop, ir.For) else set()
    exposed = set()
    for stmt in loop.body:
        exposed |= _reads([stmt]) - defined
        if isinstance(stmt, ir.Assign):
            defined.add(stmt.name)
    return frozenset(outside | exposed)


def narrowed(st: _State, lo: int, hi: int) -> _State:
    """Lanes ``lo .. hi - 1`` of ``st`` as a chunk of their own: the same arrays, those
    programs' ids, their variables (a value the same in every program as it is)."""
    sub = object.__new__(_State)
    sub.arrays, sub.shapes, sub.grid = st.arrays, st.shapes, st.grid
    sub.n, sub.first = hi - lo, st.first + lo
    sub.whole, sub.run0, sub.mask, sub.exits = False, st.run0, None, None
    sub.pid = [p[lo:hi] for p in st.pid]
    env = {}
    for name, value in st.env.items():
        value = _tiles(st, value)
        env[name] = value if value.shape[0] == 1 else value[lo:hi]
    sub.env = env
    sub.aliased = set()  # (Turns.run detached the chunk's views first)
    return sub


class LaneExits:
    """The programs that left a loop by a ``break`` or ``continue`` under a per-program
    branch, as the interpreter's ``_Loop`` holds them: ``broken`` for the loop,
    ``continued`` for this turn. A chunk keeps a stack of them (``_State.exits``), the
    innermost loop's last; a narrowed turn holds views of its loop's (:meth:`narrowed`),
    so what it marks is marked for the whole chunk."""

    __slots__ = ("broken", "continued")

    def __init__(self, n: int):
        self.broken = np.zeros(n, bool)
        self.continued = np.zeros(n, bool)

    def narrowed(self, lo: int, hi: int) -> LaneExits:
        exits = object.__new__(LaneExits)
        exits.broken, exits.continued = self.broken[lo:hi], self.continued[lo:hi]
        return exits


def restore(st: _State, saved) -> None:
    """The mask after a nested block (the interpreter's ``restore``): ``saved`` less the
    programs that left the innermost loop."""
    exits = st.exits
    if exits:
        top = exits[-1]
        gone = top.broken | top.continued
        if gone.any():
            st.mask = (np.ones(st.n, bool) if saved is None else saved) & ~gone
            return
    st.mask = saved


class Turns:
    """The turns of one run of a loop that differs between programs, over the chunk
    ``st``; ``names``, the variables to keep (:func:`carried`).

    A kept variable a turn changes becomes a per-program array this run owns (``owned``),
    which later turns write in place, lanes ``lo .. hi - 1`` at a time; a turn over every
    lane runs on ``st`` itself, where the body may alias those arrays under other names,
    so after one the run owns none."""

    __slots__ = ("st", "names", "owned")

    def __init__(self, st: _State, names):
        self.st, self.names, self.owned = st, names, {}

    def run(self, lanes: np.ndarray, body, var=None, value=None, exits=None) -> None:
        """One turn: ``body`` over the active ``lanes`` (a bool per lane), with the loop
        variable ``var`` set to each active program's ``value`` (an int32 per lane)
        first, as the interpreter's masked assignment sets it; ``exits``, the loop's
        :class:`LaneExits` where it has per-program exits (on top of ``st.exits``).
        Exits (``_Break``, ``_Continue``) pass through, after the merge."""
        st = self.st
        n = st.n
        lo = int(np.argmax(lanes))
        hi = n - int(np.argmax(lanes[::-1]))
        if lo == 0 and hi == n:
            self.owned.clear()
            saved = st.mask
            st.mask = None if saved is None and lanes.all() else lanes
            try:
                if var is not None:
                    _assign(st, var, value)
                body(st)
            finally:
                st.mask = saved
            return
        if st.aliased:
            detach_all(st)
        sub = narrowed(st, lo, hi)
        if exits is not None:
            sub.exits = [exits.narrowed(lo, hi)]
        inner = lanes[lo:hi]
        if not inner.all():
            sub.mask = inner
        before = dict(sub.env)
        try:
            if var is not None:
                _assign(sub, var, value[lo:hi])
            body(sub)
        finally:
            self.merge(sub, before, lo, hi)

    def merge(self, sub: _State, before: dict, lo: int, hi: int) -> None:
        """Put what ``sub`` (lanes ``lo .. hi - 1``) assigned to the kept variables back
        into the chunk's, the other lanes' values kept."""
        st, owned = self.st, self.owned
        env = st.env
        changed = []
        for name in self.names:
            value = sub.env.get(name)
            if value is None or value is before.get(name):
                continue
            value = _tiles(sub, value)
            if value.base is not None:  # (it may be a view of an array written below)
                value = np.array(value)
            changed.append((name, value))
        for name, value in changed:
            old = env.get(name)
            if old is not None and owned.get(name) is old:
                old[lo:hi] = value
                continue
            full = np.empty((st.n, *value.shape[1:]), value.dtype)
            if old is None:
                full[...] = 0
            else:
                full[...] = _tiles(st, old)
            full[lo:hi] = value
            env[name] = owned[name] = full
            st.aliased.discard(name)


def detach_all(st: _State) -> None:
    """Copy every variable that is a view of an argument: a narrowed turn stores through
    the arrays while the lanes outside it keep their values."""
    for name in list(st.aliased):
        value = st.env[name]
        st.env[name] = (
            _Blocks(np.array(value.a4), value.ra) if isinstance(value, _Blocks) else np.array(value)
        )
        st.aliased.discard(name)


def _assign(st: _State, var: str, value: np.ndarray) -> None:
    if value[0] == value[-1] and (value == value[0]).all():
        value = value[:1]  # (the same in every active program: one element)
    if st.mask is None:
        st.env[var] = np.array(value, np.int32)
    else:
        st.env[var] = np.where(st.mask, value, st.env[var]).astype(np.int32)
    st.aliased.discard(var)
