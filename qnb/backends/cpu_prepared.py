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
- *block grids*: an M×N tile loaded at ``(program_id(a) * M, program_id(b) * N)`` is, over
  all programs together, the array itself seen as a grid of M×N blocks (:class:`_Blocks`).
  Elementwise ops on such tiles are one array expression on the array, a store to the
  same grid is one assignment, and ``a @ b`` of a block row strip by a block column strip
  (the K loop of a tiled matmul) is one GEMM. Any other use gathers the programs' tiles.
- *program-indexed elements*: ``x[program_id(0)]`` over a 1-D grid is a slice of ``x``.
- *strided windows*: bounds ``program_id(a) * f + u`` (``u`` the same in every program)
  step by a fixed amount from lane to lane, so over a 1-D grid the tiles are one strided
  view of the array (loads copy it; stores assign it, or compose overlapping rows with
  the last lane's winning, as the interpreter's scatter), decided per launch from the
  grid and the shapes with Python ints (memoised where the bounds are constants). Over
  a 2-D grid (both program ids stepping) the tiles of the whole grid are one 4-D view
  where every tile lies in the array and stores do not overlap. Where
  tiles leave the array, a load reads a filled copy of the region they span; anything
  else (a mask, gaps, a bound check that could fail) takes the generic masked path.

A kernel with control flow that differs between programs inside a loop (a loop bound, a
``while`` condition, ``break``/``continue`` under a per-program branch) or an op this
module does not know is left to the interpreter: :func:`prepare` returns None. Bounds
checks are exact and raise the interpreter's errors (same message, same program). The
trace always runs the interpreter (its recorder watches every step).
"""

from __future__ import annotations

import numpy as np

from qnb import ir
from qnb.backends import cpu, cpu_atomics
from qnb.backends import cpu_semantics as semantics
from qnb.backends.cpu_semantics import window_masks as _masks
from qnb.errors import QnbIndexError
from qnb.frontend.checks import tile_index_message

_LEAVES = (ir.Const, ir.Var, ir.ProgramId, ir.ArrayDim)
_FOLDABLE = (ir.Const, ir.Unary, ir.Binary, ir.Cast, ir.TileFill, ir.Select, ir.Transpose)


class _Unsupported(Exception):
    """The kernel needs the interpreter (see the module docstring)."""


class _Break(Exception):
    pass


class _Continue(Exception):
    pass


_ONE_PROGRAM = (1, 1, 1)
# Programs a kernel of scalars alone runs at once: each value is one element a program,
# so 2²⁰ of them hold 8 MiB a value at most (a launch over 10⁸ programs runs in 96
# chunks, in bounded memory, and the 2²⁰ programs of a tile-free form in one).
SCALAR_CHUNK = 1 << 20
_INT32 = 2**31


def _ignoring_errors() -> tuple:
    """``(context variable, value)`` that ``np.errstate(all="ignore")`` sets, made once
    (entering an errstate makes its value anew, as long as a small ufunc call); empty
    where this NumPy keeps its error state elsewhere (then a launch enters one)."""
    try:
        from numpy._core._ufunc_config import _extobj_contextvar, _make_extobj

        return (_extobj_contextvar, _make_extobj(all="ignore"))
    except (ImportError, AttributeError, TypeError):
        return ()


_IGNORE_ERRORS = _ignoring_errors()


def _expand_axes(kind, to_kind):
    """The index ``cpu._expand`` applies to a ``kind`` value in a ``to_kind`` result (a
    per-program scalar gains the trailing axes), or None where it returns it as it is."""
    if kind == to_kind or kind != "scalar":
        return None
    return (slice(None), None, None) if to_kind == "tile" else (slice(None), None)


_NO_ALIASES = frozenset()  # the aliases of a kernel that assigns no variable: never any


class _State:
    """One chunk of programs being run: what the closures read besides their own nodes.

    ``fresh`` makes the variables from the bound scalars (None: they are the variables,
    a dict each launch binds anew); ``aliases`` says whether the body assigns variables
    (else ``aliased`` is the empty frozenset nothing adds to)."""

    __slots__ = (
        "arrays", "shapes", "env", "n", "pid", "grid", "mask", "aliased", "whole", "run0", "first"
    )  # fmt: skip

    def __init__(self, bound, grid, start, count, fresh, pid, aliases=True):
        self.arrays, self.shapes, scalars = bound
        self.n = count
        self.first = start  # (the flat index of the chunk's first program)
        self.mask = None
        self.grid = grid
        if count == 1:  # (the launch of a single program, the common small case)
            self.whole = start == 0 and grid == _ONE_PROGRAM
            self.run0 = True
        else:
            self.whole = start == 0 and count == grid[0] * grid[1] * grid[2]
            self.run0 = grid[1] * grid[2] == 1  # program_id(0) counts up by one
        self.pid = pid
        self.env = scalars if fresh is None else fresh(scalars)
        self.aliased = set() if aliases else _NO_ALIASES


class _OneProgram(_State):
    """The state of a launch of one program (grid (1, 1, 1)): what a chunk works out from
    its grid is fixed here, in class attributes, so a launch sets five slots, not ten."""

    __slots__ = ()
    n, grid, whole, run0, first = 1, _ONE_PROGRAM, True, True, 0

    def __init__(self, arrays, shapes, env, aliased):
        self.arrays, self.shapes, self.env, self.aliased = arrays, shapes, env, aliased
        self.mask = None


def _fresh_env(kernel: ir.KernelIR):
    """``fresh(scalars) -> env``: the variables at a launch's start. A local starts at 0
    (one read-only array per local, made once: assignment replaces a value, never writes
    into it), and a scalar parameter the body reassigns starts as passed."""
    zeros, reassigned = {}, []
    params = {p.name for p in kernel.scalars}
    for name, t in kernel.locals.items():
        if name in params:
            reassigned.append((name, t.dtype.numpy, (1, *t.shape)))
        else:
            zero = np.zeros((1, *t.shape), t.dtype.numpy)
            zero.flags.writeable = False
            zeros[name] = zero
    if not reassigned and not zeros:
        return dict  # (a copy of the scalars, made in C)
    if not reassigned:

        def fresh(scalars):
            env = zeros.copy()
            env.update(scalars)
            return env

        return fresh

    def fresh_reassigned(scalars):
        env = zeros.copy()
        env.update(scalars)
        for name, dtype, shape in reassigned:
            env[name] = scalars[name].astype(dtype).reshape(shape)
        return env

    return fresh_reassigned


def _binder(kernel: ir.KernelIR):
    """``bind(args, stored) -> (arrays, shapes, scalars)`` as :func:`cpu._bind` binds a
    launch (3-D views of the arrays, their own shapes, scalars as one-element arrays), in
    a few steps for the common call (NumPy arrays); any other goes to ``cpu._bind``,
    which converts it or explains what is wrong."""
    plan = [(p.name, p.type.kind == "array", p.type.dtype.numpy) for p in kernel.params]
    limit = 2**31

    def bind(args, stored):
        arrays, shapes, scalars = {}, {}, {}
        for (name, is_array, dtype), value in zip(plan, args):
            if is_array:
                if type(value) is not np.ndarray:
                    return slow(args, stored)
                shape = value.shape
                ndim = len(shape)
                if ndim == 2:
                    if shape[0] >= limit or shape[1] >= limit:
                        return slow(args, stored)
                    arrays[name] = value[None]
                elif ndim == 1 and shape[0] < limit:
                    arrays[name] = value[None, None]
                elif ndim == 3 and max(shape) < limit:
                    arrays[name] = value
                else:
                    return slow(args, stored)
                shapes[name] = shape
            else:
                scalars[name] = np.array([value], dtype)
        for name in stored:
            if not arrays[name].flags.writeable:
                return slow(args, stored)
        return arrays, shapes, scalars

    def slow(args, stored):
        arrays, scalars = cpu._bind(kernel, args, stored)
        return (
            {name: a for name, (a, _) in arrays.items()},
            {name: s for name, (_, s) in arrays.items()},
            scalars,
        )

    if len(plan) == 1 and plan[0][1]:  # one array parameter: the common call, unrolled
        ((only, _, _),) = plan

        def bind_one(args, stored):
            if len(args) != 1 or type(args[0]) is not np.ndarray:
                return slow(args, stored)
            value = args[0]
            shape = value.shape
            ndim = len(shape)
            if ndim == 2 and shape[0] < limit and shape[1] < limit:
                array = value[None]
            elif ndim == 1 and shape[0] < limit:
                array = value[None, None]
            elif ndim == 3 and max(shape) < limit:
                array = value
            else:
                return slow(args, stored)
            if stored and not value.flags.writeable:
                return slow(args, stored)
            return {only: array}, {only: shape}, {}

        return bind_one

    return bind


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


_OneProgram.pid = _program_ids(_ONE_PROGRAM, 0, 1)


class _Blocks:
    """Every program's M×N tile at once, as a 4-D array ``(RB, M, CB, N)`` whose block
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
        _, m, _, n = self.a4.shape
        return np.broadcast_to(self.a4, (grid[self.ra], m, grid[1 - self.ra], n))

    def tiles(self, grid):
        """The ``(programs, M, N)`` value the interpreter holds."""
        a4 = self.full(grid)
        # programs run x fastest: (gy, gx, M, N) in C order is launch order
        t = a4.transpose(2, 0, 1, 3) if self.ra == 0 else a4.transpose(0, 2, 1, 3)
        out = np.empty(t.shape, t.dtype)
        cpu._move_blocks(out, t)
        return out.reshape(-1, a4.shape[1], a4.shape[3])


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
    t = tiles.reshape(grid[1], grid[0], *tiles.shape[1:])
    return t.transpose(1, 2, 0, 3) if ra == 0 else t.transpose(0, 2, 1, 3)


