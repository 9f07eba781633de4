"""The prepared path's batched loops: a ``for`` whose turns do not depend on each other
runs all its turns at once, as a grid axis of their own.

A loop over column tiles (``for col in range(0, n, 128)``) is, turn after turn, the
same few statements on the next tile. Where a statement reads nothing an earlier turn
assigned, its turns could run in any order, so they run together: the loop's turns
become a second grid axis (turn ``k`` is ``program_id(1) == k``, the loop's variable
``start + program_id(1) * step``), and the block-grid strategies take the tiles of
every turn as one view of the array. What does depend on an earlier turn (a running
sum, a running max) runs after, turn by turn as before, over the batched values of
its own turn; an independent part of such a statement (``tile.sum(axis=1)`` in
``total = total + tile.sum(axis=1)``) is computed with the batch.

The batched statements are compiled as a kernel of their own (the loop's statements
over the grid ``(programs, turns)``) by the same compiler, so they compute what the
interpreter computes for that grid: over each turn's lanes, the loop's own statement
on that turn. Programs run in launch order, ``program_id(0)`` fastest, so lanes go
turn after turn, as the loop went: where turns store to one element, the later turn's
value stays. What a loop may batch (see :meth:`BatchedLoops.plan_batch`): its
statements are assignments and stores; it stores only arrays it does not load, each
from one statement, and only what the batch computes; and no check that may raise
comes after a store (:func:`_raises_before_stores`). A batch that raises has then
stored nothing, and the loop runs again turn by turn, which raises where the
interpreter does and leaves the arrays as it leaves them. A batch whose values would
hold more than a chunk's (``lanes.CHUNK_ELEMENTS``) and more than the largest array it
loads (the temporaries NumPy would make over that array), or whose stored array shares
memory with another it reads or stores, is not made either: the loop runs turn by turn. A tile the batch assigns once and nothing reads after it is
computed into a buffer the batch keeps from launch to launch
(:meth:`BatchedLoops.assign_into_spare`)."""

from __future__ import annotations

from collections import Counter

import numpy as np

from qnb import ir
from qnb.backends.cpu import lanes, prepared_scalars
from qnb.backends.cpu.prepared_base import (
    _Blocks,
    _program_ids,
    _State,
    _Unsupported,
    spare_buffer,
)
from qnb.backends.cpu.prepared_lanes import carried

_STATEMENTS = (ir.Assign, ir.StoreWindow, ir.VecStore, ir.ArrayStore)
_STORES = (ir.StoreWindow, ir.VecStore, ir.ArrayStore)
_LOADS = (ir.LoadWindow, ir.VecLoad, ir.ArrayLoad)
_CHECKED = (
    ir.ArrayLoad, ir.ArrayStore, ir.TileGet, ir.TileSet, ir.RowCol, ir.VecLoad, ir.VecStore,
)  # fmt: skip
_FRESH = (ir.Binary, ir.Unary, ir.Reduce, ir.IndexReduce, ir.Scan, ir.Matmul)
_NOT_HOISTED = (ir.Const, ir.Var, ir.ProgramId, ir.ArrayDim, ir.TileFill, ir.Logical)


def _may_raise(stmt) -> bool:
    """Whether ``stmt`` may raise an index error: an element, tile, row or column
    index, a slab index, a window's bounds that may be negative."""
    for node in ir.walk(stmt):
        kind = type(node)
        if kind in _CHECKED or (kind is ir.ArrayView and node.batch is not None):
            return True
        if (kind is ir.LoadWindow or kind is ir.StoreWindow) and not node.padded:
            return True
    return False


def _raises_before_stores(plan) -> bool:
    """Whether no statement that may raise comes after a store of the batch: in the
    batch's own order, and in the turns, which run after it. A batch that raises then
    stored nothing (a store checks its lanes before it writes), and the loop runs turn
    by turn from the start, leaving the arrays as the interpreter leaves them."""
    stored = False
    for stmt in plan.batched:
        if stored and _may_raise(stmt):
            return False
        stored = stored or type(stmt) in _STORES
    return not stored or not any(_may_raise(stmt) for stmt in plan.turns)


