"""The trace recorder: an observer of the cpu executor that builds a ``qnb.Trace``.

The executor (``qnb.backends.cpu``) reports each assignment and store, and the memory
each statement touches, to its :class:`~qnb.backends.cpu.observer.Observer`; :class:`Recorder` is
the observer that turns those events into one :class:`~qnb.trace.TraceStep` per program
per statement, keeps what each store left in memory, and at the end builds the trace
through :meth:`qnb.trace.Trace.recorded`. An unwatched run never imports this module.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from qnb import ir
from qnb.backends.cpu.observer import Observer
from qnb.backends.cpu.semantics import window_masks
from qnb.trace import ArrayWrite, Region, SharedMemory, SourceUnit, Trace, TraceStep


class Touch(NamedTuple):
    """The rectangle of an array one statement touched, per lane (arrays of one entry
    where every lane agrees): rows ``[r0, r1)`` and columns ``[c0, c1)`` of slab
    ``batch`` of the executor's 3-D view (not yet clamped to the array)."""

    param: str
    batch: np.ndarray
    r0: np.ndarray
    r1: np.ndarray
    c0: np.ndarray
    c1: np.ndarray


class StepLimit(Exception):
    """A program has recorded the ``max_steps`` a recorder was given: the run stops."""


class Recorder(Observer):
    """Records every assignment and store of the programs ``programs`` (flat indices of
    ``grid``) run by one executor; ``arrays`` are the launch's array arguments, in their
    own shapes (their contents at launch are kept before the run). With ``max_steps``,
    :class:`StepLimit` is raised once a program has recorded that many steps."""

    sees_every_value = True

    def __init__(
        self, kernel: ir.KernelIR, grid, parsed_units, programs: range, arrays, max_steps=None
    ):
        self.kernel = kernel
        self.max_steps = max_steps
        self.grid = tuple(grid)
        self.units = parsed_units
        self.arrays = arrays
        self.initial = {name: np.array(a) for name, a in arrays.items()}
        # the bytes that overlapping parameters share, as they were at launch
        self.shared = SharedMemory.find(arrays)
        self.slabbed = {p.name for p in kernel.params if p.type.ndim == 3}
        self.steps: dict[tuple[int, int, int], list[TraceStep]] = {}
        self.tick = -1  # one per statement run (for all the programs it ran in)
        self.writes: list[ArrayWrite] = []  # by tick
        self.executor = None
        # While an assignment or store runs: what it read, its inputs, its own window.
        self.reads: list[Touch] | None = None
        self.inputs: dict[str, np.ndarray] = {}
        self.written: Touch | None = None
        for flat in programs:
            program = (flat % grid[0], (flat // grid[0]) % grid[1], flat // (grid[0] * grid[1]))
            self.steps[program] = []
        self.loops_around = _loops_around(kernel.body)

    def trace(self, parsed) -> Trace:
        """The trace of the run (``parsed``: the kernel's parsed source)."""
        return Trace.recorded(
            kernel_name=self.kernel.name,
            grid=self.grid,
            filename=parsed.filename,
            firstlineno=parsed.firstlineno,
            source_lines=parsed.source.splitlines(),
            arrays={name: np.array(a) for name, a in self.arrays.items()},
            steps=self.steps,
            initial=self.initial,
            writes=self.writes,
            shared=self.shared,
            units=[
                SourceUnit(unit.qualname, unit.filename, unit.firstlineno, unit.source.splitlines())
                for unit in self.units.values()
            ],
        )

    # ------------------------------------------------------------------ the executor's events

    def start(self, executor) -> None:
        self.executor = executor

    def assign_begins(self, stmt) -> None:
        self.reads = []
        self.inputs = self.variables(stmt.value)  # before the step changes them

    def assigned(self, stmt, value) -> None:
        target = self.shown(stmt.name)
        self.record(stmt, _op_name(stmt.value), target, self.inputs, value, self.reads, [])
        self.reads = None

    def store_begins(self, stmt) -> None:
        self.reads = []
        self.written = None

    def stored(self, stmt, value) -> None:
        written = self.written
        inputs = self.variables(stmt.value)
        writes = [written] if written else []
        op = f"atomic_{stmt.op}" if isinstance(stmt, ir.Atomic) else "store"
        self.record(stmt, op, stmt.view.param, inputs, value, self.reads, writes)
        self.reads = self.written = None
        if written:
            self.keep_written(written)

    def window(self, param, batch, r0, c0, row_end, col_end, shape, write) -> None:
        if self.reads is not None:
            r1 = np.minimum(row_end, r0 + shape[0])
            self.touched(Touch(param, batch, r0, r1, c0, np.minimum(col_end, c0 + shape[1])), write)

    def line(self, param, batch, start, end, fixed, axis, size, write) -> None:
        if self.reads is None:
            return
        end = np.minimum(end, start + size)
        if fixed is None:
            touch = Touch(param, batch, np.zeros_like(start), np.ones_like(start), start, end)
        elif axis == 1:
            touch = Touch(param, batch, fixed, fixed + 1, start, end)
        else:
            touch = Touch(param, batch, start, end, fixed, fixed + 1)
        self.touched(touch, write)

    def element(self, param, batch, row, col, write) -> None:
        if self.reads is not None:
            self.touched(Touch(param, batch, row, row + 1, col, col + 1), write)

    def touched(self, touch: Touch, write: bool) -> None:
        if write:
            self.written = touch
        else:
            self.reads.append(touch)

    # ------------------------------------------------------------------ the steps

    def where(self, loc):
        unit_name = (
            self.kernel.units[loc.unit].qualname
            if loc and loc.unit < len(self.kernel.units)
            else None
        )
        parsed = self.units.get(unit_name)
        if parsed is None or loc is None:
            return "?", 0, ""
        lines = parsed.source.splitlines()
        text = lines[loc.line - 1].strip() if 0 < loc.line <= len(lines) else ""
        return parsed.filename, parsed.firstlineno + loc.line - 1, text

    def regions(self, touches: list[Touch], lane) -> list[Region]:
        """One program's regions, clamped to their arrays; an empty window (its start past
        its end or past the array's edge) touches nothing and has none."""
        out = []
        for param, batch, r0, r1, c0, c1 in touches:
            _, rows, cols = self.executor.array(param).shape
            r0, c0 = (max(0, int(_lane(b, lane))) for b in (r0, c0))
            r1, c1 = (min(int(_lane(b, lane)), n) for b, n in ((r1, rows), (c1, cols)))
            if r0 < r1 and c0 < c1:
                slab = int(_lane(batch, lane)) if param in self.slabbed else None
                out.append(Region(param, r0, r1, c0, c1, slab))
        return out

    def record(self, stmt, op, target, inputs, value, reads, writes):
        filename, lineno, text = self.where(stmt.loc)
        self.tick += 1
        loops = {
            self.shown(var): self.executor.variable(var)
            for var in self.loops_around.get(id(stmt), ())
        }
        for lane in self.executor.active_lanes():
            program = self.executor.program(lane)
            steps = self.steps[program]
            steps.append(
                TraceStep(
                    index=len(steps),
                    program=program,
                    filename=filename,
                    lineno=lineno,
                    line=text,
                    op=op,
                    target=target,
                    inputs={name: _plain(_lane(v, lane)) for name, v in inputs.items()},
                    output=_plain(_lane(value, lane)),
                    reads=self.regions(reads or [], lane),
                    writes=self.regions(writes, lane),
                    tick=self.tick,
                    loops={name: int(_lane(v, lane)) for name, v in loops.items()},
                )
            )
            if self.max_steps is not None and len(steps) >= self.max_steps:
                raise StepLimit

    def shown(self, name: str) -> str:
        """The name a trace shows for an IR local: the user's, not the inlined func's
        prefixed one, and a description for a temporary."""
        return self.kernel.display.get(name, name)

    def variables(self, expr) -> dict[str, np.ndarray]:
        """The variables ``expr`` reads, as they are now (copies: the step about to run
        may assign one of them, and a later store may change a view of an array)."""
        found = {}
        for node in ir.walk(expr):
            if isinstance(node, ir.Var):
                value = self.executor.variable(node.name)
                if value is not None:
                    found[self.shown(node.name)] = value
        return found

    def keep_written(self, touch: Touch):
        """Keep what a store left in its array, so that ``Trace.arrays_at`` can replay it
        (and show it in the parameters bound to the same memory: ``Trace`` replays those
        in their shared bytes). Each active program's window is at most its tile, so this
        costs no more than the steps' own values."""
        array = self.executor.array(touch.param)
        lanes = self.executor.active_lanes()
        n = self.executor.n
        b, r0, r1, c0, c1 = (np.broadcast_to(x, (n,))[lanes] for x in touch[1:])
        # (the recorded window ends are clamped to its shape: r1 - r0 <= M, c1 - c0 <= N)
        shape = (max(1, int((r1 - r0).max(initial=1))), max(1, int((c1 - c0).max(initial=1))))
        row_end, col_end = np.minimum(r1, array.shape[1]), np.minimum(c1, array.shape[2])
        rows, cols, valid = window_masks(r0, c0, row_end, col_end, shape)
        flat = (b[:, None, None] * array.shape[1] + rows[:, :, None]) * array.shape[2] + cols[
            :, None, :
        ]
        index = np.unique(flat[valid])
        if index.size == 0:
            return
        values = array[np.unravel_index(index, array.shape)]
        if array.size < 2**31:
            index = index.astype(np.int32)
        self.writes.append(ArrayWrite(self.tick, touch.param, index, values))


def _loops_around(body, outer=()) -> dict[int, tuple[str, ...]]:
    """For each statement (by ``id``) inside ``for`` loops, their variables, outermost
    first."""
    found = {}
    for stmt in body:
        if outer:
            found[id(stmt)] = outer
        if isinstance(stmt, ir.For):
            found.update(_loops_around(stmt.body, (*outer, stmt.var)))
        elif isinstance(stmt, ir.If):
            found.update(_loops_around(stmt.then_body, outer))
            found.update(_loops_around(stmt.else_body, outer))
        elif isinstance(stmt, ir.While):
            found.update(_loops_around(stmt.body, outer))
    return found


def _op_name(value: ir.Expr) -> str:
    """The op a trace step shows for an assignment of ``value``."""
    if isinstance(value, ir.LoadWindow):
        return "load" if isinstance(value.base, ir.TileFill) else "load_"
    if isinstance(value, ir.Matmul):
        return "mma" if value.acc is not None else "matmul"
    names = {
        ir.Cholesky: "cholesky_",
        ir.SolveTriangular: "solve_triangular_",
        ir.Outer: "outer",
        ir.Transpose: "transpose",
        ir.VecLoad: "load",
        ir.TileGet: "get",
        ir.TileSet: "set",
        ir.ArrayLoad: "load",
        ir.RowCol: "row/col",
        ir.Cast: "astype",
        ir.Select: "where",
    }
    if isinstance(value, ir.TileFill):
        return "eye" if value.kind == "eye" else "fill"
    if isinstance(value, ir.Binary | ir.Unary):
        return value.op
    if isinstance(value, ir.Reduce | ir.IndexReduce):
        return value.op
    if isinstance(value, ir.Scan):
        return "cum" + value.op
    return names.get(type(value), "assign")


def _lane(values, lane):
    """One program's value of a per-program array (or the shared value)."""
    return values[lane] if values.shape[0] > 1 else values[0]


def _plain(value):
    if isinstance(value, np.ndarray) and value.ndim == 0:
        return value.item()
    if isinstance(value, np.generic):
        return value.item()
    return np.array(value)


__all__ = ["Recorder", "StepLimit", "Touch"]
