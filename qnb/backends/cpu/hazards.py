"""The hazard recorders: observers of the cpu executor that find races between programs.

``qnb.check`` (``qnb/hazards.py``) runs a launch on the interpreter
(:func:`qnb.backends.cpu.interpreter.run`) with these watching. The executor reports each tile
window, vector line and element a statement touches, per lane (program), to its
:class:`~qnb.backends.cpu.observer.Observer`; here each event becomes *segments*: runs of
consecutive memory units (one per row of a tile window, one per vector along a row,
one per element of a column or a scalar access), a few NumPy operations per event and
never a Python loop over lanes or elements.

**Memories.** Array parameters whose bytes overlap (one array passed twice, two views of
one buffer) are one :class:`Memory`, addressed in *units* (the greatest common divisor
of their itemsizes, offsets and strides: the itemsize, for one array). Only a memory
that some parameter stores to is watched: a kernel's inputs cost nothing to check.

**Two passes.** :class:`Overlaps` (every check) keeps each access as an interval of
units with its program and whether it stores. At the end one sort finds the clusters
of overlapping intervals; only a cluster that holds two programs and a store can hold a
conflict, and only such clusters are expanded to units and checked exactly (two
programs store a unit, or one stores it and another reads it). Only where that finds
one, :class:`Accesses` runs the launch again and logs each access to a conflicting
unit (its statement, the value a store left, the window it came from), and
:func:`pairs` pairs the programs up. A kernel without a hazard pays for the first pass.

**Atomics are not accesses** (``qnb.atomic_add`` and its kin: several programs updating
one element through them is no race). The executor must report them through
:meth:`Watcher.atomic`, which ignores them, never through ``window``/``line``/
``element``; an atomic added to the executor keeps it so.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from qnb import ir
from qnb.backends.cpu.observer import Observer
from qnb.backends.cpu.skeleton import headers, statements

_NONE = -1  # no program yet


@dataclass(eq=False)
class Memory:
    """The bytes of one or more array parameters that overlap, in ``size`` units of
    ``unit`` bytes; ``index`` is the position of its first parameter among the kernel's
    arrays (the same for every copy of the arguments). ``watched``: some parameter in it
    is stored to."""

    index: int
    params: list[str]
    unit: int
    size: int
    watched: bool


@dataclass(eq=False)
class Layout:
    """Where parameter ``param``'s elements lie in its memory: the 3-D view the executor
    addresses, with ``strides`` in units, from ``offset``; each element covers ``span``
    units. ``shape`` is the parameter's own shape (C-contiguous)."""

    param: str
    order: int  # the parameter's position among the kernel's arrays
    memory: Memory
    offset: int
    strides: tuple[int, int, int]
    span: int
    shape: tuple[int, ...]
    dtype: np.dtype

    def elements(self, units: np.ndarray) -> np.ndarray:
        """The C-order flat element index of each address (of this parameter's)."""
        return (units - self.offset) // self.span

    def mask(self, per_unit: np.ndarray) -> np.ndarray:
        """A per-unit mask of the memory as a per-element mask of this parameter."""
        size = math.prod(self.shape)
        part = per_unit[self.offset : self.offset + size * self.span]
        return part.reshape(size, self.span).any(axis=1).reshape(self.shape)


