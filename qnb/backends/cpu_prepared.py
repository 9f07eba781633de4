"""The cpu backend's prepared path: the IR turned into closures once, when an artifact loads.

The interpreter (:class:`qnb.backends.cpu._Executor`) walks the IR at every launch; this
module walks it once, in :func:`prepare`, and returns a launcher made of closures, one per
IR node, that compute exactly what the interpreter computes with the same op tables
(``_BINARY``, ``_UNARY``, ``_REDUCE``, ...). Values keep the interpreter's layout (a leading
program axis of length P, or 1 for a value that is the same in every program), and
what the walk learns once is not relearnt per launch:

- *uniformity*: which values are the same in every program (no ``program_id`` reaches
  them). Their control flow is plain Python, and their windows and indices are Python ints,
  so a launch of a trivial kernel is a few NumPy calls. Constant subexpressions are folded.
- *block grids*: a tile loaded at ``(program_id(a) * 16, program_id(b) * 16)`` is, over all
  programs together, the array itself seen as a grid of 16×16 blocks (:class:`_Blocks`).
  Elementwise ops on such tiles are one array expression on the array, a store to the
  same grid is one assignment, and ``a @ b`` of a block row strip by a block column strip
  (the K loop of a tiled matmul) is one GEMM. Any other use gathers the programs' tiles.
- *program-indexed elements*: ``x[program_id(0)]`` over a 1-D grid is a slice of ``x``.

A kernel with control flow that differs between programs inside a loop (a loop bound, a
``while`` condition, ``break``/``continue`` under a per-program branch) or an op this
module does not know is left to the interpreter: :func:`prepare` returns None. Bounds
checks are exact and raise the interpreter's errors (same message, same program). The
trace always runs the interpreter (its recorder watches every step).
"""

from __future__ import annotations

import numpy as np

from qnb import ir
from qnb.backends import cpu
from qnb.errors import QnbIndexError

_FOLDABLE = (ir.Const, ir.Unary, ir.Binary, ir.Cast, ir.TileFill, ir.Select, ir.Transpose)


class _Unsupported(Exception):
    """The kernel needs the interpreter (see the module docstring)."""


class _Break(Exception):
    pass


class _Continue(Exception):
    pass


class _State:
    """One chunk of programs being run: what the closures read besides their own nodes."""

    __slots__ = ("arrays", "shapes", "env", "n", "pid", "grid", "mask", "aliased", "whole", "run0")

    def __init__(self, arrays, scalars, grid, start, count, kernel_locals, pid):
        self.arrays = {name: a for name, (a, _) in arrays.items()}
        self.shapes = {name: s for name, (_, s) in arrays.items()}
        self.n = count
        self.mask = None
        self.grid = grid
        self.whole = start == 0 and count == grid[0] * grid[1] * grid[2]
        self.run0 = count == 1 or grid[1] * grid[2] == 1  # program_id(0) counts up by one
        self.pid = pid
        env = dict(scalars)
        for name, (dtype, shape) in kernel_locals.items():
            if name in scalars:  # a scalar parameter the body reassigns starts as passed
                env[name] = scalars[name].astype(dtype).reshape(1, *shape)
            else:
                env[name] = np.zeros((1, *shape), dtype)
        self.env = env
        self.aliased = set()


