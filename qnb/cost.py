"""What a launch costs, counted from its IR: floating-point operations and bytes moved.

:func:`count` walks a kernel's IR as the launch runs it (``Specialization.cost(args)``
and ``%qbench`` call it), by these rules:

- **FLOPs** are operations on floating-point values (f16, bf16, f32, f64); integer and
  bool work (index arithmetic, i32 tiles, masks, ``and``/``or``) counts nothing. On a
  value of S elements an elementwise op counts S: ``+ - * / // % **``, ``maximum``,
  ``minimum``, a comparison, unary minus, and each math function of the op registry
  (``abs``, ``exp``, ``log``, ``sqrt``, ``floor`` …: its ``flops`` in ``qnb.ops``, one
  each, whatever a backend spends on it). A sum of n terms is
  n − 1 additions, and adding it to something one more: a reduction (``sum``, ``max``,
  ``min``) of n elements into one output counts n − 1 (``t.sum(axis=1)`` on M×N:
  M·(N − 1)); ``a @ b`` (M×K by K×N) M·N·(2K − 1); ``qnb.mma(a, b, acc)`` 2·M·N·K;
  ``qnb.outer(u, v)`` M·N; ``cholesky_`` and ``solve_triangular_`` the operations of
  the formulas in ``qnb/ir.py`` (an empty sum costs nothing: N×N Cholesky of N = 2 is
  7, a solve of M×N against N×N is M·N²). Casts, ``where``, fills, loads and stores,
  ``.T``, broadcasts, reshapes, ``row``/``col`` and element get/set count no FLOPs.
- **Bytes** are what each load and store moves: the elements of its window that exist
  in the array (clamped to the array, as the contract reads and writes them) at the
  array's itemsize; a scalar element read or write is one element. Traffic as the
  kernel issues it: an element two programs (or two loads) read counts twice.
- **Control flow** runs as the launch runs it: program ids, the launch's scalars and
  array shapes decide trip counts, branches and window offsets, evaluated for every
  program. Where one of them depends on a value read from memory or computed from a
  tile, the count is unknown (None), and ``unknown`` says where; the same for a node
  this module has no rule for, or a count that needs more than :data:`STEP_BUDGET`
  statement steps to evaluate.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass, field

import numpy as np

from qnb import ir, ops

STEP_BUDGET = 200_000  # statement executions (each over a chunk of programs) per count
CHUNK = 1 << 16  # programs evaluated at once
SHOWN_OPS = 5  # ops a LaunchCost's text names (the largest counts first)

# Binary ops by the name the count shows them under (the language's names)
_SHOWN = {"max": "maximum", "min": "minimum"}


@dataclass(frozen=True)
class LaunchCost:
    """What :func:`count` found for one launch: ``flops`` and ``bytes`` (None: unknown,
    and ``unknown`` says why, naming the user's line), ``flops_by_op`` (op name →
    FLOPs), ``bytes_loaded`` and ``bytes_stored`` (array parameter → bytes)."""

    flops: int | None
    bytes: int | None
    flops_by_op: dict[str, int] = field(default_factory=dict)
    bytes_loaded: dict[str, int] = field(default_factory=dict)
    bytes_stored: dict[str, int] = field(default_factory=dict)
    unknown: tuple[str, ...] = ()

    def __str__(self) -> str:
        if self.flops is None:
            flops = "FLOPs unknown"
        else:
            ops = ", ".join(f"{op} {n:,}" for op, n in _largest(self.flops_by_op))
            more = sum(1 for n in self.flops_by_op.values() if n) - SHOWN_OPS
            ops += f", +{more} more" if more > 0 else ""
            flops = f"{self.flops:,} FLOPs" + (f" ({ops})" if ops else "")
        if self.bytes is None:
            moved = "bytes unknown"
        else:
            arrays = [f"{a} {n:,} read" for a, n in self.bytes_loaded.items()]
            arrays += [f"{a} {n:,} written" for a, n in self.bytes_stored.items()]
            moved = f"{self.bytes:,} bytes" + (f" ({', '.join(arrays)})" if arrays else "")
        text = f"{flops}, {moved}"
        return text + (f": {'; '.join(self.unknown)}" if self.unknown else "")


def _largest(counts: dict[str, int]) -> list[tuple[str, int]]:
    ranked = sorted(((op, n) for op, n in counts.items() if n), key=lambda item: -item[1])
    return ranked[:SHOWN_OPS]


def count(kernel: ir.KernelIR, grid, args, position=None) -> LaunchCost:
    """FLOPs and bytes of ``kernel`` launched over ``grid`` (3 ints) with ``args`` (the
    runtime values in ``kernel.params`` order: arrays need only ``shape``), by the rules
    of this module's docstring. ``position(loc)`` → (file, line, col) names the user's
    lines in ``unknown``."""
    total = int(grid[0]) * int(grid[1]) * int(grid[2])
    counter = _Counter(kernel, tuple(int(g) for g in grid), args, position)
    per_program = _reads_program_id(kernel)
    try:
        with np.errstate(all="ignore"):
            if per_program:
                for start in range(0, total, CHUNK):
                    counter.run_programs(start, min(CHUNK, total - start), 1)
            elif total:
                counter.run_programs(0, 1, total)  # every program the same: one, times all
    except _Uncountable as why:
        return LaunchCost(None, None, unknown=(str(why),))
    flops = sum(counter.flops.values())
    moved = sum(counter.loaded.values()) + sum(counter.stored.values())
    return LaunchCost(
        flops,
        None if counter.bytes_unknown else moved,
        dict(counter.flops),
        dict(counter.loaded),
        dict(counter.stored),
        tuple(dict.fromkeys(counter.bytes_unknown)),
    )


def _reads_program_id(kernel: ir.KernelIR) -> bool:
    return any(
        isinstance(node, ir.ProgramId) and node.which == "id" for node in ir.walk_body(kernel.body)
    )


class _Uncountable(Exception):
    """The whole count is unknown (its message says where and why)."""


class _Data:
    """A value that depends on what memory holds (or on a tile): not known at launch."""

    def __repr__(self) -> str:
        return "<data>"


DATA = _Data()

# Masks of the programs a statement runs in: True (all), False (none) or a bool array.


def _and(a, b):
    if a is True:
        return b
    if b is True or a is False:
        return a
    if b is False:
        return False
    return _as_mask(a & b)


def _or(a, b):
    if a is False:
        return b
    if b is False or a is True:
        return a
    if b is True:
        return True
    return a | b


def _minus(a, b):
    """The programs of ``a`` not in ``b``."""
    if b is False or a is False:
        return a
    if b is True:
        return False
    return _as_mask(~b if a is True else a & ~b)


def _as_mask(value):
    """A condition's value (a scalar, or one per program) as a mask."""
    if isinstance(value, np.ndarray):
        if value.all():
            return True
        return value.astype(bool) if value.any() else False
    return bool(value)


