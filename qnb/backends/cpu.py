"""The "cpu" backend: NumPy executes the IR. It is the executable definition of every op.

Programs run *together*: every value carries a leading program axis (length P, or 1
for a value that is the same in every program), so one Python-level step of the
interpreter does the work of all P programs. Control flow that differs between
programs runs under a lane mask (like SIMD hardware): both sides of an ``if`` run,
each on its own lanes; a loop runs until no lane is left in it; ``break`` and
``continue`` retire lanes. Where every lane agrees (a loop bound from ``arr.shape``,
a static flag), the executor takes the plain path.

Bounds are checked: a scalar index outside an array, a tile index outside the tile's
shape or a negative window bound raises ``QnbIndexError`` at the kernel's own line.
"""

from __future__ import annotations

import numpy as np

from qnb import ir
from qnb.backends import cpu_atomics
from qnb.backends import cpu_semantics as semantics
from qnb.backends.base import (
    DeviceArray,
    argument_error,
    check_dims,
    require_writable,
)
from qnb.backends.cpu_semantics import window_masks as _masks
from qnb.dtypes import i32
from qnb.errors import BackendError, QnbIndexError, QnbTypeError
from qnb.frontend.checks import tile_index_message

_ARANGE = np.arange(16, dtype=np.int64)
_EYE = {}
# Programs executed together at most (bounds the memory of one tile value: 64 MiB at f32);
# a kernel with larger tiles runs fewer at once (CHUNK_ELEMENTS elements per value).
CHUNK = 65536
CHUNK_ELEMENTS = CHUNK * 256


def _arange(n: int) -> np.ndarray:
    return _ARANGE if n == 16 else np.arange(n, dtype=np.int64)


def chunk_programs(kernel: ir.KernelIR) -> int:
    """How many programs run together: CHUNK, fewer where a value is larger than 16×16."""
    largest = 256
    for t in kernel.locals.values():
        largest = max(largest, t.size)
    for node in ir.walk_body(kernel.body):
        typ = getattr(node, "type", None)
        if isinstance(typ, ir.Type) and typ.kind in ("tile", "vec"):
            largest = max(largest, typ.size)
    return chunk_for(largest)


def out_of_memory(kernel_name: str, grid) -> BackendError:
    """The error for a launch whose values do not fit in host memory (NumPy's
    ``MemoryError``), naming the kernel and the grid."""
    programs = grid[0] * grid[1] * grid[2]
    return BackendError(
        f"the cpu ran out of host memory running kernel {kernel_name!r} over "
        f"{programs:,} programs (grid {tuple(grid)}): fewer programs per launch, or "
        "smaller tiles, fit"
    )