def _program_ids(grid, start, count):
    """``program_id(0..2)`` of programs ``start .. start + count - 1`` (read-only)."""
    gx, gy, _ = grid
    if gy * grid[2] == 1:
        pid = [np.arange(start, start + count, dtype=np.int32), np.zeros(count, np.int32)]
        pid.append(pid[1])
    else:
        flat = np.arange(start, start + count, dtype=np.int64)
        pid = [
            (flat % gx).astype(np.int32),
            ((flat // gx) % gy).astype(np.int32),
            (flat // (gx * gy)).astype(np.int32),
        ]
    for p in pid:
        p.flags.writeable = False
    return pid


class _Blocks:
    """Every program's tile at once, as a 4-D array ``(RB, 16, CB, 16)`` whose block
    ``[r, :, c, :]`` is the tile of the program with ``program_id(ra) == r`` and
    ``program_id(ca) == c`` (``ra``, ``ca`` are the grid axes 0 and 1, either way round).
    ``RB`` or ``CB`` may be 1: the tile is then the same along that grid axis."""

    __slots__ = ("a4", "ra")

    def __init__(self, a4, ra):
        self.a4 = a4
        self.ra = ra

    @property
    def dtype(self):
        return self.a4.dtype

    def full(self, grid):
        ca = 1 - self.ra
        return np.broadcast_to(self.a4, (grid[self.ra], 16, grid[ca], 16))

    def tiles(self, grid):
        """The ``(programs, 16, 16)`` value the interpreter holds."""
        a4 = self.full(grid)
        # programs run x fastest: (gy, gx, 16, 16) in C order is launch order
        t = a4.transpose(2, 0, 1, 3) if self.ra == 0 else a4.transpose(0, 2, 1, 3)
        out = np.empty(t.shape, t.dtype)
        cpu._move_blocks(out, t)
        return out.reshape(-1, 16, 16)


def _as_blocks(value, kind, ra, grid):
    """``value`` (tile or scalar, interpreter layout) broadcastable against a
    :class:`_Blocks` ``a4`` with block-row axis ``ra``."""
    if isinstance(value, _Blocks):
        return value.a4 if value.ra == ra else _tiles_as_blocks(value.tiles(grid), ra, grid)
    if kind == "scalar":
        if value.shape[0] == 1:
            return value
        s = value.reshape(grid[1], grid[0])
        return (s.T if ra == 0 else s)[:, None, :, None]
    if value.shape[0] == 1:
        return value[0][None, :, None, :]
    return _tiles_as_blocks(value, ra, grid)


def _tiles_as_blocks(tiles, ra, grid):
    t = tiles.reshape(grid[1], grid[0], 16, 16)
    return t.transpose(1, 2, 0, 3) if ra == 0 else t.transpose(0, 2, 1, 3)


def _tiles(st, value):
    return value.tiles(st.grid) if isinstance(value, _Blocks) else value


def prepare(kernel: ir.KernelIR):
    """A launcher ``launch(grid, args, stored)`` for ``kernel``, or None where the kernel
    needs the interpreter."""
    try:
        _refuse_shapes(kernel)
        return _Compiler(kernel).launcher()
    except _Unsupported:
        return None


def _refuse_shapes(kernel: ir.KernelIR) -> None:
    """Raise :class:`_Unsupported` for what this path does not run yet (the interpreter
    does): a tile or vec whose shape is not 16×16 / 16, and the nodes that came with
    shapes (Broadcast, Reshape, arange, row/column vec loads and stores)."""
    types = list(kernel.locals.values())
    for node in ir.walk_body(kernel.body):
        if isinstance(node, ir.Broadcast | ir.Reshape):
            raise _Unsupported(type(node).__name__)
        if isinstance(node, ir.TileFill) and node.kind == "arange":
            raise _Unsupported("arange")
        if isinstance(node, ir.VecLoad) and (
            node.axis != 0 or (node.padded and node.col is not None)
        ):
            raise _Unsupported("a row or column vec load")
        if isinstance(node, ir.VecStore) and (node.axis != 0 or node.col is not None):
            raise _Unsupported("a row or column vec store")
        typ = getattr(node, "type", None)
        if isinstance(typ, ir.Type):
            types.append(typ)
    for typ in types:
        if typ.shape not in ((), (16, 16), (16,)) and typ.kind in ("tile", "vec"):
            raise _Unsupported(f"a {typ.shape_name}")


# ---------------------------------------------------------------------- the walk


class _Compiler:
    def __init__(self, kernel: ir.KernelIR):
        self.kernel = kernel
        self.varying = _varying_names(kernel)
        # per node (the IR lives as long as this walk, so ids stay unique)
        self.varying_nodes: dict[int, bool] = {}
        self.constant_nodes: dict[int, bool] = {}
        self.assign_count = {}
        for node in ir.walk_body(kernel.body):
            if isinstance(node, ir.Assign):
                self.assign_count[node.name] = self.assign_count.get(node.name, 0) + 1
            elif isinstance(node, ir.For):
                self.assign_count[node.var] = self.assign_count.get(node.var, 0) + 2
        # top-level variables that hold program_id(a) or program_id(a) * 16
        self.pid_vars: dict[str, tuple[int, int]] = {}
        self.computes = False  # whether a launch does arithmetic (which may warn)
        self.masked = 0  # depth of per-program branches around the statement being built
        self.loops = 0

    def launcher(self):
        with np.errstate(all="ignore"):  # constants fold as a launch computes them
            body = self.block(self.kernel.body, top=True)
        kernel = self.kernel
        locals_ = {name: (t.dtype.numpy, t.shape) for name, t in kernel.locals.items()}
        holds_tiles = ir.holds_tiles(kernel)
        quiet = not self.computes
        pids = {}  # (grid, start, count) -> program ids: a launch's ids are made once

        def launch(grid, args, stored):
            arrays, scalars = cpu._bind(kernel, args, stored)
            total = grid[0] * grid[1] * grid[2]
            chunk = cpu.CHUNK if holds_tiles else total
            if total == 1 and quiet:  # a single program with nothing that could warn
                key = (grid, 0, 1)
                pid = pids.get(key) or pids.setdefault(key, _program_ids(grid, 0, 1))
                body(_State(arrays, scalars, grid, 0, 1, locals_, pid))
                return
            with np.errstate(all="ignore"):
                for start in range(0, total, chunk or 1):
                    count = min(chunk, total - start)
                    key = (grid, start, count)
                    pid = pids.get(key)
                    if pid is None:
                        if len(pids) > 16:
                            pids.clear()
                        pid = pids[key] = _program_ids(grid, start, count)
                    body(_State(arrays, scalars, grid, start, count, locals_, pid))

        return launch

    # ------------------------------------------------------------------ analysis

    def is_varying(self, e) -> bool:
        found = self.varying_nodes.get(id(e))
        if found is None:
            if isinstance(e, ir.ProgramId):
                found = e.which == "id"
            elif isinstance(e, ir.Var):
                found = e.name in self.varying
            else:
                found = any(self.is_varying(c) for c in ir.children(e))
            self.varying_nodes[id(e)] = found
        return found

    def pid_block(self, e):
        """The grid axis ``a`` when ``e`` is ``program_id(a) * 16``; else None."""
        if isinstance(e, ir.Var):
            found = self.pid_vars.get(e.name)
            return found[0] if found and found[1] == 16 else None
        if isinstance(e, ir.Binary) and e.op == "mul":
            for p, k in ((e.left, e.right), (e.right, e.left)):
                if isinstance(k, ir.Const) and k.value == 16:
                    axis = self.pid_axis(p)
                    if axis is not None:
                        return axis
        return None

    def pid_axis(self, e):
        """The grid axis ``a`` when ``e`` is ``program_id(a)``; else None."""
        if isinstance(e, ir.ProgramId) and e.which == "id" and e.axis < 2:
            return e.axis
        if isinstance(e, ir.Var):
            found = self.pid_vars.get(e.name)
            return found[0] if found and found[1] == 1 else None
        return None

    def block_end(self, e, axis):
        """Whether ``e`` is ``program_id(axis) * 16 + 16`` (a TileLoad's window end)."""
        return (
            isinstance(e, ir.Binary)
            and e.op == "add"
            and isinstance(e.right, ir.Const)
            and e.right.value == 16
            and self.pid_block(e.left) == axis
        )

    def error(self, message, node):
        err = QnbIndexError(message)
        err.ir_loc = node.loc
        if node.loc is not None and node.loc.unit < len(self.kernel.units):
            err.ir_unit = self.kernel.units[node.loc.unit].qualname
        return err

    def checker(self, message, node):
        """``check(st, bad)``: raise if an active lane is bad (the interpreter's check)."""
        compiler = self

        def check(st, bad, detail=message):
            if st.mask is None and not bad.any():
                return
            n = st.n
            bad = np.broadcast_to(bad, (n, *bad.shape[1:])) if bad.shape[:1] == (1,) else bad
            if bad.ndim > 1:
                bad = bad.reshape(bad.shape[0], -1).any(axis=1)
            if st.mask is not None:
                bad = bad & st.mask
            if bad.any():
                lane = int(np.argmax(bad))
                where = tuple(int(p[lane]) for p in st.pid)
                raise compiler.error(f"{detail} (in program {where})", node)

        return check

    def first_active(self, st):
        lane = 0 if st.mask is None else int(np.argmax(st.mask))
        return tuple(int(p[lane]) for p in st.pid)

    # ------------------------------------------------------------------ statements

    def block(self, body, top=False):
        steps = []
        for stmt in body:
            steps.append(self.stmt(stmt))
            if top and isinstance(stmt, ir.Assign):
                self.note_pid_var(stmt)
        steps = tuple(steps)
        if len(steps) == 1:
            return steps[0]

        def run(st):
            for step in steps:
                step(st)

        return run

    def note_pid_var(self, stmt):
        if self.assign_count.get(stmt.name) != 1:
            return
        axis = self.pid_axis(stmt.value)
        if axis is not None:
            self.pid_vars[stmt.name] = (axis, 1)
            return
        axis = self.pid_block(stmt.value)
        if axis is not None:
            self.pid_vars[stmt.name] = (axis, 16)

    def stmt(self, s):
        method = getattr(self, "s_" + type(s).__name__, None)
        if method is None:
            raise _Unsupported(type(s).__name__)
        return method(s)

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
            st.env[name] = np.where(cpu._expand(st.mask, "scalar", kind), v, old)
            st.aliased.discard(name)

        return assign

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
        has_exits = any(isinstance(n, ir.Break | ir.Continue) for n in ir.walk_body(s.body))

        def run_for(st):
            first, last, by = int(start(st)[0]), int(stop(st)[0]), int(step(st)[0])
            if by == 0:
                raise zero_step
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

    # ------------------------------------------------------------------ memory

    def view(self, v: ir.ArrayView, node):
        """``view(st) -> (array, batch)``: batch an int where uniform, else an int64 array."""
        param = v.param
        if v.batch is None:
            return lambda st: (st.arrays[param], 0)
        batch = self.expr(v.batch)
        check = self.checker("", node)
        uniform = not self.is_varying(v.batch)
        compiler = self

        def view(st):
            array = st.arrays[param]
            b = batch(st)
            slabs = array.shape[0]
            message = f"batch index out of range for {param!r} with {slabs} slabs"
            if uniform:
                index = int(b[0])
                if not 0 <= index < slabs:
                    raise compiler.error(
                        f"{message} (in program {compiler.first_active(st)})", node
                    )
                return array, index
            b = b.astype(np.int64)
            check(st, (b < 0) | (b >= slabs), message)
            return array, np.clip(b, 0, slabs - 1)

        return view

    def window_bounds(self, node, v, bounds, padded=False):
        """``bounds(st) -> (array, batch, r0, r1, c0, c1)``: Python ints where uniform.
        A ``padded`` window may start before the array: its bounds are not checked."""
        view = self.view(v, node)
        fns = tuple(self.expr(x) for x in bounds)
        uniform = not any(self.is_varying(x) for x in bounds)
        uniform_view = v.batch is None or not self.is_varying(v.batch)
        message = f"negative window bound on {v.param!r}"
        check = self.checker(message, node)
        compiler = self

        constant = all(self.constant(x) for x in bounds)
        if constant:  # known now: the bounds of every launch
            known = tuple(int(f(None)[0]) for f in fns)
            if min(known) < 0 and not padded:
                constant = False

        def window(st):
            array, batch = view(st)
            if constant:
                return (array, batch, *known)
            if uniform:
                r0, r1, c0, c1 = (int(f(st)[0]) for f in fns)
                if not padded and (r0 < 0 or c0 < 0 or r1 < 0 or c1 < 0):
                    raise compiler.error(
                        f"{message} (in program {compiler.first_active(st)})", node
                    )
                return array, batch, r0, r1, c0, c1
            r0, r1, c0, c1 = (f(st).astype(np.int64) for f in fns)
            if not padded:
                check(st, (r0 < 0) | (c0 < 0) | (r1 < 0) | (c1 < 0))
            return array, batch, r0, r1, c0, c1

        return window, uniform and uniform_view, uniform

    def grid_pattern(self, node):
        """``(row_axis, col_axis)`` for a window ``(program_id(a) * 16, … + 16)`` on
        either side (at least one; the other None, a uniform bound); else None."""
        rows = self.pid_block(node.r0)
        cols = self.pid_block(node.c0)
        if rows is not None and not self.block_end(node.r1, rows):
            rows = None
        if cols is not None and not self.block_end(node.c1, cols):
            cols = None
        if (rows is None and cols is None) or rows == cols:
            return None
        for axis, bounds in ((rows, (node.r0, node.r1)), (cols, (node.c0, node.c1))):
            if axis is None and any(self.is_varying(b) for b in bounds):
                return None
        if node.view.batch is not None and self.is_varying(node.view.batch):
            return None
        return rows, cols

    def e_LoadWindow(self, e):
        base = self.expr(e.base)
        bounds = (e.r0, e.r1, e.c0, e.c1)
        window, uniform, uniform_bounds = self.window_bounds(e, e.view, bounds, e.padded)
        base_uniform = not self.is_varying(e.base)
        pattern = self.grid_pattern(e) if base_uniform else None
        dtype = e.type.dtype.numpy
        generic = self.generic_load(e, base, window)
        if uniform and base_uniform:

            def load_uniform(st):
                array, b, r0, r1, c0, c1 = window(st)
                if r0 < 0 or c0 < 0 or array.dtype != dtype:  # padded, or converting
                    return generic(st)
                fill = base(st)
                rows = max(0, min(r1, array.shape[1], r0 + 16) - r0)
                cols = max(0, min(c1, array.shape[2], c0 + 16) - c0)
                if rows == 16 and cols == 16:
                    return array[b, r0 : r0 + 16, c0 : c0 + 16][None]
                out = np.array(fill)
                out[0, :rows, :cols] = array[b, r0 : r0 + rows, c0 : c0 + cols]
                return out

            return load_uniform
        if uniform_bounds and base_uniform:  # one window of each program's slab (x[b])

            def load_slabs(st):
                array, b, r0, r1, c0, c1 = window(st)
                if array.size == 0 or r0 < 0 or c0 < 0 or array.dtype != dtype:
                    return generic(st)
                rows = max(0, min(r1, array.shape[1], r0 + 16) - r0)
                cols = max(0, min(c1, array.shape[2], c0 + 16) - c0)
                first = _consecutive(b)
                if rows == 16 and cols == 16:
                    if first is not None:  # a view, as the interpreter's slab_blocks
                        return array[first : first + len(b), r0 : r0 + 16, c0 : c0 + 16]
                    return array[b, r0 : r0 + 16, c0 : c0 + 16]
                out = np.empty((len(b), 16, 16), array.dtype)
                out[...] = base(st)
                out[:, :rows, :cols] = array[b, r0 : r0 + rows, c0 : c0 + cols]
                return out

            return load_slabs
        if pattern is None:
            return generic
        row_axis, col_axis = pattern
        ra = row_axis if row_axis is not None else 1 - col_axis
        r_fns = (self.expr(e.r0), self.expr(e.r1))
        c_fns = (self.expr(e.c0), self.expr(e.c1))
        view = self.view(e.view, e)
        fill_const = isinstance(e.base, ir.TileFill) and e.base.kind == "full"

        def load_blocks(st):
            grid = st.grid
            if not st.whole or grid[2] != 1 or not fill_const:
                return generic(st)
            array, b = view(st)
            if array.dtype != dtype:
                return generic(st)
            spans = _spans(st, array, row_axis, col_axis, r_fns, c_fns)
            if spans is None:
                return generic(st)
            (rs, re, nrb), (cs, ce, ncb) = spans
            sub = array[b, rs:re, cs:ce]
            if sub.shape == (nrb * 16, ncb * 16):
                a4 = sub.reshape(nrb, 16, ncb, 16)
            else:
                padded = np.empty((nrb * 16, ncb * 16), array.dtype)
                padded[...] = base(st)[0, 0, 0]
                padded[: sub.shape[0], : sub.shape[1]] = sub
                a4 = padded.reshape(nrb, 16, ncb, 16)
            return _Blocks(a4, ra)

        return load_blocks

    def generic_load(self, e, base, window):
        """The interpreter's window load, for any lanes."""
        dtype = e.type.dtype.numpy

        def load(st):
            fill = _tiles(st, base(st))
            array, batch, r0, r1, c0, c1 = window(st)
            batch, r0, r1, c0, c1 = _lane_arrays(batch, r0, r1, c0, c1)
            if array.size == 0:
                return np.array(fill)
            row_end = np.minimum(r1, array.shape[1])
            col_end = np.minimum(c1, array.shape[2])
            rows, cols, valid = cpu._masks(r0, c0, row_end, col_end)
            r = np.clip(rows, 0, array.shape[1] - 1)
            c = np.clip(cols, 0, array.shape[2] - 1)
            flat = array.reshape(-1)
            index = (batch[:, None, None] * array.shape[1] + r[:, :, None]) * array.shape[2] + c[
                :, None, :
            ]
            return np.where(valid, flat[index].astype(dtype, copy=False), fill)

        return load

    def detach(self, st, array):
        """Before a store to ``array``: copy the variables that are views of it."""
        for name in list(st.aliased):
            value = st.env[name]
            held = value.a4 if isinstance(value, _Blocks) else value
            if np.may_share_memory(held, array):
                st.env[name] = (
                    _Blocks(np.array(value.a4), value.ra)
                    if isinstance(value, _Blocks)
                    else np.array(value)
                )
                st.aliased.discard(name)

    def s_StoreWindow(self, s):
        value = self.expr(s.value)
        window, uniform, uniform_bounds = self.window_bounds(
            s, s.view, (s.r0, s.r1, s.c0, s.c1), s.padded
        )
        pattern = self.grid_pattern(s)
        compiler = self

        def generic(st, v, array, batch, r0, r1, c0, c1):
            v = _tiles(st, v)
            batch, r0, r1, c0, c1 = _lane_arrays(batch, r0, r1, c0, c1)
            row_end = np.minimum(r1, array.shape[1])
            col_end = np.minimum(c1, array.shape[2])
            rows, cols, valid = cpu._masks(r0, c0, row_end, col_end)
            n = max(v.shape[0], rows.shape[0], batch.shape[0], cpu._mask_lanes(st.mask))
            valid = np.broadcast_to(valid, (n, 16, 16))
            if st.mask is not None:
                valid = valid & st.mask[:, None, None]
            r = np.broadcast_to(rows[:, :, None], (n, 16, 16))
            c = np.broadcast_to(cols[:, None, :], (n, 16, 16))
            b = np.broadcast_to(batch[:, None, None], (n, 16, 16))
            values = np.broadcast_to(v, (n, 16, 16))
            array[b[valid], r[valid], c[valid]] = values[valid]

        if uniform:

            def store_uniform(st):
                v = value(st)
                array, b, r0, r1, c0, c1 = window(st)
                compiler.detach(st, array)
                if (
                    st.mask is not None
                    or isinstance(v, _Blocks)
                    or v.shape[0] != 1
                    or r0 < 0
                    or c0 < 0
                ):
                    generic(st, v, array, b, r0, r1, c0, c1)
                    return
                rows = max(0, min(r1, array.shape[1], r0 + 16) - r0)
                cols = max(0, min(c1, array.shape[2], c0 + 16) - c0)
                array[b, r0 : r0 + rows, c0 : c0 + cols] = v[0, :rows, :cols]

            return store_uniform

        if uniform_bounds:  # one window of each program's slab (x[b])

            def store_slabs(st):
                v = value(st)
                array, b, r0, r1, c0, c1 = window(st)
                compiler.detach(st, array)
                if st.mask is not None or isinstance(v, _Blocks) or r0 < 0 or c0 < 0:
                    generic(st, v, array, b, r0, r1, c0, c1)
                    return
                rows = max(0, min(r1, array.shape[1], r0 + 16) - r0)
                cols = max(0, min(c1, array.shape[2], c0 + 16) - c0)
                v = np.broadcast_to(v, (len(b), 16, 16))[:, :rows, :cols]
                first = _consecutive(b)
                if first is not None:
                    array[first : first + len(b), r0 : r0 + rows, c0 : c0 + cols] = v
                else:  # where programs share a slab (a race), the last program's wins
                    array[b, r0 : r0 + rows, c0 : c0 + cols] = v

            return store_slabs

        if pattern is not None:
            row_axis, col_axis = pattern
            ra = row_axis if row_axis is not None else 1 - col_axis
            r_fns = (self.expr(s.r0), self.expr(s.r1))
            c_fns = (self.expr(s.c0), self.expr(s.c1))
            view = self.view(s.view, s)

        def store(st):
            v = value(st)
            if pattern is not None and st.mask is None and st.whole and st.grid[2] == 1:
                # programs along an axis the window does not follow must be one
                grid = st.grid
                if (row_axis is not None or grid[1 - col_axis] == 1) and (
                    col_axis is not None or grid[1 - row_axis] == 1
                ):
                    array, b = view(st)
                    spans = _spans(st, array, row_axis, col_axis, r_fns, c_fns)
                    if spans is not None:
                        compiler.detach(st, array)
                        (rs, re, nrb), (cs, ce, ncb) = spans
                        kind = s.value.type.kind
                        a4 = np.broadcast_to(_as_blocks(v, kind, ra, grid), (nrb, 16, ncb, 16))
                        flat = a4.reshape(nrb * 16, ncb * 16) if a4.flags.c_contiguous else None
                        if flat is not None:
                            array[b, rs:re, cs:ce] = flat[: re - rs, : ce - cs]
                        else:
                            dst = array[b, rs:re, cs:ce]
                            if dst.shape == (nrb * 16, ncb * 16):
                                cpu._move_blocks(dst.reshape(nrb, 16, ncb, 16), a4)
                            else:
                                dst[...] = np.asarray(a4).reshape(nrb * 16, ncb * 16)[
                                    : re - rs, : ce - cs
                                ]
                        return
            array, b, r0, r1, c0, c1 = window(st)
            compiler.detach(st, array)
            generic(st, v, array, b, r0, r1, c0, c1)

        return store

    def vec_window(self, node, v, start, stop, col, padded=False):
        view = self.view(v, node)
        start_fn, stop_fn = self.expr(start), self.expr(stop)
        col_fn = self.expr(col) if col is not None else None
        negative = self.checker(f"negative bound on {v.param!r}", node)
        column = self.checker(f"column index out of range for {v.param!r}", node)

        def window(st):
            array, batch = view(st)
            batch = np.asarray(batch).reshape(-1)
            lo = start_fn(st).astype(np.int64)
            hi = stop_fn(st).astype(np.int64)
            if not padded:
                negative(st, (lo < 0) | (hi < 0))
            index = lo[:, None] + cpu._ARANGE
            if col_fn is None:
                limit, colv = array.shape[2], None
            else:
                limit = array.shape[1]
                colv = col_fn(st).astype(np.int64)
                column(st, (colv < 0) | (colv >= array.shape[2]))
            ok = (index >= 0) & (index < np.minimum(hi, limit)[:, None])
            return array, batch, index, ok, colv

        return window

    def e_VecLoad(self, e):
        window = self.vec_window(e, e.view, e.start, e.stop, e.col, e.padded)
        one_d = e.col is None
        other_fn = None if e.other is None else self.expr(e.other)

        def load(st):
            array, batch, index, ok, col = window(st)
            if other_fn is None:
                other = np.zeros((), array.dtype)
            else:
                other = np.asarray(other_fn(st)).reshape(-1)[:, None]
            if array.size == 0:
                return np.broadcast_to(other, ok.shape).astype(array.dtype)
            i = np.clip(index, 0, (array.shape[2] if one_d else array.shape[1]) - 1)
            if one_d:
                values = array[batch[:, None], 0, i]
            else:
                values = array[batch[:, None], i, np.clip(col, 0, array.shape[2] - 1)[:, None]]
            return np.where(ok, values, other).astype(array.dtype, copy=False)

        return load

    def s_VecStore(self, s):
        value = self.expr(s.value)
        window = self.vec_window(s, s.view, s.start, s.stop, None, s.padded)
        compiler = self

        def store(st):
            v = value(st)
            array, batch, index, ok, _ = window(st)
            compiler.detach(st, array)
            n = max(v.shape[0], index.shape[0], batch.shape[0], cpu._mask_lanes(st.mask))
            ok = np.broadcast_to(ok, (n, 16))
            if st.mask is not None:
                ok = ok & st.mask[:, None]
            i = np.broadcast_to(index, (n, 16))
            b = np.broadcast_to(batch[:, None], (n, 16))
            array[b[ok], 0, i[ok]] = np.broadcast_to(v, (n, 16))[ok]

        return store

    def element(self, node, v, indices):
        """``element(st) -> (array, batch, rows, cols)`` with the interpreter's checks;
        ``rows``/``cols`` are ints, int64 arrays, or slices (program-indexed elements)."""
        view = self.view(v, node)
        fns = tuple(self.expr(i) for i in indices)
        count = len(indices)
        uniform = not any(self.is_varying(i) for i in indices)
        uniform_view = v.batch is None or not self.is_varying(v.batch)
        # x[program_id(0)] on a 1-D array: a slice of programs, when the grid is 1-D
        by_program = count == 1 and self.pid_axis(indices[0]) == 0 and v.batch is None
        param = v.param
        check = self.checker("", node)
        compiler = self

        def element(st):
            array, batch = view(st)
            dims = array.shape[3 - count :]
            message = f"index out of range for {param!r} of shape {st.shapes[param]}"
            values = [f(st) for f in fns]
            if uniform:
                idx = [int(x[0]) for x in values]
                if any(not 0 <= i < d for i, d in zip(idx, dims)):
                    raise compiler.error(
                        f"{message} (in program {compiler.first_active(st)})", node
                    )
                if count == 1:
                    idx = [0, *idx]
                return array, batch, idx[0], idx[1]
            if by_program and st.run0 and st.mask is None and values[0] is st.pid[0]:
                first = int(values[0][0])
                if first >= 0 and first + st.n <= dims[0] and st.n == len(values[0]):
                    return array, batch, 0, slice(first, first + st.n)
            idx = [x.astype(np.int64) for x in values]
            bad = np.zeros(1, bool)
            for i, d in zip(idx, dims):
                bad = bad | (i < 0) | (i >= d)
            check(st, bad, message)
            idx = [np.clip(i, 0, d - 1) for i, d in zip(idx, dims)]
            if count == 1:
                idx = [np.zeros(1, np.int64), *idx]
            return array, batch, idx[0], idx[1]

        return element, uniform and uniform_view

    def e_ArrayLoad(self, e):
        element, uniform = self.element(e, e.view, e.indices)
        if uniform:

            def load_one(st):
                array, b, r, c = element(st)
                return array[b, r, c : c + 1].copy()

            return load_one

        def load(st):
            array, b, r, c = element(st)
            if isinstance(c, slice):
                return array[b, r, c]
            return array[b, r, c]

        return load

    def s_ArrayStore(self, s):
        value = self.expr(s.value)
        element, uniform = self.element(s, s.view, s.indices)
        compiler = self

        def store(st):
            v = value(st)
            array, b, r, c = element(st)
            compiler.detach(st, array)
            if isinstance(c, slice):
                array[b, r, c] = np.broadcast_to(v, (st.n,))
                return
            if uniform and st.mask is None and v.shape[0] == 1:
                array[b, r, c] = v[0]
                return
            b, r, c = (np.asarray(x).reshape(-1) for x in (b, r, c))
            n = max(v.shape[0], r.shape[0], c.shape[0], b.shape[0])
            n = n if st.mask is None else st.n
            lanes = np.ones(n, bool) if st.mask is None else st.mask
            b, r, c = (np.broadcast_to(x, (n,))[lanes] for x in (b, r, c))
            array[b, r, c] = np.broadcast_to(v, (n,))[lanes]

        return store

    # ------------------------------------------------------------------ expressions

    def expr(self, e):
        method = getattr(self, "e_" + type(e).__name__, None)
        if method is None:
            raise _Unsupported(type(e).__name__)
        fn = method(e)
        folds = isinstance(e, _FOLDABLE) and not isinstance(e, ir.Const) and self.constant(e)
        if not folds and not isinstance(e, ir.Const | ir.Var | ir.ProgramId | ir.ArrayDim):
            self.computes = True
        if folds:
            try:
                value = fn(None)  # under launcher()'s errstate
            except Exception:  # noqa: BLE001 - an error stays where it happens at launch
                return fn
            if not isinstance(value, _Blocks):
                value.flags.writeable = False
                return lambda st: value
        return fn

    def constant(self, e) -> bool:
        found = self.constant_nodes.get(id(e))
        if found is None:
            if isinstance(e, ir.Const):
                found = True
            elif not isinstance(e, _FOLDABLE):
                found = False
            elif isinstance(e, ir.TileFill) and e.kind == "eye":
                found = True
            else:
                found = all(self.constant(c) for c in ir.children(e))
            self.constant_nodes[id(e)] = found
        return found

    def e_Const(self, e):
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
        fn = _op(cpu._UNARY, e.op)
        operand = self.expr(e.operand)

        def unary(st):
            v = operand(st)
            if isinstance(v, _Blocks):
                return _Blocks(fn(v.a4), v.ra)
            return fn(v)

        return unary

    def e_Binary(self, e):
        fn = _op(cpu._BINARY, e.op)
        kind = e.type.kind
        left_kind, right_kind = e.left.type.kind, e.right.type.kind
        left, right = self.expr(e.left), self.expr(e.right)
        # the interpreter casts all but comparisons and logic ops, whose result (bool) is
        # already the node's dtype: casting every result to it is the same, and new ops
        # need no list of their own here
        dtype = e.type.dtype.numpy

        def binary(st):
            a, b = left(st), right(st)
            if isinstance(a, _Blocks) or isinstance(b, _Blocks):
                ra = a.ra if isinstance(a, _Blocks) else b.ra
                result = fn(
                    _as_blocks(a, left_kind, ra, st.grid), _as_blocks(b, right_kind, ra, st.grid)
                )
                return _Blocks(result.astype(dtype, copy=False), ra)
            result = fn(cpu._expand(a, left_kind, kind), cpu._expand(b, right_kind, kind))
            return result.astype(dtype, copy=False)

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
            c, a, b = (cpu._expand(v, k, kind) for v, k in values)
            return np.where(c, a, b)

        return select

    def e_Cast(self, e):
        operand = self.expr(e.operand)
        target = e.type.dtype

        def cast(st):
            v = operand(st)
            if isinstance(v, _Blocks):
                return _Blocks(cpu.cast_values(v.a4, target), v.ra)
            return cpu.cast_values(v, target)

        return cast

    def e_TileFill(self, e):
        dtype = e.type.dtype.numpy
        if e.kind == "eye":
            eye = np.eye(16, dtype=dtype)[None]
            return lambda st: eye
        value = self.expr(e.value)
        shape_tail = e.type.shape
        to_kind = e.type.kind

        def fill(st):
            v = value(st)
            shape = (v.shape[0], *shape_tail)
            return np.broadcast_to(cpu._expand(v, "scalar", to_kind), shape).astype(dtype)

        return fill

    def tile_index(self, node, value):
        fn = self.expr(value)
        check = self.checker("tile index out of range 0..15", node)

        def index(st):
            i = fn(st).astype(np.int64)
            check(st, (i < 0) | (i >= 16))
            return np.clip(i, 0, 15)

        return index

    def e_TileGet(self, e):
        base = self.expr(e.base)
        i_fn = self.tile_index(e, e.i)
        j_fn = self.tile_index(e, e.j) if e.j is not None else None

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
        i_fn = self.tile_index(e, e.i)
        value = self.expr(e.value)
        j_fn = self.tile_index(e, e.j) if e.j is not None else None

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
        _op(cpu._REDUCE, e.op)  # an op the interpreter does not know: left to it
        axis, op = e.axis, e.op

        def reduce(st):
            value = operand(st)
            if isinstance(value, _Blocks):
                if axis == 1:  # along rows: NumPy sums in the interpreter's order
                    return _reduce_blocks(st, value, op, axis)
                value = value.tiles(st.grid)
            axes = tuple(range(1, value.ndim)) if axis is None else axis + 1
            return cpu.reduce_values(op, value, axes)

        return reduce

    def e_Matmul(self, e):
        a_fn, b_fn = self.expr(e.a), self.expr(e.b)
        acc_fn = self.expr(e.acc) if e.acc is not None else None
        out = e.type.dtype.numpy

        def matmul(st):
            a, b = a_fn(st), b_fn(st)
            if (
                isinstance(a, _Blocks)
                and isinstance(b, _Blocks)
                and a.ra == b.ra
                and a.a4.shape[2] == 1
                and b.a4.shape[0] == 1
            ):
                # a block row strip times a block column strip: every program's product
                # at once is one GEMM of the two strips
                # contiguous strips: NumPy's matmul takes a slow loop for some strides
                x = np.ascontiguousarray(a.a4.reshape(-1, 16))
                y = np.ascontiguousarray(b.a4.reshape(16, -1))
                if cpu.is_narrow_float(x.dtype):
                    x, y = x.astype(np.float32), y.astype(np.float32)
                product = _strip_product(x, y).astype(out, copy=False)
                result = product.reshape(a.a4.shape[0], 16, b.a4.shape[2], 16)
                if acc_fn is not None:
                    acc = _as_blocks(acc_fn(st), "tile", a.ra, st.grid)
                    if acc.shape == result.shape and acc.dtype == result.dtype:
                        result += acc
                    else:
                        result = acc + result
                return _Blocks(result, a.ra)
            a, b = _tiles(st, a), _tiles(st, b)
            if cpu.is_narrow_float(a.dtype):
                a, b = a.astype(np.float32), b.astype(np.float32)
            result = np.matmul(a, b).astype(out, copy=False)
            if acc_fn is not None:
                acc = _tiles(st, acc_fn(st))
                if result.shape[0] >= acc.shape[0] and result.dtype == acc.dtype:
                    result += acc
                else:
                    result = acc + result
            return result

        return matmul

    def e_Outer(self, e):
        u, v = self.expr(e.u), self.expr(e.v)
        return lambda st: u(st)[:, :, None] * v(st)[:, None, :]

    def e_RowCol(self, e):
        operand = self.expr(e.operand)
        index_fn = self.tile_index(e, e.index)
        is_row = e.which == "row"

        def rowcol(st):
            base = _tiles(st, operand(st))
            index = index_fn(st)
            n = max(base.shape[0], index.shape[0])
            lanes = np.arange(n) if base.shape[0] > 1 else np.zeros(n, np.int64)
            index = np.broadcast_to(index, (n,))
            return base[lanes, index, :] if is_row else base[lanes, :, index]

        return rowcol

    def e_Cholesky(self, e):
        operand, eps = self.expr(e.operand), self.expr(e.eps)
        return lambda st: cpu._lanes_last(cpu._cholesky, _tiles(st, operand(st)), eps(st))

    def e_SolveTriangular(self, e):
        lower, rhs = self.expr(e.lower), self.expr(e.rhs)
        return lambda st: cpu._lanes_last(
            cpu._solve_lower, _tiles(st, lower(st)), _tiles(st, rhs(st))
        )


# OpenBLAS runs a GEMM of at most 65536 * 4 multiply-adds on one thread: the strips' product
# goes in row bands of that size, since a thread team for each K step of 16 costs more than
# the arithmetic wherever cores are shared (measured: 7× slower on a busy 2-core machine).
_BAND_MULTIPLY_ADDS = 65536 * 4


def _strip_product(x, y):
    """``x @ y`` for a block row strip ``x`` (M×16) and column strip ``y`` (16×N)."""
    m, n = x.shape[0], y.shape[1]
    band = max(16, _BAND_MULTIPLY_ADDS // (16 * max(n, 1)) // 16 * 16)
    if band >= m:
        return np.matmul(x, y)
    out = np.empty((m, n), np.result_type(x, y))
    for start in range(0, m, band):
        np.matmul(x[start : start + band], y, out=out[start : start + band])
    return out


def _reduce_blocks(st, value, op, axis):
    """``Reduce`` of every program's tile of a block grid, on the grid itself (no gather
    of the tiles); the result in program order, as the interpreter holds it."""
    a4 = value.full(st.grid)
    axes = (1, 3) if axis is None else (1 if axis == 0 else 3)
    out = cpu.reduce_values(op, a4, axes)
    if axis == 1:  # (block row, 16, block col): the vec axis last
        out = out.transpose(0, 2, 1)
    # now (block row, block col[, 16]); programs run program_id(0) fastest
    if value.ra == 0:
        out = out.T if axis is None else out.transpose(1, 0, 2)
    return np.ascontiguousarray(out).reshape(st.n, *out.shape[2:])


def _spans(st, array, row_axis, col_axis, r_fns, c_fns):
    """The rows and columns of ``array`` a block-grid window covers, per side:
    ``(start, end, blocks)``; None when a uniform side's bounds are negative (the
    generic path raises the interpreter's error)."""
    out = []
    for axis, (lo, hi), limit in (
        (row_axis, r_fns, array.shape[1]),
        (col_axis, c_fns, array.shape[2]),
    ):
        if axis is not None:
            count = st.grid[axis]
            if count * 16 >= 2**31:
                return None
            out.append((0, min(limit, count * 16), count))
        else:
            start, stop = int(lo(st)[0]), int(hi(st)[0])
            if start < 0 or stop < 0:
                return None
            end = max(start, min(stop, limit, start + 16))
            out.append((start, end, 1))
    return out


def _op(table, name):
    """The interpreter's NumPy function for an op (one table serves both paths); an op it
    spells another way leaves the kernel to the interpreter."""
    fn = table.get(name)
    if fn is None:
        raise _Unsupported(name)
    return fn


def _consecutive(index):
    """``index[0]`` when ``index`` counts up by one (programs reading slabs in order)."""
    first = int(index[0])
    if int(index[-1]) - first != len(index) - 1:
        return None
    return first if len(index) == 1 or (np.diff(index) == 1).all() else None


def _lane_arrays(batch, *bounds):
    """Window bounds as int64 arrays with a lane axis (uniform ones of length 1)."""
    return tuple(
        np.asarray(x, np.int64).reshape(-1)
        if not isinstance(x, np.ndarray)
        else x.astype(np.int64).reshape(-1)
        for x in (batch, *bounds)
    )


def _varying_names(kernel: ir.KernelIR) -> set[str]:
    """The locals whose value may differ between programs: assigned from an expression
    that reads ``program_id`` (or another such local), or under a per-program branch."""
    varying: set[str] = set()

    def reads_varying(e):
        for node in ir.walk(e):
            if isinstance(node, ir.ProgramId) and node.which == "id":
                return True
            if isinstance(node, ir.Var) and node.name in varying:
                return True
        return False

    def visit(body, masked):
        changed = False
        for s in body:
            if isinstance(s, ir.Assign):
                if s.name not in varying and (masked or reads_varying(s.value)):
                    varying.add(s.name)
                    changed = True
            elif isinstance(s, ir.If):
                inner = masked or reads_varying(s.cond)
                changed |= visit(s.then_body, inner)
                changed |= visit(s.else_body, inner)
            elif isinstance(s, ir.For):
                inner = masked or any(reads_varying(x) for x in (s.start, s.stop, s.step))
                if inner and s.var not in varying:
                    varying.add(s.var)
                    changed = True
                changed |= visit(s.body, inner)
            elif isinstance(s, ir.While):
                changed |= visit(s.body, masked or reads_varying(s.cond))
        return changed

    while visit(kernel.body, False):
        pass
    return varying