_SCALAR_BINARY = {
    "add": np.add,
    "sub": np.subtract,
    "mul": np.multiply,
    "div": np.true_divide,
    "floordiv": np.floor_divide,
    "mod": np.remainder,
    "max": np.maximum,
    "min": np.minimum,
    "lt": np.less,
    "le": np.less_equal,
    "gt": np.greater,
    "ge": np.greater_equal,
    "eq": np.equal,
    "ne": np.not_equal,
    "and": np.bitwise_and,
    "or": np.bitwise_or,
    "xor": np.bitwise_xor,
}
_SCALAR_UNARY = {"neg": np.negative, "not": np.logical_not, "abs": np.abs}
_WINDOWS = (ir.LoadWindow, ir.VecLoad, ir.StoreWindow, ir.VecStore)


class _Values:
    """The expression side of a count: each IR expression's value where it is a known
    scalar (else DATA), its FLOPs, and the bytes of its loads and stores, in the programs
    of ``mask`` (the statement side, :class:`_Counter`, sets the state it reads)."""

    def lanes(self) -> int:
        mask = self.mask
        count = self.n if mask is True else 0 if mask is False else int(mask.sum())
        return count * self.weight

    def where(self, node) -> str:
        loc = getattr(node, "loc", None)
        if loc is None or self.position is None:
            return "in the kernel"
        try:
            return f"line {self.position(loc)[1]}"
        except (IndexError, KeyError):
            return "in the kernel"

    def ev(self, e):
        """The value of ``e`` where it is a known scalar (else DATA), counting its ops."""
        method = getattr(self, f"e_{type(e).__name__}", None)
        if method is None:
            raise _Uncountable(f"{self.where(e)}: no count for {type(e).__name__}")
        return method(e)

    def add_flops(self, op: str, per_program: int) -> None:
        if per_program:
            self.flops[op] += per_program * self.lanes()

    def e_Const(self, e):
        return e.type.dtype.numpy.type(e.value) if e.type.kind == "scalar" else DATA

    def e_Var(self, e):
        return self.env.get(e.name, DATA) if e.type.kind == "scalar" else DATA

    def e_ProgramId(self, e):
        return self.ids[e.axis] if e.which == "id" else np.int32(self.grid[e.axis])

    def e_ArrayDim(self, e):
        return np.int32(self.shapes[e.param][e.axis])

    def e_Binary(self, e):
        left, right = self.ev(e.left), self.ev(e.right)
        if e.left.type.dtype.is_float:
            self.add_flops(_SHOWN.get(e.op, e.op), e.type.size)
        function = _SCALAR_BINARY.get(e.op)
        if e.type.kind != "scalar" or left is DATA or right is DATA or function is None:
            return DATA
        result = function(left, right)
        return result if e.op in ir.COMPARE_OPS else _typed(result, e.type.dtype)

    def e_Unary(self, e):
        value = self.ev(e.operand)
        if e.operand.type.dtype.is_float and e.op not in ("not", "invert"):
            math_op = ops.MATH.get(e.op)
            self.add_flops(e.op, e.type.size * (math_op.flops if math_op else 1))
        function = _SCALAR_UNARY.get(e.op)
        if e.type.kind != "scalar" or value is DATA or function is None:
            return DATA
        return _typed(function(value), e.type.dtype)

    def e_Logical(self, e):
        left = self.ev(e.left)
        if left is DATA:
            if any(_node_costs(node) for node in ir.walk(e.right)):
                raise _Uncountable(
                    f"{self.where(e)}: an 'and'/'or' whose right side runs where a value "
                    "read from memory says"
                )
            self.ev(e.right)
            return DATA
        undecided = _as_mask(np.logical_not(left) if e.op == "or" else left)
        saved = self.mask
        self.mask = _and(saved, undecided)
        try:
            right = self.ev(e.right) if self.mask is not False else left
        finally:
            self.mask = saved
        if right is DATA:
            return DATA
        return np.logical_and(left, right) if e.op == "and" else np.logical_or(left, right)

    def e_Select(self, e):
        cond, a, b = self.ev(e.cond), self.ev(e.if_true), self.ev(e.if_false)
        if e.type.kind != "scalar" or DATA in (cond, a, b):
            return DATA
        return np.where(cond, a, b)[()]

    def e_Cast(self, e):
        value = self.ev(e.operand)
        if e.type.kind != "scalar" or value is DATA:
            return DATA
        if e.type.dtype.name == "i32" and e.operand.type.dtype.is_float:
            value = np.nan_to_num(np.trunc(np.clip(np.float64(value), -(2**31), 2**31 - 1)))
        return _typed(value, e.type.dtype)

    def e_ArrayLoad(self, e):
        for index in e.indices:
            self.ev(index)
        self.view_batch(e.view)
        self.loaded[e.view.param] += self.lanes() * e.view.type.dtype.itemsize
        return DATA

    def e_LoadWindow(self, e):
        self.ev(e.base)
        self.window(e, e.type, self.loaded)
        return DATA

    def e_VecLoad(self, e):
        if e.other is not None:
            self.ev(e.other)
        self.window(e, e.type, self.loaded)
        return DATA

    def e_TileFill(self, e):
        if e.value is not None:
            self.ev(e.value)
        return DATA

    def e_TileGet(self, e):
        for part in (e.base, e.i, e.j):
            if part is not None:
                self.ev(part)
        return DATA

    def e_TileSet(self, e):
        self.e_TileGet(e)
        self.ev(e.value)
        return DATA

    def e_Transpose(self, e):
        self.ev(e.operand)
        return DATA

    e_Reshape = e_Broadcast = e_Transpose

    def e_RowCol(self, e):
        self.ev(e.operand)
        self.ev(e.index)
        return DATA

    def e_Reduce(self, e):
        self.ev(e.operand)
        if e.operand.type.dtype.is_float:
            per = ops.REDUCTIONS[e.op].flops
            self.add_flops(e.op, per * (e.operand.type.size - e.type.size))
        return DATA

    def e_Scan(self, e):
        self.ev(e.operand)
        if e.operand.type.dtype.is_float:
            line = e.operand.type.shape[-1 if e.axis in (None, 1) else 0]
            self.add_flops(e.op, e.operand.type.size // line * (line - 1))
        return DATA

    def e_IndexReduce(self, e):
        return self.ev(e.spelled)  # what a GPU runs (the cpu's argmax does less)

    def e_Matmul(self, e):
        for part in (e.a, e.b, e.acc):
            if part is not None:
                self.ev(part)
        if e.a.type.dtype.is_float:
            (m, k), n = e.a.type.shape, e.b.type.shape[1]
            if e.acc is None:
                self.add_flops("matmul", m * n * (2 * k - 1))
            else:
                self.add_flops("mma", 2 * m * n * k)
        return DATA

    def e_Outer(self, e):
        self.ev(e.u)
        self.ev(e.v)
        if e.u.type.dtype.is_float:
            self.add_flops("outer", e.type.size)
        return DATA

    def e_Cholesky(self, e):
        self.ev(e.operand)
        self.ev(e.eps)
        if e.type.dtype.is_float:
            self.add_flops("cholesky_", cholesky_flops(e.type.shape[0]))
        return DATA

    def e_SolveTriangular(self, e):
        self.ev(e.lower)
        self.ev(e.rhs)
        if e.type.dtype.is_float:
            rows, cols = e.type.shape
            self.add_flops("solve_triangular_", rows * cols * cols)
        return DATA

    # ------------------------------------------------------------------ memory

    def view_batch(self, view: ir.ArrayView):
        """The slab index of ``view`` (None for a whole array), counting its ops."""
        return None if view.batch is None else self.ev(view.batch)

    def window(self, node, shape_type: ir.Type, into: collections.Counter) -> None:
        """Count the elements of a load's or store's window that exist in its array."""
        view = node.view
        batch = self.view_batch(view)
        bounds = (
            [node.r0, node.r1, node.c0, node.c1]
            if isinstance(node, ir.LoadWindow | ir.StoreWindow)
            else [node.start, node.stop, node.col]
        )
        values = [None if b is None else self.ev(b) for b in bounds]
        if any(v is DATA for v in values):
            self.bytes_unknown.append(
                f"{self.where(node)}: a window placed by a value read from memory"
            )
            return
        shape = self.shapes[view.param]
        if view.batch is not None:
            exists = (batch >= 0) & (batch < shape[0]) if batch is not DATA else True
            shape = shape[1:]
        else:
            exists = True
        elements = _window_elements(node, shape_type, shape, values) * exists
        if isinstance(elements, np.ndarray):
            mask = self.mask
            total = int(elements.sum() if mask is True else elements[mask].sum())
            into[view.param] += total * self.weight * view.type.dtype.itemsize
        else:
            into[view.param] += int(elements) * self.lanes() * view.type.dtype.itemsize


class _Counter(_Values):
    """Runs the kernel's statements over chunks of programs, evaluating only the scalar
    values that decide control flow and windows, and counting every op on the way."""

    def __init__(self, kernel: ir.KernelIR, grid, args, position):
        self.kernel, self.grid, self.position = kernel, grid, position
        self.flops: collections.Counter = collections.Counter()
        self.loaded: collections.Counter = collections.Counter()
        self.stored: collections.Counter = collections.Counter()
        self.bytes_unknown: list[str] = []
        self.shapes, self.scalars = {}, {}
        for param, value in zip(kernel.params, args):
            if param.type.kind == "array":
                self.shapes[param.name] = tuple(int(n) for n in value.shape)
            else:
                self.scalars[param.name] = param.type.dtype.numpy.type(value)
        self.steps = 0
        self.constant: dict[int, bool] = {}  # id(For) -> does its body cost the same each time

    # ------------------------------------------------------------------ programs

    def run_programs(self, start: int, n: int, weight: int) -> None:
        """Programs ``start`` … ``start + n - 1`` (flat, grid order), each counted
        ``weight`` times."""
        self.n, self.weight = n, weight
        flat = np.arange(start, start + n, dtype=np.int64)
        gx, gy, _ = self.grid
        ids = (flat % gx, (flat // gx) % gy, flat // (gx * gy))
        self.ids = [ids[a].astype(np.int32) if n > 1 else np.int32(ids[a][0]) for a in range(3)]
        self.env = dict(self.scalars)
        self.mask = True
        self.run(self.kernel.body, True)

    # ------------------------------------------------------------------ statements

    def run(self, body: list, mask):
        """Run ``body`` in the programs of ``mask``; returns (the programs that left the
        enclosing loop with ``break``, those that left this pass of it early)."""
        saved, live, broke, left = self.mask, mask, False, False
        try:
            for stmt in body:
                if live is False:
                    break
                self.steps += 1
                if self.steps > STEP_BUDGET:
                    raise _Uncountable(
                        f"counting needs more than {STEP_BUDGET:,} statement steps "
                        f"(at {self.where(stmt)})"
                    )
                self.mask = live
                if isinstance(stmt, ir.Break):
                    broke, left, live = _or(broke, live), _or(left, live), False
                elif isinstance(stmt, ir.Continue):
                    left, live = _or(left, live), False
                elif isinstance(stmt, ir.If):
                    b, gone = self.s_If(stmt)
                    broke, left, live = _or(broke, b), _or(left, gone), _minus(live, gone)
                elif isinstance(stmt, ir.For):
                    self.s_For(stmt)
                elif isinstance(stmt, ir.While):
                    self.s_While(stmt)
                else:
                    self.statement(stmt)
        finally:
            self.mask = saved
        return broke, left

    def statement(self, stmt) -> None:
        if isinstance(stmt, ir.Assign):
            value = self.ev(stmt.value)
            if stmt.value.type.kind == "scalar":
                self.assign(stmt.name, value)
        elif isinstance(stmt, ir.StoreWindow | ir.VecStore):
            self.ev(stmt.value)
            self.window(stmt, stmt.value.type, self.stored)
        elif isinstance(stmt, ir.ArrayStore):
            for index in stmt.indices:
                self.ev(index)
            self.ev(stmt.value)
            self.view_batch(stmt.view)
            self.stored[stmt.view.param] += self.lanes() * stmt.view.type.dtype.itemsize
        else:
            raise _Uncountable(f"{self.where(stmt)}: no count for {type(stmt).__name__}")

    def assign(self, name: str, value) -> None:
        mask, old = self.mask, self.env.get(name, DATA)
        if mask is True or value is DATA:
            self.env[name] = value
        elif old is DATA:
            self.env[name] = DATA  # known in some programs only
        else:
            self.env[name] = np.where(mask, value, old)

    def s_If(self, stmt: ir.If):
        cond = self.ev(stmt.cond)
        if cond is DATA:
            branches = [*stmt.then_body, *stmt.else_body]
            if any(_node_costs(node) for node in ir.walk_body(branches)):
                raise _Uncountable(f"{self.where(stmt)}: a branch on a value read from memory")
            self.forget(branches)  # costs nothing either way: only what it assigns is unknown
            return False, False
        cond = _as_mask(cond)
        taken, other = _and(self.mask, cond), _minus(self.mask, cond)
        broke = left = False
        for body, lanes in ((stmt.then_body, taken), (stmt.else_body, other)):
            if lanes is not False and body:
                b, gone = self.run(body, lanes)
                broke, left = _or(broke, b), _or(left, gone)
        return broke, left

    def s_For(self, stmt: ir.For) -> None:
        bounds = [self.ev(e) for e in (stmt.start, stmt.stop, stmt.step)]
        if any(value is DATA for value in bounds):
            raise _Uncountable(f"{self.where(stmt)}: a loop whose bounds are read from memory")
        start, stop, step = bounds
        if np.any(step == 0):
            raise _Uncountable(f"{self.where(stmt)}: a loop with a step of 0")
        uniform = not any(isinstance(v, np.ndarray) for v in bounds)
        if uniform and self.constant_body(stmt):
            trips = len(range(int(start), int(stop), int(step)))
            if trips:
                self.once_times(stmt, start, trips)
                self.assign(stmt.var, type(start)(int(start) + (trips - 1) * int(step)))
            return
        value, active, dtype = start, self.mask, stmt.start.type.dtype
        while True:
            lanes = _and(active, _as_mask(np.where(step > 0, value < stop, value > stop)))
            if lanes is False:
                return
            self.mask = lanes
            self.assign(stmt.var, value)
            broke, _ = self.run(stmt.body, lanes)
            active = _minus(lanes, broke)
            value = _typed(np.add(value, step), dtype)

    def once_times(self, stmt: ir.For, start, trips: int) -> None:
        """A loop whose every pass costs the same: one pass, counted ``trips`` times; what
        the body assigns is unknown after it (only its cost was needed)."""
        before = [collections.Counter(c) for c in (self.flops, self.loaded, self.stored)]
        self.assign(stmt.var, start)
        self.run(stmt.body, self.mask)
        for counts, earlier in zip((self.flops, self.loaded, self.stored), before):
            for key, value in counts.items():
                counts[key] = earlier[key] + (value - earlier[key]) * trips
        self.forget(stmt.body)

    def forget(self, body: list) -> None:
        """What ``body`` assigns is unknown from here on."""
        for node in ir.walk_body(body):
            if isinstance(node, ir.Assign | ir.For):
                self.env[node.name if isinstance(node, ir.Assign) else node.var] = DATA

    def constant_body(self, stmt: ir.For) -> bool:
        """Whether no pass of the loop can cost another amount than the first: nothing
        that decides control flow or a window reads a variable the loop changes, and the
        body has no ``break``/``continue`` of its own."""
        found = self.constant.get(id(stmt))
        if found is None:
            found = self.constant[id(stmt)] = _constant_body(stmt)
        return found

    def s_While(self, stmt: ir.While) -> None:
        active = self.mask
        while True:
            self.mask = active
            cond = self.ev(stmt.cond)
            if cond is DATA:
                raise _Uncountable(
                    f"{self.where(stmt)}: a loop whose condition is read from memory"
                )
            lanes = _and(active, _as_mask(cond))
            if lanes is False:
                return
            broke, _ = self.run(stmt.body, lanes)
            active = _minus(lanes, broke)


def _window_elements(node, shape_type: ir.Type, shape: tuple, values: list):
    """How many elements of the window exist (per program where bounds differ)."""

    def extent(start, stop, size, limit):
        if isinstance(start, np.ndarray) or isinstance(stop, np.ndarray):
            # the common case first, in three reductions: every window whole in the array
            room = np.min(np.subtract(stop, start, dtype=np.int64))
            low, high = np.min(start), np.max(start)
            if low >= 0 and int(high) + size <= limit and room >= size:
                return size
        start, stop = np.int64(start), np.int64(stop)
        return np.maximum(
            0, np.minimum(np.minimum(start + size, stop), limit) - np.maximum(start, 0)
        )

    def inside(index, limit):
        return (np.int64(index) >= 0) & (np.int64(index) < limit)

    if isinstance(node, ir.LoadWindow | ir.StoreWindow):
        r0, r1, c0, c1 = values
        rows, cols = shape_type.shape
        return extent(r0, r1, rows, shape[0]) * extent(c0, c1, cols, shape[1])
    start, stop, fixed = values
    length = shape_type.shape[0]
    if fixed is None:  # a 1-D array
        return extent(start, stop, length, shape[0])
    along, across = (shape[1], shape[0]) if node.axis == 1 else (shape[0], shape[1])
    return extent(start, stop, length, along) * inside(fixed, across)


def _typed(value, dtype):
    """``value`` as the IR dtype (i32 wraps as NumPy's does), array or scalar."""
    if isinstance(value, np.ndarray):
        return value.astype(dtype.numpy, copy=False)
    return dtype.numpy.type(value)


def cholesky_flops(n: int) -> int:
    """The operations of an n×n ``cholesky_`` (``qnb/ir.py``): column j's diagonal
    ``sqrt(max(a - Σ_{k<j} L², eps))`` is 2j + 2 (2 for j = 0: no sum, no subtraction),
    each element below it ``(a - Σ_{k<j} L L) / d`` 2j + 1 (1 for j = 0)."""
    total = 0
    for j in range(n):
        total += (2 * j + 2) + (n - 1 - j) * (2 * j + 1)
    return total


# Nodes that count nothing, whatever their operands (a Unary or Binary counts where its
# operand is a float; any node not named here, or without a rule, counts something).
_COSTLESS = (
    ir.Const,
    ir.Var,
    ir.ProgramId,
    ir.ArrayDim,
    ir.ArrayView,
    ir.Logical,
    ir.Select,
    ir.Cast,
    ir.TileFill,
    ir.TileGet,
    ir.TileSet,
    ir.Transpose,
    ir.Reshape,
    ir.Broadcast,
    ir.RowCol,
    ir.Assign,
    ir.If,
)


def _node_costs(node) -> bool:
    """Whether running ``node`` itself counts anything (FLOPs, bytes) or steers control."""
    if isinstance(node, _COSTLESS):
        return False
    if isinstance(node, ir.Unary):
        return node.op not in ("not", "invert") and node.operand.type.dtype.is_float
    if isinstance(node, ir.Binary):
        return node.left.type.dtype.is_float
    return True  # memory, reductions, linear algebra, loops, break/continue, new nodes


def _constant_body(loop: ir.For) -> bool:
    changed = {loop.var}
    for node in ir.walk_body(loop.body):
        if isinstance(node, ir.Assign):
            changed.add(node.name)
        elif isinstance(node, ir.For):
            changed.add(node.var)
    for node in _own_statements(loop.body):
        if isinstance(node, ir.Break | ir.Continue):
            return False
    for node in ir.walk_body(loop.body):
        deciding = []
        if isinstance(node, ir.If | ir.While):
            deciding = [node.cond]
        elif isinstance(node, ir.For):
            deciding = [node.start, node.stop, node.step]
        elif isinstance(node, ir.Logical):
            deciding = [node.left]
        elif isinstance(node, _WINDOWS):
            deciding = [b for b in _bounds(node) if b is not None]
        for expr in deciding:
            if any(isinstance(n, ir.Var) and n.name in changed for n in ir.walk(expr)):
                return False
    return True


def _bounds(node) -> list:
    batch = [node.view.batch]
    if isinstance(node, ir.LoadWindow | ir.StoreWindow):
        return [node.r0, node.r1, node.c0, node.c1, *batch]
    return [node.start, node.stop, node.col, *batch]


def _own_statements(body: list):
    """The statements of ``body`` and its branches, not those of loops inside it (whose
    ``break``/``continue`` are theirs)."""
    for stmt in body:
        yield stmt
        if isinstance(stmt, ir.If):
            yield from _own_statements(stmt.then_body)
            yield from _own_statements(stmt.else_body)


__all__ = ["LaunchCost", "count"]
