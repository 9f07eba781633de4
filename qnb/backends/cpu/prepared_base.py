"""The prepared path's parts below the compiler: its state, binder, block grids (:class:`_Blocks`),
the one walk of facts (:class:`_Facts`) and the helpers the strategies share.
"""

from __future__ import annotations

import numpy as np

from qnb import ir
from qnb.backends.base import ONE_PROGRAM
from qnb.backends.cpu import lanes
from qnb.backends.cpu.interpreter import _bind
from qnb.backends.cpu.lanes import _Blocks
from qnb.backends.cpu.semantics import index_reduce_along, reduce_values

_LEAVES = (ir.Const, ir.Var, ir.ProgramId, ir.ArrayDim)


_FOLDABLE = (ir.Const, ir.Unary, ir.Binary, ir.Cast, ir.TileFill, ir.Select, ir.Transpose)


class _Unsupported(Exception):
    """The kernel needs the interpreter (see the module docstring)."""


class _Break(Exception):
    pass


class _Continue(Exception):
    pass


_ONE_PROGRAM = ONE_PROGRAM


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
    """The index ``_expand`` applies to a ``kind`` value in a ``to_kind`` result (a
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
        "arrays", "shapes", "env", "n", "pid", "grid", "mask", "aliased", "whole", "run0", "first",
        "exits",
    )  # fmt: skip

    def __init__(self, bound, grid, start, count, fresh, pid, aliases=True):
        self.arrays, self.shapes, scalars = bound
        self.n = count
        self.first = start  # (the flat index of the chunk's first program)
        self.mask = self.exits = None  # (exits: prepared_lanes.LaneExits, innermost last)
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
    its grid is fixed here, in class attributes, so a launch sets six slots, not twelve."""

    __slots__ = ()
    n, grid, whole, run0, first = 1, _ONE_PROGRAM, True, True, 0

    def __init__(self, arrays, shapes, env, aliased):
        self.arrays, self.shapes, self.env, self.aliased = arrays, shapes, env, aliased
        self.mask = self.exits = None


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
    """``bind(args, stored) -> (arrays, shapes, scalars)`` as :func:`_bind` binds a
    launch (3-D views of the arrays, their own shapes, scalars as one-element arrays), in
    a few steps for the common call (NumPy arrays); any other goes to ``_bind``,
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
        arrays, scalars = _bind(kernel, args, stored)
        return (
            {name: a for name, (a, _) in arrays.items()},
            {name: s for name, (_, s) in arrays.items()},
            scalars,
        )

    if len(plan) == 1 and plan[0][1]:  # one array parameter: the common call, unrolled
        ((only, _, _),) = plan

        def bind_one(args, stored):
            if len(args) == 1:
                value = args[0]
                if type(value) is np.ndarray and (not stored or value.flags.writeable):
                    shape = value.shape
                    ndim = len(shape)
                    if ndim == 2:
                        if shape[0] < limit and shape[1] < limit:
                            return {only: value[None]}, {only: shape}, {}
                    elif ndim == 1:
                        if shape[0] < limit:
                            return {only: value[None, None]}, {only: shape}, {}
                    elif ndim == 3 and max(shape) < limit:
                        return {only: value}, {only: shape}, {}
            return slow(args, stored)

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


class _Facts:
    """What the compiler asks about the whole kernel, from one walk of its IR (a warm
    start prepares every kernel it loads, so the IR is walked once, not once a question):

    ``assign_count`` (name -> assignments, a loop's variable counting 2), ``loaded`` and
    ``stored`` (as :func:`ir.array_uses`), ``holds_tiles`` (:func:`ir.holds_tiles`),
    ``largest`` (the most elements of a value) and ``chunk`` (the programs a chunk runs,
    as :func:`lanes.chunk_programs` decides for the interpreter: the same lock step),
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
            if node.result is not None:  # (never one constant assignment)
                self.assign_count[node.result] = self.assign_count.get(node.result, 0) + 2
        for child in ir.children(node):
            if isinstance(child, ir.Stmt):
                self.statement(child, loops)
            else:
                self.expression(child)
        if kind is ir.For:
            loops.pop()

    @property
    def chunk(self) -> int:
        return lanes.chunk_of(self.largest, self.holds_tiles)

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
        out = index_reduce_along(op, a4, axes)
    else:
        out = reduce_values(op, a4, axes)
    if axis == 1:  # (block row, M, block col): the vec axis last
        out = out.transpose(0, 2, 1)
    # now (block row, block col[, M or N]); programs run program_id(0) fastest
    if value.ra == 0:
        out = out.T if axis is None else out.transpose(1, 0, 2)
    return np.ascontiguousarray(out).reshape(st.n, *out.shape[2:])


def spare_buffer(pool: list, shape: tuple, dtype) -> np.ndarray:
    """A buffer of ``shape`` from ``pool`` (the buffers a closure keeps between launches;
    the caller gives it back when done), or a new one where the pool has none of it.
    Taken, not shared: a launch on another thread meanwhile gets its own."""
    try:
        buffer = pool.pop()
    except IndexError:
        return np.empty(shape, dtype)
    return buffer if buffer.shape == shape else np.empty(shape, dtype)


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
    return tuple(out)


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


def exits_per_program(body, is_varying, masked=False) -> bool:
    """Whether ``body`` (a loop's) has a ``break``/``continue`` of its own under a branch
    some programs take and others not (``is_varying(cond)``): after it, the loop's
    statements run for some programs only, and its counter ends where each program left."""
    for s in body:
        if isinstance(s, (ir.Break, ir.Continue)) and masked:
            return True
        if isinstance(s, ir.If):
            inner = masked or is_varying(s.cond)
            if exits_per_program(s.then_body, is_varying, inner) or exits_per_program(
                s.else_body, is_varying, inner
            ):
                return True
    return False  # (a nested loop's exits are its own)


def _varying_names(kernel: ir.KernelIR, facts: _Facts, seed=()) -> set[str]:
    """The locals whose value may differ between programs: assigned from an expression
    that reads ``program_id`` (or another such local), under a per-program branch, or in
    a loop some programs leave before others (a per-program bound, condition or exit;
    what each expression reads is :class:`_Facts`'s); ``seed``: variables that already
    do (a batched loop's, from around it)."""
    varying: set[str] = set(seed)
    reads = facts.reads
    mask = facts.mask(varying)  # (program_id, and the bits of the varying locals)

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
                inner = inner or exits_per_program(s.body, reads_varying)
                if inner and s.var not in varying:
                    note(s.var)
                    changed = True
                changed |= visit(s.body, inner)
            elif isinstance(s, ir.While):
                inner = masked or reads_varying(s.cond) or exits_per_program(s.body, reads_varying)
                changed |= visit(s.body, inner)
            elif isinstance(s, ir.Atomic) and s.result is not None and s.result not in varying:
                note(s.result)  # (each program reads the element as it was before its turn)
                changed = True
        return changed

    while visit(kernel.body, False):
        pass
    return varying