def _tiles(st, value):
    return value.tiles(st.grid) if isinstance(value, _Blocks) else value


def prepare(kernel: ir.KernelIR, stored=None):
    """A launcher ``launch(grid, args, stored)`` for ``kernel`` (``stored`` given here is
    its default; None: the arrays the kernel stores to), or None where the kernel needs
    the interpreter."""
    try:
        return _Compiler(kernel).launcher(stored)
    except _Unsupported:
        return None


# ---------------------------------------------------------------------- the walk


class _Facts:
    """What the compiler asks about the whole kernel, from one walk of its IR (a warm
    start prepares every kernel it loads, so the IR is walked once, not once a question):

    ``assign_count`` (name -> assignments, a loop's variable counting 2), ``loaded`` and
    ``stored`` (as :func:`ir.array_uses`), ``holds_tiles`` (:func:`ir.holds_tiles`),
    ``largest`` (the most elements of a value, as :func:`cpu.chunk_programs` counts),
    ``exits`` (the ``For`` loops with a ``break``/``continue`` anywhere in their body),
    and per expression (and view) node: ``reads``, what it reads as a bit mask (bit 0
    ``program_id``, then one bit per variable, see ``bits``), and ``constant``, whether
    it is known now (:meth:`_Compiler.constant`)."""

    __slots__ = (
        "assign_count", "loaded", "stored", "holds_tiles", "largest", "exits", "reads",
        "constant", "bits",
    )  # fmt: skip

    def __init__(self, kernel: ir.KernelIR):
        self.assign_count: dict[str, int] = {}
        self.loaded: set[str] = set()
        self.stored: set[str] = set()
        self.holds_tiles = False
        self.largest = 256
        for t in kernel.locals.values():
            self.largest = max(self.largest, t.size)
            if t.kind in ("tile", "vec"):
                self.holds_tiles = True
        self.exits: set[int] = set()
        self.reads: dict[int, int] = {}
        self.constant: dict[int, bool] = {}
        self.bits: dict[str, int] = {}
        loops: list[int] = []
        for stmt in kernel.body:
            self.statement(stmt, loops)

    def statement(self, node, loops):
        kind = type(node)
        if kind is ir.Assign:
            self.assign_count[node.name] = self.assign_count.get(node.name, 0) + 1
        elif kind is ir.For:
            self.assign_count[node.var] = self.assign_count.get(node.var, 0) + 2
            loops.append(id(node))
        elif kind is ir.Break or kind is ir.Continue:
            self.exits.update(loops)
        elif kind is ir.ArrayStore or kind is ir.StoreWindow or kind is ir.VecStore:
            self.stored.add(node.view.param)
        elif kind is ir.Atomic:
            self.stored.add(node.view.param)
            self.loaded.add(node.view.param)
        for child in ir.children(node):
            if isinstance(child, ir.Stmt):
                self.statement(child, loops)
            else:
                self.expression(child)
        if kind is ir.For:
            loops.pop()

    def expression(self, node) -> int:
        """Note ``node`` (an expression or a view) and the nodes below it; its reads."""
        kind = type(node)
        key = id(node)
        if kind is ir.Const:
            self.reads[key] = 0
            self.constant[key] = True
            return 0
        typ = node.type
        if typ.kind in ("tile", "vec"):
            self.holds_tiles = True
            self.largest = max(self.largest, typ.size)
        if kind is ir.Var:
            mask = self.bits.get(node.name)
            if mask is None:
                mask = self.bits[node.name] = 2 << len(self.bits)
            constant = False
        elif kind is ir.ProgramId:
            mask = 1 if node.which == "id" else 0
            constant = False
        else:
            if kind is ir.ArrayLoad or kind is ir.LoadWindow or kind is ir.VecLoad:
                self.loaded.add(node.view.param)
            mask = 0
            constant = isinstance(node, _FOLDABLE)
            for child in ir.children(node):
                mask |= self.expression(child)
                constant = constant and self.constant[id(child)]
            if kind is ir.TileFill and node.kind == "eye":
                constant = True
        self.reads[key] = mask
        self.constant[key] = constant
        return mask

    def mask(self, names) -> int:
        """The bits of ``names`` (with ``program_id``'s)."""
        mask = 1
        for name in names:
            mask |= self.bits.get(name, 0)
        return mask