def chunk_for(largest: int) -> int:
    """How many programs run together when the largest value holds ``largest`` elements
    (at least 256: a 16×16 tile)."""
    return max(1, min(CHUNK, CHUNK_ELEMENTS // largest))


class CpuArray(DeviceArray):
    """``qnb.to_device(x)`` on the cpu backend: a private host copy."""

    backend_name = "cpu"

    def __init__(self, array: np.ndarray):
        super().__init__(array.shape, array.dtype)
        self.host = np.ascontiguousarray(array).copy()

    def numpy(self) -> np.ndarray:
        return self.host.copy()


def run(
    kernel: ir.KernelIR, grid, args, stored=None, chunk=None, observer=None, order=None
) -> None:
    """Execute ``kernel`` over ``grid`` with ``args`` (in ``kernel.params`` order),
    ``chunk`` programs at a time (default: :func:`chunk_programs`); ``observer`` (an
    :class:`Observer`) watches each chunk's run. ``order`` "forward" or "reverse": one
    program at a time, in grid order or its reverse (``qnb.check`` compares the two)."""
    if order not in (None, "forward", "reverse"):
        raise ValueError(f"order is None, 'forward' or 'reverse', not {order!r}")
    arrays, scalars = _bind(kernel, args, stored)
    total = grid[0] * grid[1] * grid[2]
    chunk = 1 if order else chunk or chunk_programs(kernel)
    observer = observer or UNWATCHED
    starts = range(0, total, chunk)
    try:
        for start in reversed(starts) if order == "reverse" else starts:
            count = min(chunk, total - start)
            _Executor(kernel, grid, arrays, scalars, start, count, observer).run()
    except MemoryError:
        raise out_of_memory(kernel.name, grid) from None


def _bind(kernel, args, stored=None):
    """The arrays (3-D views, with their own shapes) and scalars of a launch; refuses a
    read-only array among the ``stored`` ones (all the kernel stores to, by default)."""
    arrays, scalars = {}, {}
    for param, value in zip(kernel.params, args):
        if param.type.kind == "array":
            host = value.host if isinstance(value, CpuArray) else value
            if not isinstance(host, np.ndarray):
                raise argument_error(
                    QnbTypeError,
                    param.name,
                    f"the cpu backend takes NumPy arrays; {param.name!r} is a "
                    f"{type(value).__name__} (use .numpy() or qnb.to_device on cpu)",
                )
            check_dims(param.name, host.shape)
            if type(host) is not np.ndarray:  # np.matrix, a memmap...: the same memory
                host = host.view(np.ndarray)
            arrays[param.name] = (_as_3d(host), host.shape)
        else:
            scalars[param.name] = np.array([value], dtype=param.type.dtype.numpy)
    for name in ir.array_uses(kernel)[1] if stored is None else stored:
        require_writable(name, arrays[name][0])
    return arrays, scalars


def _as_3d(array: np.ndarray) -> np.ndarray:
    if array.ndim == 3:
        return array
    if array.ndim == 2:
        return array[None]
    return array[None, None]


def _expand(value, kind, to_kind):
    """Give a per-program value the trailing axes of ``to_kind`` for broadcasting."""
    if kind == to_kind or kind != "scalar":
        return value
    return value[:, None, None] if to_kind == "tile" else value[:, None]


def _lanes(mask, n):
    return np.ones(n, bool) if mask is None else mask


def _move_blocks(dst: np.ndarray, src: np.ndarray) -> None:
    """``dst[...] = src`` for two 4-D block views whose N-element rows are contiguous:
    each row moves as one N-element unit, which is what makes a block gather or
    scatter cost about a memcpy rather than a strided element loop."""
    if dst.dtype == src.dtype and dst.strides[-1] == src.strides[-1] == dst.itemsize:
        row = np.dtype((np.void, dst.shape[-1] * dst.itemsize))
        np.copyto(dst.view(row), src.view(row))
    else:
        dst[...] = src


class _GridTiles:
    """Tiles loaded by programs that tile an array in launch order, not yet gathered:
    ``view`` is a strided 4-D view of the array whose C-order blocks are the programs'
    tiles. A store with the same tiling moves them block for block; any other use
    gathers them into the usual ``(programs, M, N)`` value."""

    __slots__ = ("view",)

    def __init__(self, view: np.ndarray):
        self.view = view

    def gather(self) -> np.ndarray:
        out = np.empty(self.view.shape, self.view.dtype)
        _move_blocks(out, self.view)
        return out.reshape(-1, *self.view.shape[-2:])


def _gathered(value):
    return value.gather() if isinstance(value, _GridTiles) else value


class _Loop:
    __slots__ = ("broken", "continued")

    def __init__(self, n):
        self.broken = np.zeros(n, bool)
        self.continued = np.zeros(n, bool)


_BINARY = {
    "add": np.add,
    "sub": np.subtract,
    "mul": np.multiply,
    "div": np.true_divide,
    "floordiv": np.floor_divide,
    "mod": np.mod,
    "max": np.maximum,
    "min": np.minimum,
    "pow": lambda a, b: _int_power(a, b) if a.dtype.kind in "iu" else np.power(a, b),
    "lt": np.less,
    "le": np.less_equal,
    "gt": np.greater,
    "ge": np.greater_equal,
    "eq": np.equal,
    "ne": np.not_equal,
    "and": np.bitwise_and,  # on bools, the logical and
    "or": np.bitwise_or,
    "xor": np.bitwise_xor,
    "shl": np.left_shift,  # NumPy's shifts define every count (see ir.SHIFT_OPS)
    "shr": np.right_shift,
}


def _int_power(a, b):
    """i32 ** i32, wrapping; a negative exponent gives the true power truncated toward zero
    (1 for a base of 1, ±1 for -1, else 0; 0 for a base of 0, as ``x // 0`` is)."""
    a, b = np.broadcast_arrays(a, b)
    with np.errstate(over="ignore"):
        result = np.power(a, np.maximum(b, 0))
    negative = b < 0
    if negative.any():
        unit = np.where(b % 2 == 1, a, 1)  # (-1) ** odd == -1
        result = np.where(negative, np.where(np.abs(a) == 1, unit, 0), result)
    return result


_UNARY = {
    "neg": np.negative,
    "not": np.logical_not,
    "abs": np.abs,
    "exp": np.exp,
    "log": np.log,
    "sqrt": np.sqrt,
    "invert": np.invert,
    "exp2": np.exp2,
    "log2": np.log2,
    "sin": np.sin,
    "cos": np.cos,
    "tanh": np.tanh,
    "floor": np.floor,
    "ceil": np.ceil,
}
_REDUCE = {"sum": np.sum, "max": np.max, "min": np.min, "prod": np.prod}


def is_narrow_float(dtype) -> bool:
    """f16 and bf16: sums and products accumulate in f32 and round once."""
    return dtype.itemsize == 2 and dtype.kind != "i"


def cast_values(value: np.ndarray, target) -> np.ndarray:
    """``Cast`` of ``value`` to the qnb dtype ``target``."""
    if target is i32 and (value.dtype.kind == "f" or value.dtype.name == "bfloat16"):
        # Toward zero, saturating, NaN → 0; clipped in f64, where 2**31 - 1 is exact.
        value = np.nan_to_num(value.astype(np.float64), nan=0.0)
        value = np.clip(np.trunc(value), -(2**31), 2**31 - 1)
    return value.astype(target.numpy)


def scan_values(op: str, value: np.ndarray, axis) -> np.ndarray:
    """``cumsum``/``cumprod`` of each program's value (``(n, *shape)``) along ``axis``
    (None: a vec's one axis), inclusive, in order from the line's start: NumPy's
    ``ufunc.accumulate``. f16 and bf16 accumulate in f32 and round each element; i32
    wraps."""
    axis = 1 if axis is None else axis + 1
    out = value.dtype
    if is_narrow_float(out):
        value = value.astype(np.float32)
    ufunc = np.add if op == "sum" else np.multiply
    with np.errstate(over="ignore", invalid="ignore"):
        return ufunc.accumulate(value, axis=axis).astype(out, copy=False)


def index_reduce_values(op: str, value: np.ndarray, axis) -> np.ndarray:
    """``argmax``/``argmin`` of each program's value (``(n, *shape)``) along ``axis``
    (None: the flat C-order index), as i32."""
    if axis is None:
        return index_reduce_along(op, value.reshape(value.shape[0], -1), 1)
    return index_reduce_along(op, value, axis + 1)


def index_reduce_along(op: str, value: np.ndarray, axis: int) -> np.ndarray:
    """NumPy's first index of the extreme along one axis of ``value``, a NaN counting as
    the extreme, as i32. f16 and bf16 compare as the f32 values they hold (exact)."""
    if is_narrow_float(value.dtype):
        value = value.astype(np.float32)
    fn = np.argmax if op == "argmax" else np.argmin
    return fn(value, axis=axis).astype(np.int32)


def reduce_values(op: str, value: np.ndarray, axes) -> np.ndarray:
    """``Reduce`` ``op`` of ``value`` over ``axes``: what a reduction means on the cpu,
    for both executors (the prepared path may hold a tile as a strided, overlapping or
    broadcast view where the interpreter holds a copy). NumPy's order of operands
    follows the memory layout (pairwise along a contiguous run, row after row across
    a strided one), so the values are reduced in C order: the same bits whatever
    layout they come in."""
    fn = _REDUCE[op]
    value = np.ascontiguousarray(value)
    if op in ("sum", "prod"):
        if is_narrow_float(value.dtype):
            # accumulate in f32, round once (as NumPy does for contiguous f16 sums;
            # every backend does so for every axis)
            return fn(value, axis=axes, dtype=np.float32).astype(value.dtype)
        return fn(value, axis=axes, dtype=value.dtype)
    return fn(value, axis=axes)


class Observer:
    """What the executor tells whoever watches it run: the statements that assign and
    store, and the memory each statement touches. Every method is a no-op here, so an
    unwatched run pays one call per event and computes nothing for it. The trace
    recorder (``qnb.backends.cpu_trace.Recorder``) is the observer that builds a
    ``qnb.Trace``.

    An observer reads the run through the executor it is given at ``start``: its
    ``kernel``, ``n`` (lanes), ``active_lanes()``, ``program(lane)``, ``variable(name)``
    and ``array(param)``. Memory is reported in the executor's own terms, per lane (arrays of
    one entry where every lane agrees): ``batch`` is the slab of the 3-D view, rows and
    columns index its last two axes, and ``write`` marks a store's own window."""

    # True: every value a statement produces is computed in full before the next one
    # runs (a launch-order tile load is not left deferred), so the observer sees it.
    sees_every_value = False

    def start(self, executor: _Executor) -> None:
        """A run of programs begins: one per chunk of programs (:func:`run`); the trace
        runs all its programs in one."""

    def assign_begins(self, stmt: ir.Assign) -> None:
        """``stmt`` is about to evaluate its value (the variables hold what it reads)."""

    def assigned(self, stmt: ir.Assign, value: np.ndarray) -> None:
        """``stmt`` assigned ``value`` (per lane) to its variable."""

    def store_begins(self, stmt) -> None:
        """The store ``stmt`` (``StoreWindow``, ``VecStore``, ``ArrayStore``) begins."""

    def stored(self, stmt, value: np.ndarray) -> None:
        """The store ``stmt`` wrote ``value`` (per lane) to its array."""

    def window(self, param, batch, r0, c0, row_end, col_end, shape, write) -> None:
        """An M×N tile window of ``param``: rows ``r0 ..`` and columns ``c0 ..``, of which
        those below ``row_end``/``col_end`` exist (already clamped to the array)."""

    def line(self, param, batch, start, end, fixed, axis, size, write) -> None:
        """A vector of ``size`` elements from ``start``, of which those below ``end`` exist:
        along a 1-D array (``fixed`` None), a row (``axis`` 1: ``fixed`` is the row) or a
        column (``fixed`` is the column)."""

    def element(self, param, batch, row, col, write) -> None:
        """One element per lane (row 0 for a 1-D array)."""

    def atomic(self, stmt, param, batch, rows, cols, ok) -> None:
        """The atomic ``stmt`` updated the elements ``[batch, rows, cols]`` of ``param``
        where ``ok`` (each ``(lanes, *shape)``). Not a read nor a store: ``qnb.check``
        ignores it."""


# The observer of every run that nobody watches.
UNWATCHED = Observer()


class _Executor:
    def __init__(self, kernel, grid, arrays, scalars, start, count, observer=UNWATCHED):
        self.kernel = kernel
        self.arrays = arrays
        self.n = count
        self.mask = None  # None: every lane active
        self.loops: list[_Loop] = []
        self.observer = observer
        self.defer_loads = not observer.sees_every_value
        flat = np.arange(start, start + count, dtype=np.int64)
        gx, gy, _ = grid
        self.pid = [
            (flat % gx).astype(np.int32),
            ((flat // gx) % gy).astype(np.int32),
            (flat // (gx * gy)).astype(np.int32),
        ]
        self.grid = [np.array([g], np.int32) for g in grid]
        self.env = dict(scalars)
        # Variables whose value is a view of (or defers to) a kernel array: ``detach``
        # copies them before a store that could change what they hold (tiles are values).
        self.aliased: set[str] = set()
        self.array_list = [a for a, _ in arrays.values()]
        for name, t in kernel.locals.items():
            if name in scalars:  # a scalar parameter the body reassigns starts as passed
                self.env[name] = scalars[name].astype(t.dtype.numpy).reshape(1, *t.shape)
            else:
                self.env[name] = np.zeros((1, *t.shape), t.dtype.numpy)
        self.consts = {}

    # ------------------------------------------------------------------ what an observer reads

    def active_lanes(self) -> np.ndarray:
        """The lanes the current statement runs in."""
        return np.nonzero(_lanes(self.mask, self.n))[0]

    def program(self, lane) -> tuple[int, int, int]:
        """The program id of ``lane``."""
        return tuple(int(p[lane]) for p in self.pid)

    def variable(self, name: str) -> np.ndarray | None:
        """A copy of variable ``name`` as it is now (per lane); None for a name not bound."""
        value = self.env.get(name)
        return None if value is None else np.array(_gathered(value))

    def array(self, param: str) -> np.ndarray:
        """Array parameter ``param`` as the executor addresses it (a 3-D view)."""
        return self.arrays[param][0]

    # ------------------------------------------------------------------ statements

    def run(self):
        self.observer.start(self)
        with np.errstate(all="ignore"):
            self.block(self.kernel.body)

    def active(self) -> bool:
        return self.mask is None or bool(self.mask.any())

    def block(self, body):
        for stmt in body:
            if not self.active():
                return
            getattr(self, "s_" + type(stmt).__name__)(stmt)

    def assign(self, name, value, kind):
        if self.mask is None:
            self.env[name] = value
            if isinstance(value, _GridTiles) or (
                value.base is not None
                and any(np.may_share_memory(value, a) for a in self.array_list)
            ):
                self.aliased.add(name)
            else:
                self.aliased.discard(name)
            return
        old = self.read(name)
        self.env[name] = np.where(_expand(self.mask, "scalar", kind), value, old)
        self.aliased.discard(name)

    def read(self, name):
        value = self.env[name]
        if isinstance(value, _GridTiles):
            value = self.env[name] = value.gather()
            self.aliased.discard(name)
        return value

    def detach(self, array):
        """Before a store to ``array``: copy the variables that are views of it."""
        for name in list(self.aliased):
            value = self.env[name]
            held = value.view if isinstance(value, _GridTiles) else value
            if np.may_share_memory(held, array):
                self.env[name] = np.array(_gathered(value))
                self.aliased.discard(name)

    def value_of(self, e):
        """``ev(e)``, except that a launch-order tile load (or a variable holding one)
        may stay a ``_GridTiles``: for an assignment, and for a store, which can move it
        block for block."""
        if self.defer_loads:
            if isinstance(e, ir.LoadWindow):
                return self.e_LoadWindow(e, defer=True)
            if isinstance(e, ir.Var):
                return self.env[e.name]
        return self.ev(e)

    def s_Assign(self, s):
        self.observer.assign_begins(s)
        # Unmasked, a launch-order tile load may stay deferred (masking needs its values).
        value = self.value_of(s.value) if self.mask is None else self.ev(s.value)
        if isinstance(value, _GridTiles):
            self.assign(s.name, value, "tile")
            return
        if value.dtype != s.value.type.dtype.numpy:
            value = value.astype(s.value.type.dtype.numpy)
        self.assign(s.name, value, s.value.type.kind)
        self.observer.assigned(s, value)

    def restore(self, saved):
        """The mask after a nested block: the saved lanes minus those that left the loop."""
        if not self.loops:
            self.mask = saved
            return
        loop = self.loops[-1]
        gone = loop.broken | loop.continued
        self.mask = _lanes(saved, self.n) & ~gone if gone.any() else saved

    def s_If(self, s):
        cond = self.ev(s.cond)
        saved = self.mask
        if cond.shape[0] == 1:
            self.block(s.then_body if cond[0] else s.else_body)
            self.restore(saved)
            return
        lanes = _lanes(saved, self.n)
        taken = lanes & cond
        if taken.any():
            self.mask = taken
            self.block(s.then_body)
            self.restore(saved)
        other = _lanes(self.mask, self.n) & ~cond
        if s.else_body and other.any():
            self.mask = other
            self.block(s.else_body)
        self.restore(saved)

    def s_Break(self, s):
        self.loops[-1].broken |= _lanes(self.mask, self.n)
        self.mask = np.zeros(self.n, bool)

    def s_Continue(self, s):
        self.loops[-1].continued |= _lanes(self.mask, self.n)
        self.mask = np.zeros(self.n, bool)

    def s_For(self, s):
        start, stop, step = self.ev(s.start), self.ev(s.stop), self.ev(s.step)
        saved = self.mask
        loop = _Loop(self.n)
        self.loops.append(loop)
        try:
            if start.shape[0] == 1 and stop.shape[0] == 1 and step.shape[0] == 1:
                if step[0] == 0:
                    raise self.index_error("range() step must not be zero", s)
                for i in range(int(start[0]), int(stop[0]), int(step[0])):
                    lanes = _lanes(saved, self.n) & ~loop.broken if loop.broken.any() else saved
                    if lanes is not None and not lanes.any():
                        break
                    loop.continued[:] = False
                    self.mask = lanes
                    self.assign(s.var, np.array([i], np.int32), "scalar")
                    self.block(s.body)
                return
            if (step == 0).any():
                raise self.index_error("range() step must not be zero", s)
            i = np.broadcast_to(start, (self.n,)).astype(np.int32)
            while True:
                inside = np.where(step > 0, i < stop, i > stop)
                lanes = _lanes(saved, self.n) & inside & ~loop.broken
                if not lanes.any():
                    break
                loop.continued[:] = False
                self.mask = lanes
                self.assign(s.var, i, "scalar")
                self.block(s.body)
                i = (i + step).astype(np.int32)
        finally:
            self.loops.pop()
            self.mask = saved

    def s_While(self, s):
        saved = self.mask
        loop = _Loop(self.n)
        self.loops.append(loop)
        try:
            while True:
                self.mask = _lanes(saved, self.n) & ~loop.broken
                cond = np.broadcast_to(self.ev(s.cond), (self.n,))
                lanes = self.mask & cond
                if not lanes.any():
                    break
                loop.continued[:] = False
                self.mask = lanes
                self.block(s.body)
        finally:
            self.loops.pop()
            self.mask = saved

    # ------------------------------------------------------------------ memory

    def index_error(self, message, node):
        err = QnbIndexError(message)
        err.ir_loc = node.loc
        if node.loc is not None and node.loc.unit < len(self.kernel.units):
            err.ir_unit = self.kernel.units[node.loc.unit].qualname
        return err

    def check(self, bad, message, node):
        """Raise if any *active* lane is out of bounds."""
        if self.mask is None and not bad.any():  # the common case: nothing to find
            return
        bad = np.broadcast_to(bad, (self.n, *bad.shape[1:])) if bad.shape[:1] == (1,) else bad
        if bad.ndim > 1:
            bad = bad.reshape(bad.shape[0], -1).any(axis=1)
        if self.mask is not None:
            bad = bad & self.mask
        if bad.any():
            lane = int(np.argmax(bad))
            raise self.index_error(
                f"{message} (in program {tuple(int(p[lane]) for p in self.pid)})", node
            )

    def view(self, v: ir.ArrayView, node):
        array, _shape = self.arrays[v.param]
        if v.batch is None:
            return array, np.zeros(1, np.int64)
        batch = self.ev(v.batch).astype(np.int64)
        self.check(
            (batch < 0) | (batch >= array.shape[0]),
            semantics.batch_out_of_range(v.param, array.shape[0]),
            node,
        )
        return array, np.clip(batch, 0, array.shape[0] - 1)

    def window(self, node, v, r0, r1, c0, c1, padded=False, shape=(16, 16), write=False):
        """An M×N window per lane: ``(array, batch, r0, c0, row_end, col_end)``, where
        rows ``r0 .. row_end - 1`` and columns ``c0 .. col_end - 1`` exist (clamped to the
        array). Only O(lanes) work: the per-element masks are built by :func:`_masks`
        when a window is not a whole block."""
        array, batch = self.view(v, node)
        r0, r1, c0, c1 = (self.ev(x).astype(np.int64) for x in (r0, r1, c0, c1))
        if not padded:
            self.check(
                (r0 < 0) | (c0 < 0) | (r1 < 0) | (c1 < 0),
                semantics.negative_bound(v.param),
                node,
            )
        row_end = np.minimum(r1, array.shape[1])
        col_end = np.minimum(c1, array.shape[2])
        self.observer.window(v.param, batch, r0, c0, row_end, col_end, shape, write)
        return array, batch, r0, c0, row_end, col_end

    def aligned_blocks(self, array, batch, r0, c0, row_end, col_end, shape=(16, 16)):
        """``(blocks, batch, row_block, col_block)`` when every lane's window is a whole
        aligned M×N block of ``array``; None otherwise."""
        m, n = shape
        if array.shape[1] % m or array.shape[2] % n:
            return None
        if (r0 % m).any() or (c0 % n).any() or (r0 < 0).any() or (c0 < 0).any():
            return None
        if (r0 + m > row_end).any() or (c0 + n > col_end).any():
            return None
        blocks = array.reshape(array.shape[0], array.shape[1] // m, m, array.shape[2] // n, n)
        return blocks, batch, r0 // m, c0 // n

    def grid_blocks(self, blocks, batch, rb, cb):
        """A strided view of ``blocks`` whose k-th M×N block is program k's, when the
        programs tile the array in launch order (the common ``load(x, i*16, j*16)``
        pattern); None otherwise. Reading or writing it moves whole blocks at once."""
        n = self.n
        if n == 1:  # one program: a plain block (slab_blocks) costs less
            return None
        if batch.shape[0] != 1 or rb.shape[0] != n or cb.shape[0] != n or self.pid[0][0] != 0:
            return None
        slab = blocks[int(batch[0])]  # (RB, M, CB, N)
        rows_b, cols_b = slab.shape[0], slab.shape[2]
        if n != rows_b * cols_b:
            return None
        x, y = self.pid[0], self.pid[1]
        if np.array_equal(rb, x) and np.array_equal(cb, y):  # k = cb * RB + rb
            return slab.transpose(2, 0, 1, 3)
        if np.array_equal(rb, y) and np.array_equal(cb, x):  # k = rb * CB + cb
            return slab.transpose(0, 2, 1, 3)
        return None

    def slab_blocks(self, blocks, batch, rb, cb):
        """A view of ``blocks`` holding program k's block at [k], when the lanes read one
        block position of consecutive slabs (``load(x[b], ...)`` with ``b`` the program
        id: batched kernels); None otherwise."""
        n = self.n
        if rb.shape[0] != 1 or cb.shape[0] != 1 or batch.shape[0] != n:
            return None
        first = int(batch[0])
        if n > 1 and not (int(batch[-1]) - first == n - 1 and (np.diff(batch) == 1).all()):
            return None
        return blocks[first : first + n, int(rb[0]), :, int(cb[0]), :]

    def e_LoadWindow(self, e, defer=False):
        """The loaded tiles. A whole-block load may return a *view* of the array (the
        executor copies it before any store that could change it: see ``detach``);
        with ``defer`` a launch-order tiling returns a ``_GridTiles`` instead of
        gathering it (only an assignment asks: the value may go straight to a store)."""
        base = self.ev(e.base)
        shape = e.type.shape
        array, batch, r0, c0, row_end, col_end = self.window(
            e, e.view, e.r0, e.r1, e.c0, e.c1, e.padded, shape
        )
        if array.size == 0:  # nothing to read: every element keeps the base's value
            return np.array(base)
        dtype = e.type.dtype.numpy
        # a load converting to another dtype (``dtype=``) takes the elementwise path
        aligned = (
            self.aligned_blocks(array, batch, r0, c0, row_end, col_end, shape)
            if array.dtype == dtype
            else None
        )
        if aligned is not None:
            blocks, b, rb, cb = aligned
            tiled = self.grid_blocks(blocks, b, rb, cb)
            if tiled is not None:
                grid = _GridTiles(tiled)
                return grid if defer else grid.gather()
            slab = self.slab_blocks(blocks, b, rb, cb)
            if slab is not None:
                return slab
            if b.shape[0] == 1 and (rb.shape[0] == 1 or cb.shape[0] == 1):
                # One block row or column is shared by every lane (a loop over k): copy
                # that strip once, then pick whole blocks from it.
                if cb.shape[0] == 1:
                    strip = np.ascontiguousarray(blocks[b[0], :, :, cb[0], :])
                    return strip[rb]
                strip = np.ascontiguousarray(blocks[b[0], rb[0]].transpose(1, 0, 2))
                return strip[cb]
            return blocks[b, rb, :, cb, :]
        rows, cols, valid = _masks(r0, c0, row_end, col_end, shape)
        return semantics.gather_window(array, batch, rows, cols, valid, dtype, base)

    def s_StoreWindow(self, s):
        self.observer.store_begins(s)
        value = self.value_of(s.value)
        shape = s.value.type.shape
        array, batch, r0, c0, row_end, col_end = self.window(
            s, s.view, s.r0, s.r1, s.c0, s.c1, s.padded, shape, write=True
        )
        self.detach(array)
        if self.mask is None:
            aligned = self.aligned_blocks(array, batch, r0, c0, row_end, col_end, shape)
            if aligned is not None:
                blocks, b, rb, cb = aligned
                tiled = self.grid_blocks(blocks, b, rb, cb)
                if tiled is not None:
                    if isinstance(value, _GridTiles) and value.view.shape == tiled.shape:
                        _move_blocks(tiled, value.view)  # block for block, no gather
                    else:
                        value = _gathered(value)
                        flat = np.broadcast_to(value, (self.n, *shape))
                        _move_blocks(tiled, flat.reshape(tiled.shape))
                    self.observer.stored(s, value)
                    return
                value = _gathered(value)
                slab = self.slab_blocks(blocks, b, rb, cb)
                if slab is not None:
                    slab[...] = value
                else:  # where programs share a block (a race), the last program's wins
                    n = max(value.shape[0], b.shape[0], rb.shape[0], cb.shape[0])
                    b, rb, cb = (np.broadcast_to(x, (n,)) for x in (b, rb, cb))
                    blocks[b, rb, :, cb, :] = np.broadcast_to(value, (n, *shape))
                self.observer.stored(s, value)
                return
        value = _gathered(value)
        rows, cols, valid = _masks(r0, c0, row_end, col_end, shape)
        semantics.scatter_window(array, batch, rows, cols, valid, value, self.mask)
        self.observer.stored(s, value)

    def vec_window(self, node, v, start, stop, col, padded=False, n=16, axis=0, write=False):
        """An N-element line per lane: ``(array, batch, index, ok, fixed)``: ``index`` runs
        along the array's last axis (1-D, or a row: ``axis`` 1) or its rows (a column),
        ``fixed`` is the column (or, for a row, the row) that stays, ``ok`` which elements
        exist inside the window."""
        array, batch = self.view(v, node)
        start, stop = self.ev(start).astype(np.int64), self.ev(stop).astype(np.int64)
        if not padded:
            self.check((start < 0) | (stop < 0), f"negative bound on {v.param!r}", node)
        index = start[:, None] + _arange(n)
        fixed = None
        if col is None or axis == 1:  # 1-D or a row: index runs along the last axis
            limit = array.shape[2]
        else:
            limit = array.shape[1]
        fixed_ok = True
        if col is not None:
            fixed = self.ev(col).astype(np.int64)
            size = array.shape[1] if axis == 1 else array.shape[2]
            outside = (fixed < 0) | (fixed >= size)
            if padded:  # a line outside the array has no elements: none is read or written
                fixed_ok = ~outside[:, None]
            else:
                what = "row" if axis == 1 else "column"
                self.check(outside, f"{what} index out of range for {v.param!r}", node)
        end = np.minimum(stop, limit)
        ok = (index >= 0) & (index < end[:, None]) & fixed_ok
        self.observer.line(v.param, batch, start, end, fixed, axis, n, write)
        return array, batch, index, ok, fixed

    def line_elements(self, array, index, fixed, axis):
        """The (row, column) indices of a line's elements, clamped into the array."""
        if fixed is None:
            return np.zeros((1, 1), np.int64), np.clip(index, 0, array.shape[2] - 1)
        if axis == 1:
            return np.clip(fixed, 0, array.shape[1] - 1)[:, None], np.clip(
                index, 0, array.shape[2] - 1
            )
        return np.clip(index, 0, array.shape[1] - 1), np.clip(fixed, 0, array.shape[2] - 1)[:, None]

    def e_VecLoad(self, e):
        n = e.type.shape[0]
        array, batch, index, ok, fixed = self.vec_window(
            e, e.view, e.start, e.stop, e.col, e.padded, n, e.axis
        )
        dtype = e.type.dtype.numpy
        other = np.zeros((), dtype) if e.other is None else self.ev(e.other)[:, None]
        if array.size == 0:  # nothing to read: every element is other
            return np.broadcast_to(other, ok.shape).astype(dtype)
        rows, cols = self.line_elements(array, index, fixed, e.axis)
        values = array[batch[:, None], rows, cols]
        if values.dtype != dtype:
            values = cast_values(values, e.type.dtype)
        return np.where(ok, values, other).astype(dtype, copy=False)

    def s_VecStore(self, s):
        self.observer.store_begins(s)
        value = self.ev(s.value)
        size = s.value.type.shape[0]
        array, batch, index, ok, fixed = self.vec_window(
            s, s.view, s.start, s.stop, s.col, s.padded, size, s.axis, write=True
        )
        self.detach(array)
        n = max(
            value.shape[0],
            index.shape[0],
            batch.shape[0],
            _mask_lanes(self.mask),
            ok.shape[0],
        )
        ok = np.broadcast_to(ok, (n, size))
        if self.mask is not None:
            ok = ok & self.mask[:, None]
        rows, cols = self.line_elements(array, index, fixed, s.axis)
        r = np.broadcast_to(rows, (n, size))
        c = np.broadcast_to(cols, (n, size))
        b = np.broadcast_to(batch[:, None], (n, size))
        array[b[ok], r[ok], c[ok]] = np.broadcast_to(value, (n, size))[ok]
        self.observer.stored(s, value)

    def element(self, node, v, indices, write=False):
        array, batch = self.view(v, node)
        dims = array.shape[3 - len(indices) :]
        idx = [self.ev(i).astype(np.int64) for i in indices]
        bad = np.zeros(1, bool)
        for i, d in zip(idx, dims):
            bad = bad | (i < 0) | (i >= d)
        self.check(
            bad, f"index out of range for {v.param!r} of shape {self.arrays[v.param][1]}", node
        )
        idx = [np.clip(i, 0, d - 1) for i, d in zip(idx, dims)]
        if len(idx) == 1:
            idx = [np.zeros(1, np.int64), *idx]
        self.observer.element(v.param, batch, *idx, write)
        return array, batch, idx

    def e_ArrayLoad(self, e):
        array, batch, (r, c) = self.element(e, e.view, e.indices)
        return array[batch, r, c]

    def s_ArrayStore(self, s):
        self.observer.store_begins(s)
        value = self.ev(s.value)
        array, batch, (r, c) = self.element(s, s.view, s.indices, write=True)
        self.detach(array)
        # One write per program, or one for all when nothing varies and no branch masks.
        n = max(value.shape[0], r.shape[0], c.shape[0], batch.shape[0])
        n = n if self.mask is None else self.n
        lanes = _lanes(self.mask, n)
        b, r, c = (np.broadcast_to(x, (n,))[lanes] for x in (batch, r, c))
        array[b, r, c] = np.broadcast_to(value, (n,))[lanes]
        self.observer.stored(s, value)

    def s_Atomic(self, s):
        self.observer.store_begins(s)
        value = self.ev(s.value)
        indices = [self.ev(i) for i in s.indices]
        array, batch = self.view(s.view, s)
        self.detach(array)
        b, r, c, v, ok, _ = cpu_atomics.elements(
            array, batch, indices, value, _lanes(self.mask, self.n)
        )
        self.observer.atomic(s, s.view.param, b, r, c, ok)
        old = cpu_atomics.apply(s.op, array, b, r, c, v, ok, s.result is not None)
        if old is not None:
            self.assign(s.result, old, "scalar")
        self.observer.stored(s, value)

    # ------------------------------------------------------------------ expressions

    def ev(self, e):
        return getattr(self, "e_" + type(e).__name__)(e)

    def e_Const(self, e):
        found = self.consts.get(id(e))
        if found is None:
            found = self.consts[id(e)] = np.array([e.value], e.type.dtype.numpy)
        return found

    def e_Var(self, e):
        return self.read(e.name)

    def e_ProgramId(self, e):
        return self.pid[e.axis] if e.which == "id" else self.grid[e.axis]

    def e_Unary(self, e):
        return _UNARY[e.op](self.ev(e.operand))

    def e_Binary(self, e):
        kind = e.type.kind
        left = _expand(self.ev(e.left), e.left.type.kind, kind)
        right = _expand(self.ev(e.right), e.right.type.kind, kind)
        result = _BINARY[e.op](left, right)
        if e.op not in ("lt", "le", "gt", "ge", "eq", "ne", "and", "or", "xor"):
            result = result.astype(e.type.dtype.numpy, copy=False)
        return result

    def e_Logical(self, e):
        left = self.ev(e.left)
        saved = self.mask
        decided = ~left if e.op == "and" else left
        lanes = _lanes(saved, self.n) & ~np.broadcast_to(decided, (self.n,))
        if not lanes.any():
            return left
        self.mask = lanes
        try:
            right = self.ev(e.right)
        finally:
            self.mask = saved
        return (left & right) if e.op == "and" else (left | right)

    def e_Select(self, e):
        kind = e.type.kind
        cond = _expand(self.ev(e.cond), e.cond.type.kind, kind)
        a = _expand(self.ev(e.if_true), e.if_true.type.kind, kind)
        b = _expand(self.ev(e.if_false), e.if_false.type.kind, kind)
        return np.where(cond, a, b)

    def e_Cast(self, e):
        return cast_values(self.ev(e.operand), e.type.dtype)

    def e_ArrayDim(self, e):
        _array, shape = self.arrays[e.param]
        return np.array([shape[e.axis]], np.int32)

    def e_TileFill(self, e):
        dtype = e.type.dtype.numpy
        if e.kind in ("eye", "arange"):
            key = (e.kind, dtype, e.type.shape)
            found = _EYE.get(key)
            if found is None:
                size = e.type.shape[0]
                made = np.eye(size, dtype=dtype) if e.kind == "eye" else np.arange(size)
                found = _EYE[key] = made.astype(dtype)[None]
                found.flags.writeable = False
            return found
        value = self.ev(e.value)
        shape = (value.shape[0], *e.type.shape)
        return np.broadcast_to(_expand(value, "scalar", e.type.kind), shape).astype(dtype)

    def tile_index(self, node, value, limit=16, shape=None):
        index = self.ev(value).astype(np.int64)
        message = tile_index_message(shape or (limit,))
        self.check((index < 0) | (index >= limit), message, node)
        return np.clip(index, 0, limit - 1)

    def e_TileGet(self, e):
        base = self.ev(e.base)
        shape = e.base.type.shape
        i = self.tile_index(e, e.i, shape[0], shape)
        n = max(base.shape[0], i.shape[0])
        lanes = np.arange(n) if base.shape[0] > 1 else np.zeros(n, np.int64)
        if e.j is None:
            return base[lanes, np.broadcast_to(i, (n,))]
        j = self.tile_index(e, e.j, shape[1], shape)
        n = max(n, j.shape[0])
        lanes = np.arange(n) if base.shape[0] > 1 else np.zeros(n, np.int64)
        return base[lanes, np.broadcast_to(i, (n,)), np.broadcast_to(j, (n,))]

    def e_TileSet(self, e):
        base = self.ev(e.base)
        shape = e.base.type.shape
        i = self.tile_index(e, e.i, shape[0], shape)
        value = self.ev(e.value)
        j = self.tile_index(e, e.j, shape[1], shape) if e.j is not None else None
        n = max(base.shape[0], i.shape[0], value.shape[0], 1 if j is None else j.shape[0])
        out = np.array(np.broadcast_to(base, (n, *base.shape[1:])))
        lanes = np.arange(n)
        if j is None:
            out[lanes, np.broadcast_to(i, (n,))] = np.broadcast_to(value, (n,))
        else:
            out[lanes, np.broadcast_to(i, (n,)), np.broadcast_to(j, (n,))] = np.broadcast_to(
                value, (n,)
            )
        return out

    def e_Transpose(self, e):
        return np.swapaxes(self.ev(e.operand), -1, -2)

    def e_Reshape(self, e):
        value = self.ev(e.operand)
        return value.reshape(value.shape[0], *e.type.shape)

    def e_Broadcast(self, e):
        value = self.ev(e.operand)
        shape = e.type.shape
        extra = len(shape) - (value.ndim - 1)  # NumPy's rule: missing leading sides are 1
        value = value.reshape(value.shape[0], *(1,) * extra, *value.shape[1:])
        return np.broadcast_to(value, (value.shape[0], *shape))

    def e_Reduce(self, e):
        value = self.ev(e.operand)
        if e.axis is None:
            axes = tuple(range(1, value.ndim))
        else:
            axes = e.axis + 1
        return reduce_values(e.op, value, axes)

    def e_IndexReduce(self, e):
        return index_reduce_values(e.op, self.ev(e.operand), e.axis)

    def e_Scan(self, e):
        return scan_values(e.op, self.ev(e.operand), e.axis)

    def e_Matmul(self, e):
        a, b = self.ev(e.a), self.ev(e.b)
        out = e.type.dtype.numpy
        if is_narrow_float(a.dtype):  # f16 and bf16 products accumulate in f32
            a, b = a.astype(np.float32), b.astype(np.float32)
        # np.matmul calls BLAS per 16×16 matrix of the stack (as fast as einsum's batched
        # path on NumPy 2, without its per-call path search); broadcasting is its own.
        result = np.matmul(a, b).astype(out, copy=False)
        if e.acc is not None:
            acc = self.ev(e.acc)
            if result.shape[0] >= acc.shape[0] and result.dtype == acc.dtype:
                result += acc  # result is a fresh array: add in place, no second allocation
            else:
                result = acc + result
        return result

    def e_Outer(self, e):
        return self.ev(e.u)[:, :, None] * self.ev(e.v)[:, None, :]

    def e_RowCol(self, e):
        base = self.ev(e.operand)
        side = e.operand.type.shape[0 if e.which == "row" else 1]
        index = self.tile_index(e, e.index, side)
        n = max(base.shape[0], index.shape[0])
        lanes = np.arange(n) if base.shape[0] > 1 else np.zeros(n, np.int64)
        index = np.broadcast_to(index, (n,))
        return base[lanes, index, :] if e.which == "row" else base[lanes, :, index]

    # Cholesky and the triangular solve work "lanes last" (see _lanes_last), so each step
    # of the column-by-column algorithm is a contiguous vector op over many programs.

    def e_Cholesky(self, e):
        return _lanes_last(_cholesky, self.ev(e.operand), self.ev(e.eps), shape=e.type.shape)

    def e_SolveTriangular(self, e):
        lower = self.ev(e.lower)
        rhs = self.ev(e.rhs)
        return _lanes_last(_solve_lower, lower, rhs, shape=e.type.shape, dtype=rhs.dtype)


# Programs per lanes-last pass: a pass's arrays (16×16×1024 f64 = 2 MiB each) stay in
# the last-level cache for its 16 steps, and each step is a few NumPy calls, whose fixed
# cost 1024 programs amortise better than 512 (measured: batched Cholesky 1.7× -> 1.4×
# NumPy's, 12% fewer instructions for Cholesky + solve).
LANE_CHUNK = 1024
# A move into a pass goes through blocks of this many programs: NumPy's strided copy
# is a cache and TLB miss per element when it transposes a whole pass of programs
# that lie apart, but a block of 16 programs is 32 KiB, so transposing block by block
# and then moving whole rows of blocks costs about two plain copies instead of four.
LANE_BLOCK = 16


def _lanes_last(fn, *operands, shape=(16, 16), dtype=None):
    """``fn(*parts, out)`` over chunks of programs: each operand (``(n, ...)`` or
    ``(1, ...)``) arrives as a ``(..., lanes)`` array, and ``fn`` writes ``out``
    (``(*shape, lanes)``, of ``dtype``, the first operand's where None). An operand that
    ``fn`` reads more than once arrives with its lane axis contiguous (moved there,
    unless it already is); one it reads once (``_READ_ONCE``) is read where it lies. The
    result is an ``(n, *shape)`` view of a lanes-last array (its program axis the
    contiguous one): a following lanes-last op takes it without moving it, and a store
    copies it straight into the array."""
    n = max(op.shape[0] for op in operands)
    dtype = operands[0].dtype if dtype is None else np.dtype(dtype)
    chunk = max(1, min(n, LANE_CHUNK))
    read_once = _READ_ONCE.get(fn, ())
    # Scratch reused by every chunk (fresh 1 MiB arrays per chunk cost page faults);
    # an operand already lanes last, or read once, needs none.
    moves = []
    for i, op in enumerate(operands):
        last = _as_lanes_last(op) if op.shape[0] > 1 else None
        if last is None and i in read_once and op.shape[0] > 1:
            last = np.moveaxis(op, 0, -1)
        moves.append(last if last is not None else _LaneMoves(op.shape[1:], op.dtype, chunk))
    result = _lanes_last_result(shape, dtype, n)
    for start in range(0, n, chunk):
        stop = min(n, start + chunk)
        parts = [
            _one_lane(op)
            if op.shape[0] == 1
            else move.to_lanes_last(op[start:stop])
            if isinstance(move, _LaneMoves)
            else move[..., start:stop]
            for move, op in zip(moves, operands)
        ]
        if stop - start == 1:  # einsum sums a lone program's dot products in another order
            two = np.empty((*shape, 2), dtype)
            fn(*[np.repeat(part, 2, axis=-1) for part in parts], two)
            result[..., start] = two[..., 0]
        else:
            fn(*parts, result[..., start:stop])
    return np.moveaxis(result, -1, 0)


def _lanes_last_result(shape, dtype, n):
    """An uninitialised ``(*shape, n)`` array whose rows are not a multiple of 1 KiB
    apart: a step reads a slice of many rows and writes another, and rows a power of two
    apart fall into the same cache sets, and alias (4 KiB apart) between the loads and
    the stores of one ufunc."""
    dtype = np.dtype(dtype)
    width = n
    if n > 1 and (n * dtype.itemsize) % 1024 == 0:
        width += max(1, 64 // dtype.itemsize)
    return np.empty((*shape, width), dtype)[..., :n]


def _as_lanes_last(programs):
    """``programs`` (``(n, *inner)``) as its ``(*inner, n)`` view when the program axis
    is the contiguous one (a lanes-last op's result); else None."""
    if programs.ndim == 0 or programs.strides[0] != programs.itemsize:
        return None
    return np.moveaxis(programs, 0, -1)


def _one_lane(operand):
    """A ``(1, ...)`` operand (the same in every program) as a contiguous ``(..., 1)``."""
    return np.ascontiguousarray(np.moveaxis(operand, 0, -1))


class _LaneMoves:
    """Moves chunks of programs between ``(lanes, *inner)`` and ``(*inner, lanes)``,
    through blocks of LANE_BLOCK programs (see there), with scratch sized for ``chunk``
    programs and reused for every chunk."""

    def __init__(self, inner, dtype, chunk):
        self.inner = tuple(inner)
        size = int(np.prod(self.inner, dtype=np.int64))
        self.size = size
        self.lanes_last = np.empty(size * chunk, dtype)
        self.by_block = np.empty(size * chunk, dtype)

    def _scratch(self, buffer, *shape):
        return buffer[: int(np.prod(shape, dtype=np.int64))].reshape(shape)

    def to_lanes_last(self, programs):
        """``programs`` as a contiguous ``(*inner, lanes)`` array (this scratch)."""
        lanes, inner = programs.shape[0], self.inner
        out = self._scratch(self.lanes_last, *inner, lanes)
        if lanes % LANE_BLOCK or lanes == LANE_BLOCK:
            np.copyto(out, np.moveaxis(programs, 0, -1))
            return out
        blocks = lanes // LANE_BLOCK
        by_block = self._scratch(self.by_block, blocks, *inner, LANE_BLOCK)
        np.copyto(by_block, np.moveaxis(programs.reshape(blocks, LANE_BLOCK, *inner), 1, -1))
        np.copyto(out.reshape(*inner, blocks, LANE_BLOCK), np.moveaxis(by_block, 0, -2))
        return out

    def from_lanes_last(self, result, out):
        """Writes ``result`` (``(*inner, lanes)``, its lane axis contiguous) into ``out``
        (``(lanes, *inner)``, any strides)."""
        lanes, inner = out.shape[0], self.inner
        if lanes % LANE_BLOCK or lanes == LANE_BLOCK:
            np.copyto(out, np.moveaxis(result, -1, 0))
            return
        blocks = lanes // LANE_BLOCK
        by_block = self._scratch(self.by_block, blocks, *inner, LANE_BLOCK)
        np.copyto(np.moveaxis(by_block, 0, -2), result.reshape(*inner, blocks, LANE_BLOCK))
        np.copyto(out.reshape(blocks, LANE_BLOCK, *inner), np.moveaxis(by_block, -1, 1))


def _einsum(spec, a, b, out):
    """``np.einsum`` into ``out``; bf16 (which einsum does not take) accumulates in f32 and
    rounds once, as f16 does."""
    if a.dtype.kind != "f" and a.dtype.name == "bfloat16":  # (.name is slow: f32/f64 first)
        out[...] = np.einsum(spec, a.astype(np.float32), b.astype(np.float32))
        return out
    return np.einsum(spec, a, b, out=out)


# Both run column by column into ``out`` (a pass of a lanes-last result), each step a
# few ufuncs writing in place (out=), so a step costs its arithmetic and not its
# temporaries.


def _cholesky(a, eps, lower):
    size = a.shape[0]
    for j in range(size):
        # Column j from the diagonal down: a[i, j] - L[i, :j] · L[j, :j]; the diagonal
        # becomes sqrt(max(that, eps)), the rows below divide by it.
        column = lower[j:, j]
        if j:
            lower[:j, j] = 0
            _einsum("ikn,kn->in", lower[j:, :j], lower[j, :j], column)
            np.subtract(a[j:, j], column, out=column)
        else:
            column[...] = a[j:, j]
        diagonal = column[0]
        np.maximum(diagonal, eps, out=diagonal)
        np.sqrt(diagonal, out=diagonal)
        np.divide(column[1:], diagonal, out=column[1:])
    return lower


def _solve_lower(factor, rhs, x):
    for k in range(rhs.shape[1]):
        # X[:, k] = (B[:, k] - sum_{m<k} X[:, m] L[k, m]) / L[k, k]
        column = x[:, k]
        if k:
            _einsum("imn,mn->in", x[:, :k], factor[k, :k], column)
            np.subtract(rhs[:, k], column, out=column)
            np.divide(column, factor[k, k], out=column)
        else:
            np.divide(rhs[:, k], factor[k, k], out=column)
    return x


# The operands each reads once, element by element (Cholesky's ``a``, the solve's right-hand
# side): read in place, where moving them lanes last first would cost more than it saves.
_READ_ONCE = {_cholesky: (0,), _solve_lower: (1,)}


_mask_lanes = semantics.mask_lanes


__all__ = ["CpuArray", "Observer", "run"]