def _read_as_views(body) -> set[str]:
    """The variables ``body`` reads other than as an operand of an op that makes a new
    array (elementwise ops, reductions, scans, products) or as a stored value: an
    assignment of the variable itself, a transpose, a reshape may hold a view of it."""
    found = set()
    for parent in ir.walk_body(body):
        kind = type(parent)
        for child in ir.children(parent):
            if type(child) is ir.Var and not (
                kind in _FRESH or (kind in _STORES and child is parent.value)
            ):
                found.add(child.name)
    return found


def _reads(node) -> set[str]:
    return {n.name for n in ir.walk(node) if type(n) is ir.Var}


class _Plan:
    """A loop split in two: ``batched`` (statements every turn runs at once, the
    hoisted parts of the others among them, as ``Assign``s to new locals) and
    ``turns`` (the statements that read what an earlier turn assigned, in order)."""

    def __init__(self):
        self.batched: list[ir.Stmt] = []
        self.turns: list[ir.Stmt] = []
        self.hoisted: dict[str, ir.Type] = {}  # new local -> its type
        self.counts: Counter = Counter()  # local -> the batch's assignments of it


class BatchedLoops:
    """The batched-loop strategy of uniform ``for`` loops (see the module docstring)."""

    def batched_loop(self, s):
        """``run(st, first, last, by) -> bool`` for the uniform loop ``s`` (True: it ran
        the loop), or None where its turns depend on each other in a way that leaves
        nothing to batch, or it holds what a batch may not (see :meth:`plan_batch`)."""
        if self.masked or self.lane_exit_depth:
            return None
        if not all(isinstance(x, ir.Const) and type(x.value) is int for x in (s.start, s.step)):
            return None
        plan = self.plan_batch(s)
        if plan is None:
            return None
        try:
            batch = self.batch_closure(s, plan)
        except _Unsupported:  # (a node the batch's grid has no closure for: turn by turn)
            return None
        turns = self.block(plan.turns) if plan.turns else None
        return self.batch_runner(s, plan, batch, turns)

    # ------------------------------------------------------------------ the plan

    def plan_batch(self, s) -> _Plan | None:
        """The statements of ``s`` split into the batch and the turns, or None where a
        batch may not run them: a statement other than an assignment or a store, a
        grid axis other than 0 read (the batch takes axis 1), the loop's variable
        assigned, an array both stored and loaded, a store of what a turn computes, a
        local assigned both in the batch and in the turns, or nothing worth batching."""
        body = s.body
        if not body or not all(type(x) in _STATEMENTS for x in body):
            return None
        stored, loaded = set(), set()
        for node in ir.walk_body(body):
            kind = type(node)
            if kind is ir.ProgramId and node.axis != 0:
                return None
            if kind is ir.Assign and node.name == s.var:
                return None
            if kind in _STORES:
                if node.view.param in stored:  # (turn by turn, turn k's second store
                    return None  # comes before turn k + 1's first)
                stored.add(node.view.param)
            elif kind in _LOADS:
                loaded.add(node.view.param)
        if stored & loaded:
            return None
        assigned = {x.name for x in body if type(x) is ir.Assign}
        defined = {s.var}
        dependent = set()  # read before this turn assigns them, or computed from such
        for stmt in body:
            reads = _reads(stmt)
            dependent |= (reads & assigned) - defined
            if type(stmt) is ir.Assign:
                if reads & dependent:
                    dependent.add(stmt.name)
                defined.add(stmt.name)
        plan = _Plan()
        self.made.append(plan)  # (its new nodes: ids the walk's tables are keyed by)
        batch_names, turn_names = set(), set()
        for stmt in body:
            if not (_reads(stmt) & dependent) and not (
                type(stmt) is ir.Assign and stmt.name in dependent
            ):
                plan.batched.append(stmt)
                if type(stmt) is ir.Assign:
                    batch_names.add(stmt.name)
                continue
            if type(stmt) is not ir.Assign:
                return None  # (a store of what a turn computes)
            turn_names.add(stmt.name)
            dependent.add(stmt.name)  # (what reads it later in the body is a turn's too)
            plan.turns.append(self.hoist(stmt, dependent, plan))
        if batch_names & turn_names:
            return None
        plan.counts = Counter(x.name for x in plan.batched if type(x) is ir.Assign)
        twice = {name for name, count in plan.counts.items() if count > 1}
        if twice & set().union(*(_reads(x) for x in plan.turns)):
            return None  # (a turn reads the value from between two of the batch's)
        if not _raises_before_stores(plan):
            return None
        if not any(self.worth_batching(x) for x in plan.batched):
            return None
        return plan

    def worth_batching(self, stmt) -> bool:
        """Whether ``stmt`` works on tiles or vecs (a loop of scalars gains nothing)."""
        return any(
            isinstance(node, ir.Expr)
            and node.type.kind in ("tile", "vec")
            and not isinstance(node, _NOT_HOISTED)
            for node in ir.walk(stmt)
        )

    def hoist(self, stmt, dependent, plan):
        """``stmt`` (a turn's) with each largest part that reads nothing ``dependent``
        and works on tiles replaced by a new local the batch assigns."""
        bits = 0
        for name in dependent:
            bits |= self.facts.bits.get(name, 0)
        reads = self.facts.reads

        done: dict[int, object] = {}  # (the IR may share a node: one replacement each)

        def replaced(node):
            found = done.get(id(node))
            if found is None:
                found = done[id(node)] = replacing(node)
            return found

        def replacing(node):
            if not isinstance(node, ir.Expr) or isinstance(node, ir.Logical):
                return node
            if (
                not reads[id(node)] & bits
                and node.type.kind in ("tile", "vec")
                and not isinstance(node, _NOT_HOISTED)
                and not self.constant(node)
            ):
                name = f"__batched_{id(stmt)}_{len(plan.hoisted)}"  # (one per node)
                plan.hoisted[name] = node.type
                plan.batched.append(ir.Assign(node.loc, name, node))
                if self.is_varying(node):
                    per_program.append(name)
                return ir.Var(node.type, node.loc, name)
            if all([replaced(kid) is kid for kid in ir.children(node)]):
                return node
            return ir.with_children(node, replaced)  # (each child's, made once above)

        per_program = []
        value = replaced(stmt.value)
        if value is stmt.value:  # (nothing hoisted: the statement as it is)
            return stmt
        self.facts.expression(value)
        for name in per_program:  # (per program where the parts they stand for are)
            self.varying.add(name)
            self.varying_mask |= self.facts.bits[name]
        return ir.Assign(stmt.loc, stmt.name, value)

    # ------------------------------------------------------------------ the batch

    def batch_closure(self, s, plan):
        """The batched statements compiled as a kernel of their own over the grid
        ``(programs, turns)``: the loop's variable assigned from ``program_id(1)`` first
        (a top-level ``program_id(1) * step`` is what the block grids look for), the
        variables from around the loop read as they are, per program where they are."""
        i32 = s.start.type
        turn = ir.ProgramId(i32, s.loc, "id", 1)
        index = turn
        if s.step.value != 1:
            index = ir.Binary(i32, s.loc, "mul", turn, s.step)
        if s.start.value != 0:
            index = ir.Binary(i32, s.loc, "add", s.start, index)
        kernel = self.kernel
        local_types = dict(kernel.locals)
        local_types.update(plan.hoisted)
        body = [ir.Assign(s.loc, s.var, index), *plan.batched]
        sub_kernel = ir.KernelIR(kernel.name, kernel.params, body, local_types, kernel.units)
        assigned = {x.name for x in body if type(x) is ir.Assign}
        sub = type(self)(sub_kernel, varying=self.varying - assigned)
        sub.spare_names = self.dead_after_batch(s, plan)
        sub.last_reads = _last_reads(plan.batched, sub.spare_names)
        sub.pid_vars.update(  # (axis 1 is the turn's there: another axis's is just a value)
            (k, v) for k, v in self.pid_vars.items() if k not in assigned and v[0] == 0
        )
        sub.const_vars.update((k, v) for k, v in self.const_vars.items() if k not in assigned)
        with np.errstate(all="ignore"):
            closure = sub.block(body, top=True)
        imported = sorted(set().union(*(_reads(x) for x in plan.batched)) - assigned)
        return closure, imported, sub.spare_pools, sub.spare_names

    def dead_after_batch(self, s, plan) -> frozenset[str]:
        """The tiles the batch assigns once that nothing reads after it: not the turns,
        nothing outside the loop. Such a tile may be computed into a buffer the batch
        keeps from launch to launch (:meth:`assign_into_spare`)."""
        live = carried(self.kernel, s) | set().union(*(_reads(x) for x in plan.turns))
        live |= _read_as_views(plan.batched)
        return frozenset(
            x.name
            for x in plan.batched
            if type(x) is ir.Assign
            and plan.counts[x.name] == 1
            and x.name not in live
            and x.value.type.kind == "tile"
        )

    def overwritable(self, e) -> tuple[str, ...]:
        """For a row reduction ``e`` of an elementwise chain: the batch variables that
        hold, where the launch computed it so, the buffer of a tile the chain may
        compute over (``assign_into_spare``'s). Each is a tile nothing reads after the
        batch, whose last read in the batch is here, every one of that statement's reads
        of it a direct operand of the op that writes the chain's ``out`` first
        (``(centred * centred).sum(axis=1)``): that op reads each element before it
        writes it, and no later op reads the tile."""
        first = e.operand
        while True:  # (down the spine ``out`` is passed along, to the op computed first)
            if type(first) is ir.Binary and self.chains.get(id(first.left), False):
                first = first.left
            elif type(first) is ir.Unary and self.chains.get(id(first.operand), False):
                first = first.operand
            else:
                break
        if type(first) not in (ir.Binary, ir.Unary) or not self.chains.get(id(first), False):
            return ()
        operands = (first.left, first.right) if type(first) is ir.Binary else (first.operand,)
        found = []
        for name, (nodes, count) in self.last_reads.items():
            here = sum(type(x) is ir.Var and x.name == name for x in operands)
            if here and here == count and id(e) in nodes:
                found.append(f"\0spare {name}")
        return tuple(found)

    def assign_into_spare(self, s, value, assign):
        """The assignment of a tile nothing reads after the batch (see
        :meth:`dead_after_batch`) whose value is an elementwise chain over the block
        grid: the chain computes into a buffer the batch keeps (a new array of many MiB
        is fresh pages from the system at every launch), taken for the launch and given
        back when the batch ends (one on another thread meanwhile makes its own);
        anything else as ``assign``."""
        name = s.name
        m, n = s.value.type.shape
        dtype = s.value.type.dtype.numpy
        pool: list[np.ndarray] = []
        held = f"\0spare {name}"  # (the launch's buffer, in the batch's variables)
        self.spare_pools.append((held, pool))

        def assign_spare(st):
            grid = st.grid
            if (
                st.mask is not None
                or grid[2] != 1
                or grid[0] * grid[1] * m * n < prepared_scalars.IN_PLACE_MIN
            ):
                assign(st)
                return
            buffer = spare_buffer(pool, (grid[0], m, grid[1], n), dtype)
            v = value(st, _Blocks(buffer, 0))
            if type(v) is _Blocks and v.a4 is buffer:
                st.env[held] = buffer
            else:
                pool.append(buffer)
                if v.dtype != dtype:
                    v = _Blocks(v.a4.astype(dtype), v.ra) if type(v) is _Blocks else v.astype(dtype)
            st.env[name] = v
            st.aliased.discard(name)

        return assign_spare

    def batch_runner(self, s, plan, batch, turns):
        closure, imported, spare_pools, dead = batch
        var = s.var
        names = list(dict.fromkeys(x.name for x in plan.batched if type(x) is ir.Assign))
        names = [name for name in names if name not in dead]
        uniform = {name for name in names if name not in self.varying}
        stored = sorted({n.view.param for n in ir.walk_body(plan.batched) if type(n) in _STORES})
        loaded = sorted({n.view.param for n in ir.walk_body(s.body) if type(n) in _LOADS})
        largest = self.facts.largest  # (elements of the kernel's largest value)
        pids = {}
        compiler = self

        def run_batched(st, first, last, by):
            count = len(range(first, last, by))
            grid = st.grid
            n = st.n
            if (
                count < 2
                or st.mask is not None
                or st.exits is not None
                or not st.whole
                or grid[1] != 1
                or grid[2] != 1
            ):
                return False
            arrays = st.arrays
            if n * count * largest > max(
                [lanes.CHUNK_ELEMENTS, *(arrays[k].size for k in loaded)]
            ):  # (a value of the batch no larger than a chunk's, or than what it loads)
                return False
            for index, name in enumerate(stored):  # (two parameters, one array: turn by turn)
                others = loaded + stored[index + 1 :]
                if any(np.may_share_memory(arrays[name], arrays[other]) for other in others):
                    return False
            if st.aliased:
                for name in stored:
                    compiler.detach(st, arrays[name])
            key = (n, count)
            pid = pids.get(key)
            if pid is None:
                if len(pids) > 8:
                    pids.clear()
                pid = pids[key] = _program_ids((n, count, 1), 0, n * count)
            sub = object.__new__(_State)
            sub.arrays, sub.shapes = arrays, st.shapes
            sub.grid, sub.n, sub.first = (n, count, 1), n * count, 0
            sub.whole, sub.run0, sub.mask, sub.exits = True, False, None, None
            sub.pid = pid
            env = st.env
            sub.env = {name: _repeated(env[name], count) for name in imported}
            sub.aliased = set()
            try:
                closure(sub)
            except Exception:  # noqa: BLE001 - an error, or memory: turn by turn
                return False
            finally:
                for held, pool in spare_pools:
                    buffer = sub.env.pop(held, None)
                    if buffer is not None:
                        pool.append(buffer)
            done = sub.env
            if turns is not None:
                for k in range(count):
                    env[var] = np.array([first + k * by], np.int32)
                    for name in names:
                        env[name] = _turn(done[name], k, n, name in uniform)
                    turns(st)
            env[var] = np.array([first + (count - 1) * by], np.int32)
            for name in names:
                value = env[name] = _turn(done[name], count - 1, n, name in uniform)
                held = value.a4 if type(value) is _Blocks else value
                if held.base is not None and any(
                    np.may_share_memory(held, a) for a in arrays.values()
                ):
                    st.aliased.add(name)
                else:
                    st.aliased.discard(name)
            st.aliased.discard(var)
            return True

        return run_batched