class _Compiler:
    def __init__(self, kernel: ir.KernelIR):
        self.kernel = kernel
        self.facts = facts = _Facts(kernel)
        self.varying = _varying_names(kernel, facts)
        self.varying_mask = facts.mask(self.varying)
        # per node (the IR lives as long as this walk, so ids stay unique)
        self.built: dict[int, object] = {}  # node -> its closure (see expr)
        self.ints: dict[tuple, object] = {}  # (int, dtype) -> a Const's closure
        self.assign_count = facts.assign_count
        # top-level variables that hold program_id(a) (factor 1) or program_id(a) * factor
        self.pid_vars: dict[str, tuple[int, int]] = {}
        # top-level variables assigned once, a constant: name -> its value
        self.const_vars: dict[str, np.ndarray] = {}
        self.computes = False  # whether a launch does arithmetic (which may warn)
        self.masked = 0  # depth of per-program branches around the statement being built
        self.loops = 0

    def launcher(self, default_stored=None):
        with np.errstate(all="ignore"):  # constants fold as a launch computes them
            body = self.block(self.kernel.body, top=True)
        kernel = self.kernel
        if default_stored is None:
            default_stored = self.facts.stored
        fresh = _fresh_env(kernel)
        if fresh is dict:  # no locals: the scalars bound anew at each launch are the variables
            fresh = None
        aliases = bool(self.assign_count)  # (only an assignment or a loop makes an alias)
        bind = _binder(kernel)
        holds_tiles = self.facts.holds_tiles
        chunk_size = cpu.chunk_for(self.facts.largest)
        quiet = not self.computes
        pids = {}  # (grid, start, count) -> program ids: a launch's ids are made once
        one = _ONE_PROGRAM

        def launch(grid, args, stored=default_stored):
            bound = bind(args, stored)
            if grid == one and quiet:  # a single program with nothing that could warn
                arrays, shapes, scalars = bound
                env = scalars if fresh is None else fresh(scalars)
                body(_OneProgram(arrays, shapes, env, set() if aliases else _NO_ALIASES))
                return
            if not _IGNORE_ERRORS:
                with np.errstate(all="ignore"):
                    run_chunks(grid, bound)
                return
            errors, ignore = _IGNORE_ERRORS  # np.errstate(all="ignore"), without its cost
            token = errors.set(ignore)
            try:
                run_chunks(grid, bound)
            finally:
                errors.reset(token)

        def run_chunks(grid, bound):
            total = grid[0] * grid[1] * grid[2]
            chunk = chunk_size if holds_tiles else min(total, SCALAR_CHUNK)
            try:
                for start in range(0, total, chunk or 1):
                    count = min(chunk, total - start)
                    key = (grid, start, count)
                    pid = pids.get(key)
                    if pid is None:
                        if len(pids) > 16:
                            pids.clear()
                        pid = pids[key] = _program_ids(grid, start, count)
                    body(_State(bound, grid, start, count, fresh, pid, aliases))
            except MemoryError:
                pids.clear()
                raise cpu.out_of_memory(kernel.name, grid) from None

        return launch

    # ------------------------------------------------------------------ analysis

    def is_varying(self, e) -> bool:
        """Whether ``e`` may differ between programs (it reads ``program_id`` or a
        varying local)."""
        return bool(self.facts.reads[id(e)] & self.varying_mask)

    def pid_block(self, e, side=16):
        """The grid axis ``a`` when ``e`` is ``program_id(a) * side``; else None."""
        found = self.pid_factor(e)
        return found[0] if found is not None and found[1] == side else None

    def pid_factor(self, e):
        """``(a, factor)`` when ``e`` is ``program_id(a) * factor`` (a positive constant;
        ``program_id(a)`` itself has factor 1); else None."""
        if isinstance(e, ir.Var):
            return self.pid_vars.get(e.name)
        if isinstance(e, ir.ProgramId):
            axis = self.pid_axis(e)
            return None if axis is None else (axis, 1)
        if isinstance(e, ir.Binary) and e.op == "mul":
            for p, k in ((e.left, e.right), (e.right, e.left)):
                if (
                    isinstance(k, ir.Const)
                    and type(k.value) is int
                    and 1 <= k.value <= ir.MAX_TILE_ELEMENTS
                ):
                    axis = self.pid_axis(p)
                    if axis is not None:
                        return axis, k.value
        return None

    def pid_axis(self, e):
        """The grid axis ``a`` when ``e`` is ``program_id(a)``; else None."""
        if isinstance(e, ir.ProgramId) and e.which == "id" and e.axis < 2:
            return e.axis
        if isinstance(e, ir.Var):
            found = self.pid_vars.get(e.name)
            return found[0] if found and found[1] == 1 else None
        return None

    def block_end(self, e, axis, side=16):
        """Whether ``e`` is ``program_id(axis) * side + side`` (a TileLoad's window end)."""
        return (
            isinstance(e, ir.Binary)
            and e.op == "add"
            and isinstance(e.right, ir.Const)
            and e.right.value == side
            and self.pid_block(e.left, side) == axis
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

    def s_Atomic(self, s):
        """An atomic, through the interpreter's own implementation (``cpu_atomics``); the
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
            b, r, c, v, ok, _ = cpu_atomics.elements(array, batch, idx, v, lanes)
            cpu_atomics.apply(op, array, b, r, c, v, ok, False)

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

    def gemm_loop(self, s):
        """``gemm(st, first, last, step) -> done`` for the K loop of a tiled matmul,
        ``for k in range(…, K): acc = mma(Tile[M, K].load(a, i, k), Tile[K, N].load(b, k, j),
        acc)`` with ``i``, ``j`` the block offsets (``program_id * M``, ``program_id * N``) of
        two grid axes: over all programs together the loop is
        one GEMM of the block row strips of ``a`` by the block column strips of ``b``
        (zero where the tiles' windows leave the arrays, as the loads read), added to
        ``acc``. None where the loop is not of that form; ``done`` False where a launch
        is not (a partial chunk, a mask, another dtype): the loop then runs step by step."""
        if self.masked or len(s.body) != 1 or not isinstance(s.body[0], ir.Assign):
            return None
        stmt, k = s.body[0], s.var
        acc = stmt.name
        product = stmt.value
        if isinstance(product, ir.Binary) and product.op == "add":
            for mine, other in ((product.left, product.right), (product.right, product.left)):
                if (
                    isinstance(mine, ir.Var)
                    and mine.name == acc
                    and isinstance(other, ir.Matmul)
                    and other.acc is None
                    and other.type == product.type
                ):
                    product = other
                    break
            else:
                return None
        elif not (
            isinstance(product, ir.Matmul)
            and isinstance(product.acc, ir.Var)
            and product.acc.name == acc
        ):
            return None
        a, b = product.a, product.b
        if acc == k or not all(self.zero_load(x) for x in (a, b)):
            return None
        (m, depth), (depth_b, n) = a.type.shape, b.type.shape
        if depth != depth_b or not (isinstance(s.step, ir.Const) and s.step.value == depth):
            return None
        if not (self.is_k_window(a.c0, a.c1, k, depth) and self.is_k_window(b.r0, b.r1, k, depth)):
            return None
        ra, ca = self.pid_block(a.r0, m), self.pid_block(b.c0, n)
        if ra is None or ca is None or ra == ca:
            return None
        if not (self.block_end(a.r1, ra, m) and self.block_end(b.c1, ca, n)):
            return None
        views = []
        for load in (a, b):
            if load.view.batch is not None and self.is_varying(load.view.batch):
                return None
            views.append(self.view(load.view, load))
        view_a, view_b = views
        a_dtype, b_dtype = a.type.dtype.numpy, b.type.dtype.numpy
        out = product.type.dtype.numpy
        unpadded = not (a.padded and b.padded)

        def gemm(st, first, last, by):
            grid = st.grid
            if st.mask is not None or not st.whole or grid[2] != 1:
                return False
            steps = range(first, last, by)
            if not steps:
                return True
            if unpadded and first < 0:  # the loads' error, from the loop
                return False
            x, xb = view_a(st)
            y, yb = view_b(st)
            if x.dtype != a_dtype or y.dtype != b_dtype or x.size == 0 or y.size == 0:
                return False
            rows, cols = grid[ra] * m, grid[ca] * n
            if max(rows, cols) >= 2**31:
                return False
            # the K columns where a or b has elements: elsewhere both tiles read 0, and
            # 0 * 0 adds nothing (a range far past the arrays allocates nothing)
            lo = max(first, 0)
            hi = max(lo, min(steps[-1] + depth, max(x.shape[2], y.shape[1])))
            x = _zero_padded(x[xb], 0, rows, lo, hi)
            y = _zero_padded(y[yb], lo, hi, 0, cols)
            if cpu.is_narrow_float(x.dtype):
                x, y = x.astype(np.float32), y.astype(np.float32)
            result = np.matmul(x, y).astype(out, copy=False)
            _add_tiles(result, st.env[acc], ra, grid, (m, n))
            st.env[acc] = _Blocks(result.reshape(rows // m, m, cols // n, n), ra)
            st.env[k] = np.array([steps[-1]], np.int32)
            st.aliased.discard(acc)
            st.aliased.discard(k)
            return True

        return gemm

    def zero_load(self, e):
        """Whether ``e`` is a tile load whose elements outside the array read 0."""
        return (
            isinstance(e, ir.LoadWindow)
            and isinstance(e.base, ir.TileFill)
            and e.base.kind == "full"
            and isinstance(e.base.value, ir.Const)
            and e.base.value.value == 0
        )

    @staticmethod
    def is_k_window(lo, hi, k, depth):
        """Whether ``(lo, hi)`` is ``(k, k + depth)`` for the loop variable ``k``."""
        return (
            isinstance(lo, ir.Var)
            and lo.name == k
            and isinstance(hi, ir.Binary)
            and hi.op == "add"
            and isinstance(hi.left, ir.Var)
            and hi.left.name == k
            and isinstance(hi.right, ir.Const)
            and hi.right.value == depth
        )

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
            message = semantics.batch_out_of_range(param, slabs)
            if uniform:
                index = int(b[0])
                if not 0 <= index < slabs:
                    raise compiler.error(
                        f"{message} (in program {compiler.first_active(st)})", node
                    )
                return array, index
            b = b.astype(np.int64, copy=False)
            check(st, (b < 0) | (b >= slabs), message)
            return array, _clamp(b, 0, slabs - 1)

        return view

    def window_bounds(self, node, v, bounds, padded=False):
        """``bounds(st) -> (array, batch, r0, r1, c0, c1)``: Python ints where uniform.
        A ``padded`` window may start before the array: its bounds are not checked."""
        view = self.view(v, node)
        fns = tuple(self.expr(x) for x in bounds)
        uniform = not any(self.is_varying(x) for x in bounds)
        uniform_view = v.batch is None or not self.is_varying(v.batch)
        message = semantics.negative_bound(v.param)
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
            r0, r1, c0, c1 = (f(st).astype(np.int64, copy=False) for f in fns)
            if not padded:
                check(st, (r0 < 0) | (c0 < 0) | (r1 < 0) | (c1 < 0))
            return array, batch, r0, r1, c0, c1

        return window, uniform and uniform_view, uniform

    def known_window(self, v, bounds, padded):
        """``(r0, r1, c0, c1)`` where a window's bounds are constants that pass their
        checks (of a parameter's own 2-D/1-D array, no batch index); else None."""
        if v.batch is not None or not all(self.constant(x) for x in bounds):
            return None
        with np.errstate(all="ignore"):
            known = tuple(int(self.expr(x)(None)[0]) for x in bounds)
        if min(known) < 0 and not padded:
            return None
        return known

    def store_known(self, s, v, known, generic):
        """A store of a constant tile to a constant window (``Tile16.full(4.0).store(d,
        0, 0)``): the value, the slices and the end a whole tile needs are made once."""
        param = s.view.param
        m, n = s.value.type.shape
        r0, r1, c0, c1 = known
        whole = v[0]
        index = (0, slice(r0, r0 + m), slice(c0, c0 + n))
        # a whole tile fits where the array reaches these (and the window does)
        need_rows = r0 + m if r0 >= 0 and r1 >= r0 + m else None
        need_cols = c0 + n if c0 >= 0 and c1 >= c0 + n else None
        compiler = self

        def store_known(st):
            array = st.arrays[param]
            if st.aliased:
                compiler.detach(st, array)
            if st.mask is not None or need_rows is None or need_cols is None:
                generic(st, v, array, 0, r0, r1, c0, c1)
                return
            _, height, width = array.shape
            if need_rows <= height and need_cols <= width:
                array[index] = whole
                return
            rows = max(0, min(r1, height, need_rows) - r0)
            cols = max(0, min(c1, width, need_cols) - c0)
            array[0, r0 : r0 + rows, c0 : c0 + cols] = whole[:rows, :cols]

        return store_known

    def grid_pattern(self, node, shape):
        """``(row_axis, col_axis)`` for an M×N window ``(program_id(a) * M, … + M)`` /
        ``(program_id(b) * N, … + N)`` on either side (at least one; the other None, a
        uniform bound); else None."""
        m, n = shape
        rows = self.pid_block(node.r0, m)
        cols = self.pid_block(node.c0, n)
        if rows is not None and not self.block_end(node.r1, rows, m):
            rows = None
        if cols is not None and not self.block_end(node.c1, cols, n):
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
        shape = m, n = e.type.shape
        pattern = self.grid_pattern(e, shape) if base_uniform else None
        dtype = e.type.dtype.numpy
        generic = self.generic_load(e, base, window)
        if uniform and base_uniform:

            def load_uniform(st):
                array, b, r0, r1, c0, c1 = window(st)
                if r0 < 0 or c0 < 0 or array.dtype != dtype:  # padded, or converting
                    return generic(st)
                fill = base(st)
                rows = max(0, min(r1, array.shape[1], r0 + m) - r0)
                cols = max(0, min(c1, array.shape[2], c0 + n) - c0)
                if rows == m and cols == n:
                    return array[b, r0 : r0 + m, c0 : c0 + n][None]
                out = np.array(fill)
                out[0, :rows, :cols] = array[b, r0 : r0 + rows, c0 : c0 + cols]
                return out

            return load_uniform
        if uniform_bounds and base_uniform:  # one window of each program's slab (x[b])

            def load_slabs(st):
                array, b, r0, r1, c0, c1 = window(st)
                if array.size == 0 or r0 < 0 or c0 < 0 or array.dtype != dtype:
                    return generic(st)
                rows = max(0, min(r1, array.shape[1], r0 + m) - r0)
                cols = max(0, min(c1, array.shape[2], c0 + n) - c0)
                first = _consecutive(b)
                if rows == m and cols == n:
                    if first is not None:  # a view, as the interpreter's slab_blocks
                        return array[first : first + len(b), r0 : r0 + m, c0 : c0 + n]
                    return array[b, r0 : r0 + m, c0 : c0 + n]
                out = np.empty((len(b), m, n), array.dtype)
                out[...] = base(st)
                out[:, :rows, :cols] = array[b, r0 : r0 + rows, c0 : c0 + cols]
                return out

            return load_slabs
        strided = self.strided_load(e, base) if base_uniform else None
        if strided is not None:
            plain = generic

            def generic(st):
                out = strided(st)
                return plain(st) if out is None else out

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
            spans = _spans(st, array, row_axis, col_axis, r_fns, c_fns, shape)
            if spans is None:
                return generic(st)
            (rs, re, nrb), (cs, ce, ncb) = spans
            sub = array[b, rs:re, cs:ce]
            if sub.shape == (nrb * m, ncb * n):
                a4 = sub.reshape(nrb, m, ncb, n)
            else:
                padded = np.empty((nrb * m, ncb * n), array.dtype)
                padded[...] = base(st)[0, 0, 0]
                padded[: sub.shape[0], : sub.shape[1]] = sub
                a4 = padded.reshape(nrb, m, ncb, n)
            return _Blocks(a4, ra)

        return load_blocks

    def lane_linear(self, e):
        """``(axis, factor, at, pure)`` when ``e`` is ``program_id(axis) * factor`` plus and
        minus values the same in every program (``factor`` 0, ``axis`` None where ``e``
        is itself the same in every program); ``at(st, p)`` is its value, as a Python
        int, where ``program_id(axis) == p``, or None where its int32 arithmetic would
        wrap; ``pure`` whether that value depends on nothing else (no scalar parameter,
        no variable). Else None."""
        if not self.is_varying(e):
            fn = self.expr(e)
            return None, 0, lambda st, p: int(fn(st)[0]), self.constant(e)
        found = self.pid_factor(e)
        if found is not None:
            factor = found[1]

            def scaled(st, p):
                v = factor * p
                return v if -_INT32 <= v < _INT32 else None

            return found[0], factor, scaled, True
        if not (isinstance(e, ir.Binary) and e.op in ("add", "sub")):
            return None
        left, right = self.lane_linear(e.left), self.lane_linear(e.right)
        if left is None or right is None:
            return None
        if left[1] and right[1]:  # (program_id on both sides: not one term)
            return None
        axis, factor = left[:2] if left[1] else right[:2]
        pure = left[3] and right[3]
        if e.op == "sub":
            if right[1]:
                return None
            sign = -1
        else:
            sign = 1
        lat, rat = left[2], right[2]

        def at(st, p):
            x, y = lat(st, p), rat(st, p)
            if x is None or y is None:
                return None
            v = x + sign * y
            return v if -_INT32 <= v < _INT32 else None

        return axis, factor, at, pure

    def strided_window(self, node, shape, edges=False):
        """``window(st) -> (array, b, r0, dr, c0, dc)`` for a window whose bounds step by
        a fixed amount from program to program (``program_id(a) * f + u``): every lane's
        tile is ``array[b, r0 + lane * dr + i, c0 + lane * dc + j]``, and all of them lie in
        the array and inside their window bounds, so no element is masked and no bound
        check can fail. None (at a launch) where that is not so; None (now) where the
        bounds are not of that form. With ``edges``, also ``(array, b, r0, dr, c0, dc,
        rows, cols)`` where tiles leave the array but no check can fail and every
        lane's window holds its first ``rows`` rows and ``cols`` columns (of the
        elements in the array)."""
        padded = getattr(node, "padded", False)
        v = node.view
        if v.batch is not None and self.is_varying(v.batch):
            return None
        linear = [self.lane_linear(x) for x in (node.r0, node.r1, node.c0, node.c1)]
        if None in linear or all(f == 0 for _, f, _, _ in linear):
            return None
        view = self.view(v, node)
        m, n = shape
        pure = all(x[3] for x in linear)
        memo = {}  # (grid, first pids, lanes, array shape) -> the window, for pure bounds

        def window(st):
            array, b = view(st)
            if not pure:
                found = find(st, array, b)
            else:
                key = (st.grid, st.first, st.n, array.shape, b)  # (the lanes' program ids)
                found = memo.get(key, memo)
                if found is memo:
                    if len(memo) >= 32:
                        memo.clear()
                    found = memo[key] = find(st, array, b)
            return None if found is None else (array, *found)

        def find(st, array, b):
            count = st.n
            one = count == 1
            if not one and st.grid[1] * st.grid[2] != 1:
                return find_grid(st, array, b)
            ends = []  # each bound at the first lane and its step per lane
            for axis, factor, at, _ in linear:
                if factor == 0:
                    ends.append((at(st, 0), 0))
                    continue
                p = int(st.pid[axis][0])
                step = 0 if one or axis != 0 else factor
                first = at(st, p)
                # (linear in p: where neither end wraps, no lane between does)
                if first is None or (step and at(st, p + count - 1) is None):
                    return None
                ends.append((first, step))
            _, height, width = array.shape
            (r0, dr), (r1, dr1), (c0, dc), (c1, dc1) = ends
            lane = count - 1
            clean = True
            for lo, dlo, hi, dhi, side, extent in (
                (r0, dr, r1, dr1, m, height),
                (c0, dc, c1, dc1, n, width),
            ):
                for k in (0, lane):  # linear in the lane: both ends decide
                    start, end = lo + dlo * k, hi + dhi * k
                    if start < 0 or start + side > end or start + side > extent:
                        clean = False
                    if (start < 0 or end < 0) and not padded:
                        return None  # (the generic path's check, for the lanes that run)
            if clean:
                return b, r0, dr, c0, dc
            if not edges or dr1 != dr or dc1 != dc:
                return None
            # some tiles leave the array or their window: the window ends sit the same
            # distance from the starts in every lane, so the elements that exist are
            # the array's within [0, rows) x [0, cols) and the tiles' first r1 - r0 rows
            # and c1 - c0 columns
            return b, r0, dr, c0, dc, r1 - r0, c1 - c0

        def find_grid(st, array, b):
            """``(b, r0, c0, steps)`` for the whole 2-D grid at once (``steps``: the rows
            and columns a tile moves per program along axis 1, then axis 0, none of them
            negative), where every tile lies in the array and inside its window (no
            element masked, no check that could fail); else None."""
            gx, gy, gz = st.grid
            if not st.whole or gz != 1:
                return None
            ends = []  # each bound at program (0, 0), and its step along axes 0 and 1
            for axis, factor, at, _ in linear:
                first = at(st, 0)
                if first is None:
                    return None
                if factor == 0 or axis == 2:
                    ends.append((first, 0, 0))
                    continue
                if factor < 0 or at(st, (gx if axis == 0 else gy) - 1) is None:
                    return None  # (linear in p: where neither end wraps, no lane between does)
                ends.append((first, factor, 0) if axis == 0 else (first, 0, factor))
            _, height, width = array.shape
            (r0, *r0_steps), (r1, *r1_steps), (c0, *c0_steps), (c1, *c1_steps) = ends
            corners = ((0, 0), (gx - 1, 0), (0, gy - 1), (gx - 1, gy - 1))
            for lo, lo_steps, hi, hi_steps, side, extent in (
                (r0, r0_steps, r1, r1_steps, m, height),
                (c0, c0_steps, c1, c1_steps, n, width),
            ):
                for px, py in corners:  # linear in each axis: the corners decide
                    start = lo + lo_steps[0] * px + lo_steps[1] * py
                    end = hi + hi_steps[0] * px + hi_steps[1] * py
                    if start < 0 or start + side > end or start + side > extent:
                        return None
            steps = ((r0_steps[1], c0_steps[1]), (r0_steps[0], c0_steps[0]))
            return b, r0, c0, steps

        return window

    def strided_load(self, e, base):
        """The generic load's fast path for a strided window (:meth:`strided_window`):
        the tiles are one strided view of the array, copied once."""
        shape = m, n = e.type.shape
        dtype = e.type.dtype.numpy
        if not self.constant(e.base):
            return None
        try:
            fill = base(None)
        except Exception:  # noqa: BLE001 - the generic load raises it at launch
            return None
        if not isinstance(fill, np.ndarray) or np.result_type(dtype, fill.dtype) != dtype:
            return None
        flat = fill.reshape(-1)
        value = flat[0]  # the fill of every element outside, where it is one value
        # (np.array_equal of flat and its first element broadcast, NaN equal to NaN,
        # without its broadcast and copies)
        same = bool((flat == value).all()) or (
            fill.dtype.kind in "fc" and bool(np.isnan(flat).all())
        )
        window = self.strided_window(e, shape, edges=same)
        if window is None:
            return None

        def load(st):
            found = window(st)
            if found is None:
                return None
            if len(found) == 6:
                array, b, r0, dr, c0, dc = found
                tiles = _tile_view(array, b, r0, dr, c0, dc, (st.n, m, n))
                return tiles.astype(dtype, order="C")  # (a C-ordered copy, as the gather)
            if len(found) == 5:  # the whole 2-D grid: (rows of programs, programs, M, N)
                array, b, r0, c0, steps = found
                gx, gy, _ = st.grid
                tiles = _grid_view(array, b, r0, c0, steps, (gy, gx, m, n))
                # (launch order: x fastest)
                return tiles.astype(dtype, order="C").reshape(st.n, m, n)
            array, b, r0, dr, c0, dc, rows, cols = found
            # the region the tiles span, filled, with the array's part copied in: the
            # tiles are then a strided view of it
            count = st.n
            height, width = dr * (count - 1) + m, dc * (count - 1) + n
            if height * width > 4 * count * m * n + 4096:  # (tiles far apart: gather)
                return None
            region = np.empty((height, width), dtype)
            region[...] = value
            _, h, w = array.shape
            rs, re = max(r0, 0), min(r0 + height, h)
            cs, ce = max(c0, 0), min(c0 + width, w)
            if rs < re and cs < ce:
                region[rs - r0 : re - r0, cs - c0 : ce - c0] = array[b, rs:re, cs:ce]
            tiles = _tile_view(region[None], 0, 0, dr, 0, dc, (count, m, n)).copy()
            if rows < m:
                tiles[:, max(rows, 0) :, :] = value
            if cols < n:
                tiles[:, :, max(cols, 0) :] = value
            return tiles

        return load

    def strided_store(self, s):
        """``store(st, v) -> done``: the generic store's fast path for a strided window
        (:meth:`strided_window`) and no mask: tiles that do not overlap are assigned
        through one strided view; tiles that overlap along one side keep the last lane's
        elements, as the interpreter's scatter does."""
        shape = m, n = s.value.type.shape
        window = self.strided_window(s, shape, edges=True)
        if window is None:
            return None

        def store(st, v):
            if st.mask is not None:
                return False
            found = window(st)
            if found is None:
                return False
            count = st.n
            if len(found) == 8:
                return store_edges(st, v, count, *found)
            if len(found) == 5:
                return store_grid(st, v, *found)
            array, b, r0, dr, c0, dc = found
            v = _tiles(st, v)
            if v.base is not None and np.may_share_memory(v, array):
                v = v.copy()
            if count == 1 or dr >= m or dc >= n:  # the tiles do not overlap
                _tile_view(array, b, r0, dr, c0, dc, (count, m, n), True)[...] = v
                return True
            a2 = array[b]
            if dc == 0:
                dst, step, side, width = a2[r0 : r0 + dr * (count - 1) + m, c0 : c0 + n], dr, m, n
            elif dr == 0:
                dst, step, side, width = a2[r0 : r0 + m, c0 : c0 + dc * (count - 1) + n].T, dc, n, m
                v = np.swapaxes(v, -1, -2)
            else:
                return False
            if v.shape[0] != count:
                v = np.broadcast_to(v, (count, side, width))
            # lane p's first `step` lines are its own; the last lane keeps all its lines
            dst[: step * (count - 1)] = v[:-1, :step].reshape(-1, width)
            dst[step * (count - 1) :] = v[-1]
            return True

        def store_grid(st, v, array, b, r0, c0, steps):
            """The whole 2-D grid's tiles through one view of the array, where no two
            overlap: each axis of the grid moves them along one side of the array, by
            at least a tile (else False: the generic store's scatter decides)."""
            gx, gy, _ = st.grid
            (dr_y, dc_y), (dr_x, dc_x) = steps
            rows_by_y = (
                dc_y == 0 and dr_x == 0 and (gy == 1 or dr_y >= m) and (gx == 1 or dc_x >= n)
            )
            rows_by_x = (
                dr_y == 0 and dc_x == 0 and (gx == 1 or dr_x >= m) and (gy == 1 or dc_y >= n)
            )
            if not (rows_by_y or rows_by_x):
                return False
            v = _tiles(st, v)
            if v.base is not None and np.may_share_memory(v, array):
                v = v.copy()
            view = _grid_view(array, b, r0, c0, steps, (gy, gx, m, n), True)
            view[...] = v.reshape(gy, gx, m, n) if v.shape[0] == st.n else v[0]
            return True

        def store_edges(st, v, count, array, b, r0, dr, c0, dc, rows, cols):
            """Tiles that leave the array or their window, stepping down the rows with
            no gap between the rows they write: the lanes' elements composed into the
            region they span (the last lane's where they overlap, as the scatter), and
            the region's part in the array assigned at once."""
            rows, cols = min(rows, m), min(cols, n)
            if rows <= 0 or cols <= 0:
                return True  # (no element is written)
            if dc != 0 or not (count == 1 or 1 <= dr <= rows):
                return False
            v = _tiles(st, v)
            if v.shape[0] != count:
                v = np.broadcast_to(v, (count, m, n))
            height = dr * (count - 1) + rows
            region = np.empty((height, cols), v.dtype)
            region[: dr * (count - 1)] = v[:-1, :dr, :cols].reshape(-1, cols)
            region[dr * (count - 1) :] = v[-1, :rows, :cols]
            _, h, w = array.shape
            rs, re = max(r0, 0), min(r0 + height, h)
            cs, ce = max(c0, 0), min(c0 + cols, w)
            if rs < re and cs < ce:
                array[b, rs:re, cs:ce] = region[rs - r0 : re - r0, cs - c0 : ce - c0]
            return True

        return store

    def generic_load(self, e, base, window):
        """The interpreter's window load, for any lanes."""
        dtype = e.type.dtype.numpy
        shape = e.type.shape

        def load(st):
            fill = _tiles(st, base(st))
            array, batch, r0, r1, c0, c1 = window(st)
            batch, r0, r1, c0, c1 = _lane_arrays(batch, r0, r1, c0, c1)
            if array.size == 0:
                return np.array(fill)
            row_end = np.minimum(r1, array.shape[1])
            col_end = np.minimum(c1, array.shape[2])
            rows, cols, valid = _masks(r0, c0, row_end, col_end, shape)
            return semantics.gather_window(array, batch, rows, cols, valid, dtype, fill)

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
        shape = m, n = s.value.type.shape
        pattern = self.grid_pattern(s, shape)
        compiler = self

        def generic(st, v, array, batch, r0, r1, c0, c1):
            v = _tiles(st, v)
            batch, r0, r1, c0, c1 = _lane_arrays(batch, r0, r1, c0, c1)
            row_end = np.minimum(r1, array.shape[1])
            col_end = np.minimum(c1, array.shape[2])
            rows, cols, valid = _masks(r0, c0, row_end, col_end, shape)
            semantics.scatter_window(array, batch, rows, cols, valid, v, st.mask)

        known = self.known_window(s.view, (s.r0, s.r1, s.c0, s.c1), s.padded)
        if known is not None and self.constant(s.value):
            try:
                v = value(None)  # folded: the one value of every launch
            except Exception:  # noqa: BLE001 - it raises at launch, where it should
                v = None
            if isinstance(v, np.ndarray) and v.shape == (1, *shape):
                return self.store_known(s, v, known, generic)

        if uniform:

            def store_uniform(st):
                v = value(st)
                array, b, r0, r1, c0, c1 = window(st)
                if st.aliased:
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
                _, height, width = array.shape
                if r0 + m <= min(r1, height) and c0 + n <= min(c1, width):  # a whole tile
                    array[b, r0 : r0 + m, c0 : c0 + n] = v[0]
                    return
                rows = max(0, min(r1, height, r0 + m) - r0)
                cols = max(0, min(c1, width, c0 + n) - c0)
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
                rows = max(0, min(r1, array.shape[1], r0 + m) - r0)
                cols = max(0, min(c1, array.shape[2], c0 + n) - c0)
                v = np.broadcast_to(v, (len(b), m, n))[:, :rows, :cols]
                first = _consecutive(b)
                if first is not None:
                    array[first : first + len(b), r0 : r0 + rows, c0 : c0 + cols] = v
                else:  # where programs share a slab (a race), the last program's wins
                    array[b, r0 : r0 + rows, c0 : c0 + cols] = v

            return store_slabs

        strided = self.strided_store(s)
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
                    spans = _spans(st, array, row_axis, col_axis, r_fns, c_fns, shape)
                    if spans is not None:
                        compiler.detach(st, array)
                        (rs, re, nrb), (cs, ce, ncb) = spans
                        kind = s.value.type.kind
                        a4 = np.broadcast_to(_as_blocks(v, kind, ra, grid), (nrb, m, ncb, n))
                        flat = a4.reshape(nrb * m, ncb * n) if a4.flags.c_contiguous else None
                        if flat is not None:
                            array[b, rs:re, cs:ce] = flat[: re - rs, : ce - cs]
                        else:
                            dst = array[b, rs:re, cs:ce]
                            if dst.shape == (nrb * m, ncb * n):
                                cpu._move_blocks(dst.reshape(nrb, m, ncb, n), a4)
                            else:
                                dst[...] = np.asarray(a4).reshape(nrb * m, ncb * n)[
                                    : re - rs, : ce - cs
                                ]
                        return
            if strided is not None:
                array = st.arrays[s.view.param]
                compiler.detach(st, array)
                if strided(st, v):
                    return
            array, b, r0, r1, c0, c1 = window(st)
            compiler.detach(st, array)
            generic(st, v, array, b, r0, r1, c0, c1)

        return store

    def vec_window(self, node, v, start, stop, col, padded=False, size=16, axis=0):
        """``window(st) -> (array, batch, index, ok, fixed)`` for an N-element line per
        lane, as the interpreter's: ``index`` runs along the array's last axis (1-D, or a
        row: ``axis`` 1) or its rows (a column), ``fixed`` is the column (for a row, the
        row) that stays, ``ok`` which elements exist inside the window."""
        view = self.view(v, node)
        start_fn, stop_fn = self.expr(start), self.expr(stop)
        col_fn = self.expr(col) if col is not None else None
        negative = self.checker(f"negative bound on {v.param!r}", node)
        what = "row" if axis == 1 else "column"
        outside_check = self.checker(f"{what} index out of range for {v.param!r}", node)
        steps = np.arange(size, dtype=np.int64)
        along_last = col is None or axis == 1
        uniform = not any(self.is_varying(x) for x in (start, stop, col) if x is not None)
        if v.batch is not None and self.is_varying(v.batch):
            uniform = False

        def line(st):
            """``(array, batch, fixed, lo)`` where the line is the same in every program
            and all its elements lie in the array and the window (no mask, no failing
            check): the elements are ``array[batch, fixed, lo:lo + size]`` (along the last
            axis) or ``array[batch, lo:lo + size, fixed]``; else None."""
            array, batch = view(st)
            lo, hi = int(start_fn(st)[0]), int(stop_fn(st)[0])
            limit = array.shape[2] if along_last else array.shape[1]
            if lo < 0 or lo + size > hi or lo + size > limit:
                return None
            if col_fn is None:
                return array, batch, 0, lo
            fixed = int(col_fn(st)[0])
            if not 0 <= fixed < (array.shape[1] if axis == 1 else array.shape[2]):
                return None
            return array, batch, fixed, lo

        def window(st):
            array, batch = view(st)
            batch = np.asarray(batch).reshape(-1)
            lo = start_fn(st).astype(np.int64, copy=False)
            hi = stop_fn(st).astype(np.int64, copy=False)
            if not padded:
                negative(st, (lo < 0) | (hi < 0))
            index = lo[:, None] + steps
            limit = array.shape[2] if along_last else array.shape[1]
            fixed = None
            ok = (index >= 0) & (index < np.minimum(hi, limit)[:, None])
            if col_fn is not None:
                fixed = col_fn(st).astype(np.int64, copy=False)
                extent = array.shape[1] if axis == 1 else array.shape[2]
                outside = (fixed < 0) | (fixed >= extent)
                if padded:  # a line outside the array has no elements
                    ok = ok & ~outside[:, None]
                else:
                    outside_check(st, outside)
            return array, batch, index, ok, fixed

        def elements(array, index, fixed):
            """The (row, column) indices of a line's elements, clamped into the array."""
            if fixed is None:
                return np.zeros((1, 1), np.int64), _clamp(index, 0, array.shape[2] - 1)
            if axis == 1:
                rows = _clamp(fixed, 0, array.shape[1] - 1)[:, None]
                return rows, _clamp(index, 0, array.shape[2] - 1)
            cols = _clamp(fixed, 0, array.shape[2] - 1)[:, None]
            return _clamp(index, 0, array.shape[1] - 1), cols

        def run(st):
            """``(array, batch, lo, end, count)`` where the ``count`` programs' lines abut
            in order along a 1-D array (program p reads from ``lo + p * size``: a vec per
            program over a long array), each window reaching to its line's end or to one
            stop they share, so all of them are the one slice ``array[batch, 0, lo:lo +
            count * size]`` of which ``[lo, end)`` exists; else None."""
            array, batch = view(st)
            if np.ndim(batch) and np.size(batch) != 1:
                return None
            lo, hi = start_fn(st), stop_fn(st)
            count, first = lo.shape[0], int(lo[0])
            if count < 2 or first < 0 or int(lo[-1]) - first != (count - 1) * size:
                return None
            if not (np.diff(lo) == size).all():
                return None
            end = min(array.shape[2], first + count * size)
            if hi.shape[0] == 1:
                end = min(end, int(hi[0]))
            elif not (hi >= lo + size).all():
                return None
            batch = int(np.reshape(batch, -1)[0])
            return array, batch, first, max(end, first), count

        abutting = col is None and not uniform
        return window, elements, line if uniform else None, run if abutting else None

    def e_VecLoad(self, e):
        size = e.type.shape[0]
        window, elements, line, run = self.vec_window(
            e, e.view, e.start, e.stop, e.col, e.padded, size, e.axis
        )
        other_fn = None if e.other is None else self.expr(e.other)
        target = e.type.dtype
        dtype = target.numpy
        along_last = e.col is None or e.axis == 1
        if e.other is not None and (self.is_varying(e.other) or e.other.type.dtype.numpy != dtype):
            line = run = None  # (np.where would give each lane its own value, or convert)

        def load(st):
            found = None if run is None else run(st)
            if found is not None:  # the lines abut: one slice, padded at its end
                array, b, lo, end, count = found
                other = 0 if other_fn is None else np.asarray(other_fn(st)).reshape(-1)[0]
                out = np.empty(count * size, dtype)
                values = array[b, 0, lo:end]
                if values.dtype != dtype:
                    values = cpu.cast_values(values, target)
                out[: end - lo] = values
                out[end - lo :] = other
                return out.reshape(count, size)
            found = None if line is None else line(st)
            if found is not None:  # every element exists: the line itself, copied
                if other_fn is not None:
                    other_fn(st)
                array, b, fixed, lo = found
                if along_last:
                    values = array[b, fixed, lo : lo + size]
                else:
                    values = array[b, lo : lo + size, fixed]
                if values.dtype != dtype:
                    return cpu.cast_values(values[None], target)
                return values[None].copy()
            array, batch, index, ok, fixed = window(st)
            if other_fn is None:
                other = np.zeros((), dtype)
            else:
                other = np.asarray(other_fn(st)).reshape(-1)[:, None]
            if array.size == 0:
                return np.broadcast_to(other, ok.shape).astype(dtype)
            rows, cols = elements(array, index, fixed)
            values = array[batch[:, None], rows, cols]
            if values.dtype != dtype:
                values = cpu.cast_values(values, target)
            return np.where(ok, values, other).astype(dtype, copy=False)

        return load

    def s_VecStore(self, s):
        value = self.expr(s.value)
        size = s.value.type.shape[0]
        window, elements, line, run = self.vec_window(
            s, s.view, s.start, s.stop, s.col, s.padded, size, s.axis
        )
        compiler = self
        along_last = s.col is None or s.axis == 1

        def store(st):
            v = value(st)
            found = None if run is None or st.mask is not None else run(st)
            if found is not None:  # the lines abut: one slice of the array, cut at its end
                array, b, lo, end, count = found
                compiler.detach(st, array)
                flat = np.broadcast_to(v, (count, size)).reshape(-1)
                array[b, 0, lo:end] = flat[: end - lo]
                return
            found = None if line is None or st.mask is not None else line(st)
            if found is not None and v.shape[0] == 1:  # one line, every element in it
                array, b, fixed, lo = found
                if st.aliased:
                    compiler.detach(st, array)
                if along_last:
                    array[b, fixed, lo : lo + size] = v[0]
                else:
                    array[b, lo : lo + size, fixed] = v[0]
                return
            array, batch, index, ok, fixed = window(st)
            compiler.detach(st, array)
            lanes = max(
                v.shape[0], index.shape[0], batch.shape[0], cpu._mask_lanes(st.mask), ok.shape[0]
            )
            ok = np.broadcast_to(ok, (lanes, size))
            if st.mask is not None:
                ok = ok & st.mask[:, None]
            rows, cols = elements(array, index, fixed)
            r = np.broadcast_to(rows, (lanes, size))
            c = np.broadcast_to(cols, (lanes, size))
            b = np.broadcast_to(batch[:, None], (lanes, size))
            array[b[ok], r[ok], c[ok]] = np.broadcast_to(v, (lanes, size))[ok]

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

        def message(st):  # (made only where needed: formatting a shape costs a launch)
            return f"index out of range for {param!r} of shape {st.shapes[param]}"

        if v.batch is None and all(self.constant(i) for i in indices):
            # known now (x[0, 0]): only the array's shape is checked at a launch
            with np.errstate(all="ignore"):
                known = [int(f(None)[0]) for f in fns]
            row, col = ([0] if count == 1 else []) + known

            def known_element(st):
                array = st.arrays[param]
                dims = array.shape[3 - count :]
                for i, d in zip(known, dims):
                    if not 0 <= i < d:
                        raise compiler.error(
                            f"{message(st)} (in program {compiler.first_active(st)})", node
                        )
                return array, 0, row, col

            return known_element, True

        def element(st):
            array, batch = view(st)
            dims = array.shape[3 - count :]
            values = [f(st) for f in fns]
            if uniform:
                idx = [int(x[0]) for x in values]
                if any(not 0 <= i < d for i, d in zip(idx, dims)):
                    raise compiler.error(
                        f"{message(st)} (in program {compiler.first_active(st)})", node
                    )
                if count == 1:
                    idx = [0, *idx]
                return array, batch, idx[0], idx[1]
            if by_program and st.run0 and st.mask is None and values[0] is st.pid[0]:
                first = int(values[0][0])
                if first >= 0 and first + st.n <= dims[0] and st.n == len(values[0]):
                    return array, batch, 0, slice(first, first + st.n)
            idx = [x.astype(np.int64, copy=False) for x in values]
            bad = np.zeros(1, bool)
            for i, d in zip(idx, dims):
                bad = bad | (i < 0) | (i >= d)
            check(st, bad, message(st))
            idx = [_clamp(i, 0, d - 1) for i, d in zip(idx, dims)]
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
            if st.aliased:
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
        """The closure of ``e``, built once: the analyses ask for the same bounds and
        operands again (a window's bounds, its blocks' spans, a strided form)."""
        fn = self.built.get(id(e))
        if fn is None:
            fn = self.built[id(e)] = self.build(e)
        return fn

    def build(self, e):
        method = getattr(self, "e_" + type(e).__name__, None)
        if method is None:
            raise _Unsupported(type(e).__name__)
        fn = method(e)
        if isinstance(e, _LEAVES):  # (nothing to fold, no arithmetic)
            return fn
        if not self.constant(e):
            self.computes = True
            return fn
        try:
            value = fn(None)  # under launcher()'s errstate
        except Exception:  # noqa: BLE001 - an error stays where it happens at launch
            return fn
        if not isinstance(value, _Blocks):
            value.flags.writeable = False
            return lambda st: value
        return fn

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

        # (cpu._expand, decided now: only a scalar side of a tile or vec result needs axes)
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
        if e.kind in ("eye", "arange"):
            size = e.type.shape[0]
            made = np.eye(size, dtype=dtype) if e.kind == "eye" else np.arange(size)
            made = made.astype(dtype)[None]
            made.flags.writeable = False
            return lambda st: made
        value = self.expr(e.value)
        shape_tail = e.type.shape
        to_kind = e.type.kind

        def fill(st):
            v = value(st)
            shape = (v.shape[0], *shape_tail)
            return np.broadcast_to(cpu._expand(v, "scalar", to_kind), shape).astype(dtype)

        return fill

    def tile_index(self, node, value, limit, shape):
        """An index into a side of ``limit`` elements of a ``shape`` tile or vec, checked
        as the interpreter checks it (and clamped, for the lanes that do not count)."""
        fn = self.expr(value)
        check = self.checker(tile_index_message(shape), node)

        def index(st):
            i = fn(st)
            if i.shape == (1,) and i.dtype != np.uint64:  # the same everywhere: Python ints
                k = int(i[0])
                if not 0 <= k < limit:
                    check(st, np.ones(1, bool))
                    k = min(max(k, 0), limit - 1)
                return np.array([k], np.int64)
            i = i.astype(np.int64, copy=False)
            check(st, (i < 0) | (i >= limit))
            return _clamp(i, 0, limit - 1)

        return index

    def e_TileGet(self, e):
        base = self.expr(e.base)
        shape = e.base.type.shape
        i_fn = self.tile_index(e, e.i, shape[0], shape)
        j_fn = self.tile_index(e, e.j, shape[1], shape) if e.j is not None else None

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
        shape = e.base.type.shape
        i_fn = self.tile_index(e, e.i, shape[0], shape)
        value = self.expr(e.value)
        j_fn = self.tile_index(e, e.j, shape[1], shape) if e.j is not None else None

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

    def e_Scan(self, e):
        operand = self.expr(e.operand)
        op, axis = e.op, e.axis

        def scan(st):
            value = operand(st)
            if isinstance(value, _Blocks):
                value = value.tiles(st.grid)
            return cpu.scan_values(op, value, axis)

        return scan

    def e_IndexReduce(self, e):
        operand = self.expr(e.operand)
        op, axis = e.op, e.axis

        def index_reduce(st):
            value = operand(st)
            if isinstance(value, _Blocks):
                if axis is not None:  # along one axis of each tile: on the grid itself
                    return _reduce_blocks(st, value, op, axis, index=True)
                value = value.tiles(st.grid)
            return cpu.index_reduce_values(op, value, axis)

        return index_reduce

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
                depth = a.a4.shape[3]
                x = np.ascontiguousarray(a.a4.reshape(-1, depth))
                y = np.ascontiguousarray(b.a4.reshape(depth, -1))
                if cpu.is_narrow_float(x.dtype):
                    x, y = x.astype(np.float32), y.astype(np.float32)
                product = _strip_product(x, y, a.a4.shape[1]).astype(out, copy=False)
                result = product.reshape(a.a4.shape[0], a.a4.shape[1], b.a4.shape[2], -1)
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
        shape = e.type.shape
        if self.is_ones(e.v):  # outer(u, ones): u down the columns, as a view (u * 1 == u)

            def columns(st):
                x = u(st)
                return np.broadcast_to(x[:, :, None], (x.shape[0], *shape))

            return columns
        if self.is_ones(e.u):

            def rows(st):
                y = v(st)
                return np.broadcast_to(y[:, None, :], (y.shape[0], *shape))

            return rows
        return lambda st: u(st)[:, :, None] * v(st)[:, None, :]

    def is_ones(self, e):
        """Whether ``e`` is a vec of ones of the result's dtype known now (a constant, or
        a top-level variable assigned one once)."""
        if isinstance(e, ir.Var):
            value = self.const_vars.get(e.name)
        elif self.constant(e):
            with np.errstate(all="ignore"):
                try:
                    value = self.expr(e)(None)
                except Exception:  # noqa: BLE001
                    return False
        else:
            return False
        return (
            isinstance(value, np.ndarray)
            and value.dtype.kind in "fiu"
            and value.shape[0] == 1
            and bool((value == 1).all())
        )

    def e_RowCol(self, e):
        operand = self.expr(e.operand)
        is_row = e.which == "row"
        side = e.operand.type.shape[0 if is_row else 1]
        index_fn = self.tile_index(e, e.index, side, (side,))

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
        shape = e.type.shape
        return lambda st: cpu._lanes_last(
            cpu._cholesky, _tiles(st, operand(st)), eps(st), shape=shape
        )

    def e_SolveTriangular(self, e):
        lower, rhs = self.expr(e.lower), self.expr(e.rhs)
        shape = e.type.shape

        def solve(st):
            factor = _tiles(st, lower(st))
            b = _tiles(st, rhs(st))
            return cpu._lanes_last(cpu._solve_lower, factor, b, shape=shape, dtype=b.dtype)

        return solve

    def e_Reshape(self, e):
        operand = self.expr(e.operand)
        shape = e.type.shape

        def reshape(st):
            value = _tiles(st, operand(st))
            return value.reshape(value.shape[0], *shape)

        return reshape

    def e_Broadcast(self, e):
        operand = self.expr(e.operand)
        shape = e.type.shape

        def broadcast(st):  # NumPy's rule: missing leading sides are 1 (a read-only view)
            value = _tiles(st, operand(st))
            extra = len(shape) - (value.ndim - 1)
            value = value.reshape(value.shape[0], *(1,) * extra, *value.shape[1:])
            return np.broadcast_to(value, (value.shape[0], *shape))

        return broadcast


# OpenBLAS runs a GEMM of at most 65536 * 4 multiply-adds on one thread: the strips' product
# goes in row bands of that size, since a thread team for each K step of 16 costs more than
# the arithmetic wherever cores are shared (measured: 7× slower on a busy 2-core machine).
_BAND_MULTIPLY_ADDS = 65536 * 4


def _strip_product(x, y, rows=16):
    """``x @ y`` for a block row strip ``x`` (R×K) and column strip ``y`` (K×C), in bands
    of whole blocks of ``rows`` rows."""
    m, n, depth = x.shape[0], y.shape[1], x.shape[1]
    band = max(rows, _BAND_MULTIPLY_ADDS // (depth * max(n, 1)) // rows * rows)
    if band >= m:
        return np.matmul(x, y)
    out = np.empty((m, n), np.result_type(x, y))
    for start in range(0, m, band):
        np.matmul(x[start : start + band], y, out=out[start : start + band])
    return out


def _add_tiles(result, value, ra, grid, shape):
    """``result += value`` for ``result`` a grid of ``shape`` blocks as a 2-D array and
    ``value`` a tile (the same in every program, or each program's): a tile the same
    everywhere is added as a scalar or as one band of block rows, not as a 4-D broadcast
    (loops of N elements)."""
    m, n = shape
    if isinstance(value, np.ndarray) and value.shape[0] == 1:
        tile = value[0]
        first = tile[0, 0]
        if (tile == first).all():
            result += first
        else:
            bands = result.reshape(-1, m, result.shape[1])
            bands += np.tile(tile, (1, result.shape[1] // n))
        return
    blocks = result.reshape(result.shape[0] // m, m, result.shape[1] // n, n)
    blocks += _as_blocks(value, "tile", ra, grid)


def _tile_view(array, b, r0, dr, c0, dc, shape, writeable=False):
    """The ``(lanes, M, N)`` view of slab ``b`` of ``array`` whose lane ``p`` is the tile
    at ``(r0 + p * dr, c0 + p * dc)`` (lanes may overlap: read such a view, or write it
    where they do not). Made over the array's own buffer where it owns one (a few
    times cheaper than ``as_strided``)."""
    sb, s0, s1 = array.strides
    strides = (dr * s0 + dc * s1, s0, s1)
    view = _over_buffer(array, shape, b * sb + r0 * s0 + c0 * s1, strides)
    if view is not None:
        return view
    return np.lib.stride_tricks.as_strided(array[b, r0:, c0:], shape, strides, writeable=writeable)


def _over_buffer(array, shape, offset, strides):
    """The view of ``shape`` and ``strides`` that starts ``offset`` bytes past
    ``array[0, 0, 0]``, made over ``array``'s own memory where it is C-contiguous (a
    few times cheaper than ``as_strided``); None elsewhere. (Over ``array`` itself, not
    the array that owns the memory: a view such as ``base[5:]`` starts inside it.)"""
    if array.flags.c_contiguous:
        return np.ndarray(shape, array.dtype, array, offset, strides)
    return None


def _grid_view(array, b, r0, c0, steps, shape, writeable=False):
    """The ``(gy, gx, M, N)`` view of slab ``b`` of ``array`` whose ``[y, x]`` is the
    tile at ``(r0, c0)`` moved ``steps[0]`` (rows, columns) per ``y`` and ``steps[1]``
    per ``x`` (steps not negative; write it only where the tiles do not overlap)."""
    sb, s0, s1 = array.strides
    strides = (*(dr * s0 + dc * s1 for dr, dc in steps), s0, s1)
    view = _over_buffer(array, shape, b * sb + r0 * s0 + c0 * s1, strides)
    if view is not None:
        return view
    return np.lib.stride_tricks.as_strided(array[b, r0:, c0:], shape, strides, writeable=writeable)


def _zero_padded(array, r0, r1, c0, c1):
    """``array[r0:r1, c0:c1]`` with 0 where the window leaves the array (bounds may be
    negative or past the end): a view where it does not."""
    rows, cols = array.shape
    if r0 >= 0 and c0 >= 0 and r1 <= rows and c1 <= cols:
        return array[r0:r1, c0:c1]
    out = np.zeros((r1 - r0, c1 - c0), array.dtype)
    rs, re = max(r0, 0), min(r1, rows)
    cs, ce = max(c0, 0), min(c1, cols)
    if rs < re and cs < ce:
        out[rs - r0 : re - r0, cs - c0 : ce - c0] = array[rs:re, cs:ce]
    return out


def _reduce_blocks(st, value, op, axis, index=False):
    """``Reduce`` of every program's tile of a block grid (``index``: ``IndexReduce``,
    along an axis), on the grid itself (no gather of the tiles); the result in program
    order, as the interpreter holds it."""
    a4 = value.full(st.grid)
    axes = (1, 3) if axis is None else (1 if axis == 0 else 3)
    if index:
        out = cpu.index_reduce_along(op, a4, axes)
    else:
        out = cpu.reduce_values(op, a4, axes)
    if axis == 1:  # (block row, M, block col): the vec axis last
        out = out.transpose(0, 2, 1)
    # now (block row, block col[, M or N]); programs run program_id(0) fastest
    if value.ra == 0:
        out = out.T if axis is None else out.transpose(1, 0, 2)
    return np.ascontiguousarray(out).reshape(st.n, *out.shape[2:])


def _spans(st, array, row_axis, col_axis, r_fns, c_fns, shape):
    """The rows and columns of ``array`` a block-grid window of ``shape`` blocks covers,
    per side: ``(start, end, blocks)``; None when a uniform side's bounds are negative
    (the generic path raises the interpreter's error)."""
    out = []
    for axis, (lo, hi), limit, side in (
        (row_axis, r_fns, array.shape[1], shape[0]),
        (col_axis, c_fns, array.shape[2], shape[1]),
    ):
        if axis is not None:
            count = st.grid[axis]
            if count * side >= 2**31:
                return None
            out.append((0, min(limit, count * side), count))
        else:
            start, stop = int(lo(st)[0]), int(hi(st)[0])
            if start < 0 or stop < 0:
                return None
            end = max(start, min(stop, limit, start + side))
            out.append((start, end, 1))
    return out


def _clamp(x, lo, hi):
    """``np.clip(x, lo, hi)`` for an int array and Python int bounds, in two ufunc calls
    (``np.clip``'s own checks cost more than the clamp on a launch's small arrays)."""
    return np.minimum(np.maximum(x, lo), hi)


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
        else x.astype(np.int64, copy=False).reshape(-1)
        for x in (batch, *bounds)
    )


def _varying_names(kernel: ir.KernelIR, facts: _Facts) -> set[str]:
    """The locals whose value may differ between programs: assigned from an expression
    that reads ``program_id`` (or another such local), or under a per-program branch
    (what each expression reads is :class:`_Facts`'s)."""
    varying: set[str] = set()
    reads = facts.reads
    mask = 1  # (program_id, and the bits of the varying locals)

    def reads_varying(e):
        return bool(reads[id(e)] & mask)

    def note(name):
        nonlocal mask
        varying.add(name)
        mask |= facts.bits.get(name, 0)

    def visit(body, masked):
        changed = False
        for s in body:
            if isinstance(s, ir.Assign):
                if s.name not in varying and (masked or reads_varying(s.value)):
                    note(s.name)
                    changed = True
            elif isinstance(s, ir.If):
                inner = masked or reads_varying(s.cond)
                changed |= visit(s.then_body, inner)
                changed |= visit(s.else_body, inner)
            elif isinstance(s, ir.For):
                inner = masked or any(reads_varying(x) for x in (s.start, s.stop, s.step))
                if inner and s.var not in varying:
                    note(s.var)
                    changed = True
                changed |= visit(s.body, inner)
            elif isinstance(s, ir.While):
                changed |= visit(s.body, masked or reads_varying(s.cond))
        return changed

    while visit(kernel.body, False):
        pass
    return varying