def layouts(kernel: ir.KernelIR, arrays: dict[str, np.ndarray]) -> dict[str, Layout]:
    """The layout of each array parameter (``arrays``: the executor's 3-D views, by
    name, of C-contiguous arrays), parameters whose bytes overlap sharing one memory."""
    stored = ir.array_uses(kernel)[1]
    spans = []
    for name, array in arrays.items():
        low = array.__array_interface__["data"][0]
        spans.append((low, low + array.nbytes, name))
    spans.sort()
    groups: list[list] = []
    for low, high, name in spans:
        if groups and low < groups[-1][1] and high > low:
            groups[-1][1] = max(groups[-1][1], high)
            groups[-1][2].append((low, name))
        else:
            groups.append([low, high, [(low, name)]])
    order = {p.name: k for k, p in enumerate(kernel.arrays)}
    ndim = {p.name: p.type.ndim for p in kernel.arrays}
    out = {}
    for low, high, members in groups:
        unit = 0
        for start, name in members:
            array = arrays[name]
            unit = math.gcd(unit, array.itemsize, start - low, *array.strides)
        unit = unit or 1
        names = sorted((name for _, name in members), key=order.get)
        watched = any(n in stored for n in names)
        memory = Memory(order[names[0]], names, unit, (high - low) // unit, watched)
        for start, name in members:
            array = arrays[name]
            out[name] = Layout(
                param=name,
                order=order[name],
                memory=memory,
                offset=(start - low) // unit,
                strides=tuple(s // unit for s in array.strides),
                span=array.itemsize // unit,
                shape=tuple(array.shape[3 - ndim[name] :]),
                dtype=array.dtype,
            )
    return out


def layouts_of(kernel: ir.KernelIR, runtime_args) -> dict[str, Layout]:
    """:func:`layouts` of a launch's runtime arguments (``kernel.params`` order), each
    array seen as the executor sees it (a 3-D view)."""
    arrays = {}
    for param, value in zip(kernel.params, runtime_args):
        if param.type.kind == "array":
            arrays[param.name] = value.reshape((1,) * (3 - value.ndim) + value.shape)
    return layouts(kernel, arrays)


@dataclass
class Segments:
    """What one event touched in one parameter, as runs of consecutive elements (flat
    arrays, one entry per run): ``lane`` (index into the event's active lanes),
    ``row``/``column`` (where the run starts in the statement's value, seen as
    ``(lanes, rows, columns)``), ``unit`` (its first unit) and ``length`` (elements).
    ``per_lane``: R where every lane has R runs, in order (lane by lane), else 0."""

    lane: np.ndarray
    row: np.ndarray
    column: np.ndarray
    unit: np.ndarray
    length: np.ndarray
    per_lane: int = 0


def _runs(count, starts, lengths, value_rows, value_columns, ok) -> Segments:
    """The runs of an event of ``count`` active lanes: each argument ``(1 or count, R)``
    (R runs per lane), those where ``ok`` (and ``length > 0``) kept."""
    shape = (count, np.shape(ok)[1])
    ok = np.broadcast_to(ok, shape) & (np.broadcast_to(lengths, shape) > 0)
    if ok.all():  # (the common case: no index to pick)
        return Segments(
            lane=np.repeat(np.arange(count), shape[1]),
            row=np.broadcast_to(value_rows, shape).ravel(),
            column=np.broadcast_to(value_columns, shape).ravel(),
            unit=np.broadcast_to(starts, shape).ravel(),
            length=np.broadcast_to(lengths, shape).ravel(),
            per_lane=shape[1],
        )
    lane, run = np.nonzero(ok)
    return Segments(
        lane=lane,
        row=np.broadcast_to(value_rows, shape)[lane, run],
        column=np.broadcast_to(value_columns, shape)[lane, run],
        unit=np.broadcast_to(starts, shape)[lane, run],
        length=np.broadcast_to(lengths, shape)[lane, run],
    )


class Watcher(Observer):
    """What both passes share: the executor's events as :class:`Segments`.

    Each event's per-lane arrays are narrowed to the active lanes first (an array of one
    entry, the same in every lane, stays as it is: a window every program touches).
    ``layouts`` (every array parameter's, by name) is known from the first ``start``:
    the executor's arrays are the launch's."""

    sees_every_value = True  # a store's value arrives whole (never a deferred tile)

    def __init__(self, kernel: ir.KernelIR, grid):
        self.kernel = kernel
        self.grid = tuple(grid)
        self.layouts: dict[str, Layout] | None = None
        self.watched: dict[str, Layout] = {}
        self.executor = None
        self.programs = np.zeros(0, np.int64)  # flat grid index of each lane

    def start(self, executor) -> None:
        self.executor = executor
        if self.layouts is None:
            names = [p.name for p in self.kernel.arrays]
            self.layouts = layouts(self.kernel, {n: executor.array(n) for n in names})
            self.watched = {n: lay for n, lay in self.layouts.items() if self.watches(lay)}
        x, y, z = executor.program(0)  # the executor's lanes are consecutive programs
        first = x + self.grid[0] * (y + self.grid[1] * z)
        self.programs = np.arange(first, first + executor.n, dtype=np.int64)

    def watches(self, layout: Layout) -> bool:
        """Whether accesses to ``layout``'s memory are recorded."""
        return layout.memory.watched

    def atomic(self, *event) -> None:
        """An atomic update (``qnb.atomic_add`` …) is not an access: several programs
        updating one element through atomics is no race, so it is never recorded."""

    # ------------------------------------------------------------------ the events

    def window(self, param, batch, r0, c0, row_end, col_end, shape, write) -> None:
        layout = self.watched.get(param)
        if layout is None:
            return
        lanes, (batch, r0, c0, row_end, col_end) = self.active(batch, r0, c0, row_end, col_end)
        if lanes is None:
            return
        rows = r0[:, None] + np.arange(shape[0])
        first, last = np.maximum(c0, 0), np.minimum(col_end, c0 + shape[1])
        _, s1, s2 = layout.strides
        starts = (self.base(layout, batch) + first * s2)[:, None] + rows * s1
        ok = (rows >= 0) & (rows < row_end[:, None])
        runs = _runs(
            lanes.size, starts, (last - first)[:, None], np.arange(shape[0])[None],
            (first - c0)[:, None], ok,
        )  # fmt: skip
        last_row = np.minimum(row_end, r0 + shape[0])
        self.touched(layout, lanes, runs, (batch, np.maximum(r0, 0), last_row, first, last), write)

    def line(self, param, batch, start, end, fixed, axis, size, write) -> None:
        layout = self.watched.get(param)
        if layout is None:
            return
        _, rows_n, cols_n = self.executor.array(param).shape
        along_row = fixed is None or axis == 1  # the index runs along the columns
        if fixed is None:  # a 1-D array: row 0
            fixed = np.zeros(1, np.int64)
        lanes, (batch, start, end, fixed) = self.active(batch, start, end, fixed)
        if lanes is None:
            return
        fixed_ok = ((fixed >= 0) & (fixed < (rows_n if along_row else cols_n)))[:, None]
        first, last = np.maximum(start, 0), np.minimum(end, start + size)
        _, s1, s2 = layout.strides
        base = self.base(layout, batch)
        zero = np.zeros((1, 1), np.int64)
        if along_row:  # one run per lane
            starts = (base + fixed * s1 + first * s2)[:, None]
            runs = _runs(
                lanes.size, starts, (last - first)[:, None], zero, (first - start)[:, None],
                fixed_ok,
            )  # fmt: skip
            rectangles = (batch, fixed, fixed + 1, first, last)
        else:  # a column: one run of one element per row
            index = start[:, None] + np.arange(size)
            ok = (index >= 0) & (index < end[:, None]) & fixed_ok
            starts = (base + fixed * s2)[:, None] + index * s1
            one = np.ones((1, 1), np.int64)
            runs = _runs(lanes.size, starts, one, zero, np.arange(size)[None], ok)
            rectangles = (batch, first, last, fixed, fixed + 1)
        self.touched(layout, lanes, runs, rectangles, write)

    def element(self, param, batch, row, col, write) -> None:
        layout = self.watched.get(param)
        if layout is None:
            return
        lanes, (batch, row, col) = self.active(batch, row, col)
        if lanes is None:
            return
        _, s1, s2 = layout.strides
        starts = (self.base(layout, batch) + row * s1 + col * s2)[:, None]
        one, zero = np.ones((1, 1), np.int64), np.zeros((1, 1), np.int64)
        runs = _runs(lanes.size, starts, one, zero, zero, np.ones((1, 1), bool))
        self.touched(layout, lanes, runs, (batch, row, row + 1, col, col + 1), write)

    # ------------------------------------------------------------------ addresses

    def active(self, *per_lane):
        """The active lanes (an array of lane indices; None when there is none) and each
        per-lane array narrowed to them (one of a single entry stays as it is)."""
        lanes = self.executor.active_lanes()
        if lanes.size == 0:
            return None, per_lane
        if lanes.size == self.executor.n:
            return lanes, tuple(np.asarray(x, np.int64) for x in per_lane)
        return lanes, tuple(
            np.asarray(x[lanes] if x.shape[0] > 1 else x, np.int64) for x in per_lane
        )

    @staticmethod
    def base(layout: Layout, batch: np.ndarray) -> np.ndarray:
        return layout.offset + batch * layout.strides[0]

    def touched(self, layout, lanes, runs: Segments, rectangles, write) -> None:
        """``runs`` of ``layout`` touched by ``lanes`` (the event's active lanes);
        ``rectangles``: each lane's window (batch, r0, r1, c0, c1), clamped."""
        raise NotImplementedError


class Overlaps(Watcher):
    """Pass 1: every access to a watched memory as an interval of units, with its
    program and whether it stores; :meth:`conflicts` finds the units in conflict."""

    def __init__(self, kernel, grid):
        super().__init__(kernel, grid)
        self.intervals: dict[int, list] = {}  # memory index -> [(start, end, program, write)]

    def touched(self, layout, lanes, runs, rectangles, write) -> None:
        if not runs.unit.size:
            return
        found = self.intervals.setdefault(layout.memory.index, [])
        starts, ends, lane = runs.unit, runs.unit + runs.length * layout.span, runs.lane
        rows = runs.per_lane
        if rows > 1:  # a lane's runs that follow each other in memory are one interval
            by_lane_starts, by_lane_ends = starts.reshape(-1, rows), ends.reshape(-1, rows)
            if (by_lane_starts[:, 1:] == by_lane_ends[:, :-1]).all():
                starts, ends, lane = by_lane_starts[:, 0], by_lane_ends[:, -1], lane[::rows]
        programs = self.programs[lanes[lane]]
        found.append((starts, ends, programs, np.full(programs.size, bool(write))))

    def conflicts(self) -> dict[int, np.ndarray]:
        """Per watched memory (by index) with a conflict: its per-unit conflict mask."""
        sizes = {lay.memory.index: lay.memory.size for lay in self.watched.values()}
        out = {}
        for index, parts in self.intervals.items():
            columns = [np.concatenate(c) for c in zip(*parts)]
            mask = _conflicting_units(*columns, sizes[index])
            if mask is not None:
                out[index] = mask
        return out


def _conflicting_units(starts, ends, programs, writes, size) -> np.ndarray | None:
    """The per-unit conflict mask of a memory's intervals, or None where no unit is in
    conflict. One sort by start finds the clusters of overlapping intervals; a unit can
    only be in conflict inside a cluster that holds two programs and a store, so only
    those clusters' units are marked, one by one."""
    order = np.argsort(starts, kind="stable")
    starts, ends, programs, writes = starts[order], ends[order], programs[order], writes[order]
    reach = np.maximum.accumulate(ends)
    new = np.ones(starts.size, bool)
    new[1:] = starts[1:] >= reach[:-1]  # starts past every earlier interval's end
    heads = np.nonzero(new)[0]
    low = np.minimum.reduceat(programs, heads)
    high = np.maximum.reduceat(programs, heads)
    stores = np.logical_or.reduceat(writes, heads)
    suspect = (low != high) & stores
    if not suspect.any():
        return None
    cluster = np.cumsum(new) - 1
    chosen = suspect[cluster]
    units, owners, stored = _expanded(
        starts[chosen], ends[chosen], programs[chosen], writes[chosen]
    )
    dtype = np.int32 if programs.max(initial=0) < 2**31 else np.int64
    reader, writer = np.full(size, _NONE, dtype), np.full(size, _NONE, dtype)
    many_readers, many_writers = np.zeros(size, bool), np.zeros(size, bool)
    owners = owners.astype(dtype)
    _mark(writer, many_writers, units[stored], owners[stored])
    _mark(reader, many_readers, units[~stored], owners[~stored])
    read_by_other = many_readers | ((reader != _NONE) & (reader != writer))
    mask = many_writers | ((writer != _NONE) & read_by_other)
    return mask if mask.any() else None


def _expanded(starts, ends, programs, writes):
    """Every unit of the intervals, with its interval's program and store flag."""
    lengths = ends - starts
    total = int(lengths.sum())
    offsets = np.arange(total) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    units = np.repeat(starts, lengths) + offsets
    return units, np.repeat(programs, lengths), np.repeat(writes, lengths)


def _mark(owner: np.ndarray, many: np.ndarray, units: np.ndarray, programs: np.ndarray) -> None:
    """Record that ``programs[k]`` touched ``units[k]``: ``many`` where a second,
    different program did (one seen before, or another one of this call)."""
    seen = owner[units]
    differs = (seen != _NONE) & (seen != programs)
    owner[units] = programs
    differs |= owner[units] != programs  # another program of this call took the unit
    if differs.any():
        many[units[differs]] = True


@dataclass
class Log:
    """Pass 2's accesses to conflicting elements, one entry per element touched (lists
    of per-event arrays, joined by :meth:`columns`): ``units`` (each element's first),
    ``programs`` (flat grid indices), ``statements`` (index into
    :attr:`Accesses.statements`), ``writes``, ``params`` (the parameter's position among
    the arrays), ``values`` (what a store left there, as float64; NaN for a read) and
    ``sequence`` (the event's number: a program's later store overwrites its earlier
    one). ``windows``: per event, each touching lane's window (program, parameter,
    statement, write, batch, r0, r1, c0, c1), the programs' windows a view outlines."""

    units: list = field(default_factory=list)
    programs: list = field(default_factory=list)
    statements: list = field(default_factory=list)
    writes: list = field(default_factory=list)
    params: list = field(default_factory=list)
    values: list = field(default_factory=list)
    sequence: list = field(default_factory=list)
    windows: list = field(default_factory=list)

    COLUMNS = ("units", "programs", "statements", "writes", "params", "values", "sequence")

    def columns(self) -> dict[str, np.ndarray]:
        if not self.units:
            return {name: np.zeros(0, np.int64) for name in self.COLUMNS}
        return {name: np.concatenate(getattr(self, name)) for name in self.COLUMNS}

    def window_rows(self) -> np.ndarray:
        """Every window logged, one row of 9 ints each (see the class)."""
        if not self.windows:
            return np.zeros((0, 9), np.int64)
        return np.concatenate(self.windows)


class Accesses(Watcher):
    """Pass 2: logs every access to a conflicting unit (``hot``: per memory index, its
    conflict mask from pass 1) with its statement, for a store the value it left, and
    the window each program's access came from."""

    def __init__(self, kernel, grid, hot: dict[int, np.ndarray]):
        super().__init__(kernel, grid)
        self.hot = hot
        self.log = Log()
        self.statement = None  # the assignment or store running
        self.last = None  # the last one begun (for reads in an if/for/while header)
        self.pending = []  # a store's own entries: (values slot, where, dtype)
        self.ids: dict[int, int] = {}
        self.statements: list[ir.Stmt] = []
        ordered = list(statements(kernel.body))
        self.position = {id(stmt): k for k, stmt in enumerate(ordered)}
        self.headers = _header_reads(ordered)

    def watches(self, layout: Layout) -> bool:
        return layout.memory.index in self.hot

    def statement_id(self, stmt) -> int:
        found = self.ids.get(id(stmt))
        if found is None:
            found = self.ids[id(stmt)] = len(self.statements)
            self.statements.append(stmt)
        return found

    def assign_begins(self, stmt) -> None:
        self.statement = self.last = stmt

    def assigned(self, stmt, value) -> None:
        self.statement = None

    def store_begins(self, stmt) -> None:
        self.statement = self.last = stmt
        self.pending = []

    def stored(self, stmt, value) -> None:
        value = np.asarray(value)
        n = self.executor.n
        full = np.broadcast_to(value, (n, *value.shape[1:])).reshape(n, *_rows_columns(value))
        for slot, where, dtype in self.pending:
            self.log.values[slot] = full[where].astype(dtype).astype(np.float64)
        self.pending = []
        self.statement = None

    def reading_statement(self, param: str):
        """The statement an access belongs to: the running assignment or store, else
        the if/for/while header that reads ``param`` (the executor reports no event for
        a header; of several, the first after the last statement begun, else the
        nearest before it: a loop's condition, evaluated again after its body)."""
        if self.statement is not None:
            return self.statement
        candidates = self.headers.get(param, [])
        if len(candidates) == 1:
            return candidates[0][1]
        last = self.position.get(id(self.last), -1)
        after = [stmt for at, stmt in candidates if at > last]
        if after:
            return after[0]
        before = [stmt for at, stmt in candidates if at <= last]
        return before[-1] if before else (self.last or self.kernel.body[0])

    def touched(self, layout, lanes, runs, rectangles, write) -> None:
        hot = self.hot[layout.memory.index]
        lengths = runs.length
        run = np.repeat(np.arange(lengths.size), lengths)
        step = np.arange(run.size) - np.repeat(np.cumsum(lengths) - lengths, lengths)
        units = runs.unit[run] + step * layout.span
        hit = _hot(hot, units, layout.span)
        if not hit.any():
            return
        run, step, units = run[hit], step[hit], units[hit]
        active_index = runs.lane[run]
        executor_lanes = lanes[active_index]
        programs = self.programs[executor_lanes]
        stmt = self.statement_id(self.reading_statement(layout.param))
        size = programs.size
        log = self.log
        log.units.append(units)
        log.programs.append(programs)
        log.statements.append(np.full(size, stmt, np.int32))
        log.writes.append(np.full(size, bool(write)))
        log.params.append(np.full(size, layout.order, np.int32))
        log.values.append(np.full(size, np.nan))
        log.sequence.append(np.full(size, len(log.sequence), np.int64))
        if write:  # the value each lane stores there arrives with ``stored``
            where = (executor_lanes, runs.row[run], runs.column[run] + step)
            self.pending.append((len(log.values) - 1, where, layout.dtype))
        touching = np.unique(active_index)
        rows = np.empty((touching.size, 9), np.int64)
        rows[:, 0] = self.programs[lanes[touching]]
        rows[:, 1:4] = layout.order, stmt, bool(write)
        for k, box in enumerate(rectangles):
            rows[:, 4 + k] = np.broadcast_to(box, (lanes.size,))[touching]
        log.windows.append(rows)


def _rows_columns(value: np.ndarray) -> tuple[int, int]:
    """A stored value's (rows, columns) per lane, as :class:`Segments` address it: a
    tile's own, a vec as one row (along a row or down a column alike), a scalar 1×1."""
    inner = value.shape[1:]
    if len(inner) == 2:
        return inner
    return (1, inner[0]) if inner else (1, 1)


def _hot(hot: np.ndarray, units: np.ndarray, span: int) -> np.ndarray:
    """Which elements (by their first unit) are in conflict."""
    if span == 1:
        return hot[units]
    return hot[(units[:, None] + np.arange(span)).reshape(-1)].reshape(-1, span).any(axis=1)


def _header_reads(ordered: list) -> dict[str, list]:
    """Per array parameter, the if/for/while statements (of ``ordered``, pre-order)
    whose header (condition, loop bounds) reads it, as (position, statement)."""
    out: dict[str, list] = {}
    for at, stmt in enumerate(ordered):
        for expr in headers(stmt):
            for node in ir.walk(expr):
                if isinstance(node, ir.ArrayLoad | ir.LoadWindow | ir.VecLoad):
                    found = out.setdefault(node.view.param, [])
                    if not found or found[-1][1] is not stmt:
                        found.append((at, stmt))
    return out


# --------------------------------------------------------------------------- pairing


@dataclass(frozen=True)
class Pair:
    """Two programs in conflict in one memory, as pass 2's log names them: ``kind``,
    ``programs`` (flat grid indices: for a read-write, the reader then the writer; for
    a write-write, in grid order), ``count`` (the units both touched that way), ``unit``
    (the first), ``statements`` (each program's, at that unit: indices into
    :attr:`Accesses.statements`), ``param`` (the position, among the arrays, of the
    parameter the second program stored through) and, for a write-write, ``values``
    (what each stored there)."""

    kind: str
    programs: tuple[int, int]
    count: int
    unit: int
    statements: tuple[int, int]
    param: int
    values: tuple[float, float] | None


def pairs(c: dict[str, np.ndarray]) -> list[Pair]:
    """The program pairs in conflict in one memory's entries ``c`` (columns of
    :meth:`Log.columns`, of that memory's parameters alone).

    Every conflicting unit lands in at least one pair, and the pairs are few (at most
    one per access): two programs that store one unit pair with the next program, in
    grid order, that stores it too; a program that reads a unit pairs with the first
    program (in grid order) other than itself that stores it. Each pair's ``count`` is
    exact: every unit both touched that way."""
    if not c["units"].size:
        return []
    writes = _one_per_unit_and_program(c, c["writes"], "last")
    reads = _one_per_unit_and_program(c, ~c["writes"], "first")
    return _write_pairs(writes) + _read_pairs(reads, writes)


def _one_per_unit_and_program(c: dict, chosen: np.ndarray, keep: str) -> dict:
    """The entries ``chosen``, one per (unit, program) (its ``keep``: "first", or "last":
    the value a program's stores left), sorted by unit, then program."""
    part = {name: values[chosen] for name, values in c.items()}
    order = np.lexsort((part["sequence"], part["programs"], part["units"]))
    part = {name: values[order] for name, values in part.items()}
    units, programs = part["units"], part["programs"]
    changes = (units[1:] != units[:-1]) | (programs[1:] != programs[:-1])
    taken = np.ones(units.size, bool)
    if keep == "last":
        taken[:-1] = changes
    else:
        taken[1:] = changes
    return {name: values[taken] for name, values in part.items()}


def _write_pairs(writes: dict) -> list[Pair]:
    units, programs = writes["units"], writes["programs"]
    k = np.nonzero(units[1:] == units[:-1])[0]  # consecutive stores of one unit
    if not k.size:
        return []
    first, second = k, k + 1
    counts = _shared_counts(writes, writes, programs[first], programs[second])
    return _grouped(
        "write-write",
        programs[first],
        programs[second],
        units[first],
        (writes["statements"][first], writes["statements"][second]),
        writes["params"][first],
        (writes["values"][first], writes["values"][second]),
        counts,
    )


def _read_pairs(reads: dict, writes: dict) -> list[Pair]:
    w_units, w_programs = writes["units"], writes["programs"]
    r_units, r_programs = reads["units"], reads["programs"]
    if not r_units.size or not w_units.size:
        return []
    low = np.searchsorted(w_units, r_units, "left")
    high = np.searchsorted(w_units, r_units, "right")
    at = np.minimum(low, w_units.size - 1)
    other = np.where(w_programs[at] == r_programs, low + 1, low)  # not the reader itself
    ok = other < high
    if not ok.any():
        return []
    other = other[ok]
    readers, writers = r_programs[ok], w_programs[other]
    counts = _shared_counts(reads, writes, readers, writers)
    return _grouped(
        "read-write",
        readers,
        writers,
        r_units[ok],
        (reads["statements"][ok], writes["statements"][other]),
        writes["params"][other],
        None,
        counts,
    )


def _grouped(kind, first, second, units, statements, params, values, counts) -> list[Pair]:
    """One :class:`Pair` per (first, second) program pair: its lowest unit's entry."""
    order = np.lexsort((units, second, first))
    first, second = first[order], second[order]
    head = np.ones(order.size, bool)
    head[1:] = (first[1:] != first[:-1]) | (second[1:] != second[:-1])
    chosen = order[head]
    out = []
    for k, entry in zip(np.nonzero(head)[0], chosen):
        out.append(
            Pair(
                kind=kind,
                programs=(int(first[k]), int(second[k])),
                count=int(counts[entry]),
                unit=int(units[entry]),
                statements=(int(statements[0][entry]), int(statements[1][entry])),
                param=int(params[entry]),
                values=None
                if values is None
                else (float(values[0][entry]), float(values[1][entry])),
            )
        )
    return out


def _shared_counts(a: dict, b: dict, programs_a, programs_b) -> np.ndarray:
    """For each k: how many units program ``programs_a[k]`` has in ``a`` that program
    ``programs_b[k]`` also has in ``b`` (each a table of unique (unit, program) entries
    sorted by unit, then program)."""
    by_program = np.lexsort((a["units"], a["programs"]))
    a_programs, a_units = a["programs"][by_program], a["units"][by_program]
    start = np.searchsorted(a_programs, programs_a, "left")
    stop = np.searchsorted(a_programs, programs_a, "right")
    lengths = stop - start
    pair = np.repeat(np.arange(programs_a.size), lengths)
    offsets = np.arange(pair.size) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    units = a_units[np.repeat(start, lengths) + offsets]
    wanted = np.rec.fromarrays([units, programs_b[pair]])
    table = np.rec.fromarrays([b["units"], b["programs"]])  # sorted by (unit, program)
    at = np.searchsorted(table, wanted)
    found = at < table.size
    found[found] = table[at[found]] == wanted[found]
    return np.bincount(pair[found], minlength=programs_a.size)