def _last_reads(batched: list, names) -> dict[str, tuple[frozenset, int]]:
    """For each of ``names``: the ids of the nodes of the last batched statement that
    reads it, less any node an earlier statement holds too (the IR may share a node,
    and a node's closure is made once), and how many reads of it that statement makes."""
    found, earlier = {}, set()
    for stmt in batched:
        nodes = list(ir.walk(stmt))
        ids = {id(n) for n in nodes}
        for name in names:
            count = sum(type(n) is ir.Var and n.name == name for n in nodes)
            if count:
                found[name] = (frozenset(ids - earlier), count)
        earlier |= ids
    return found


def _repeated(value, count):
    """A variable from around the loop on the batch's lanes: per program (``n`` lanes)
    repeated for each turn; the same in every program as it is. A tile per program is
    held as blocks whose turn axis is 1 long (a view: the batch's ops broadcast it, as a
    loop-invariant operand, where a copy per turn would be read at a turn's stride)."""
    if type(value) is _Blocks:  # (its turn axis is 1 long: the same tiles every turn)
        return value
    if value.shape[0] == 1:
        return value
    if value.ndim == 3:
        return _Blocks(value[:, :, None, :], 0)
    return np.concatenate([value] * count)


def _turn(value, k, n, uniform):
    """Turn ``k``'s value of a batched variable, on the loop's own ``n`` lanes (the same
    in every program as one lane, where the loop's analysis holds it so)."""
    if type(value) is _Blocks:
        a4 = value.a4
        if value.ra == 0:
            a4 = a4[:, :, k : k + 1] if a4.shape[2] > 1 else a4
        else:
            a4 = a4[k : k + 1] if a4.shape[0] > 1 else a4
        value = _Blocks(a4, value.ra)
        return value.tiles((n, 1, 1))[:1] if uniform else value
    if value.shape[0] == 1:
        return value
    lanes = value[k * n : (k + 1) * n]
    return lanes[:1] if uniform else lanes
