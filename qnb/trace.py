"""What ``kernel.trace[grid](*args)`` returns: every op of every program, with values.

A :class:`Trace` is recorded by the cpu backend: the observer of its executor
(``qnb.backends.cpu.trace.Recorder``) builds it with :meth:`Trace.recorded`. Each
:class:`TraceStep` is one statement of the kernel as it ran in one program: its source
line, the op, the values it read and produced, and the array regions it read and wrote.

The cpu backend runs every program in lockstep: one statement for all programs at once.
Each step carries that statement's ``tick``, and the trace keeps the arrays' contents at
launch and what each store left in memory, so :meth:`Trace.arrays_at` can replay the
arrays as they were at any step. Parameters bound to overlapping memory (one array
passed twice, ``x[:-1]`` and ``x[1:]``, ``x`` and ``x.reshape(16, 16)``) are replayed in
their shared bytes (:class:`SharedMemory`), so a store through one shows in the others.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True)
class Region:
    """A rectangle of an array touched by an op: rows ``[r0, r1)``, columns ``[c0, c1)``
    of the 2-D view (``batch`` is the slab index of a 3-D array, else None). For a
    1-D array, rows are (0, 1) and columns the index range."""

    array: str
    r0: int
    r1: int
    c0: int
    c1: int
    batch: int | None = None

    def __str__(self) -> str:
        slab = "" if self.batch is None else f"{self.batch}, "
        return f"{self.array}[{slab}{self.r0}:{self.r1}, {self.c0}:{self.c1}]"


@dataclass(repr=False)
class TraceStep:
    """One statement executed by one program."""

    index: int  # position in this program's sequence of steps
    program: tuple[int, int, int]
    filename: str
    lineno: int  # the user's own (absolute) line number
    line: str  # that line's text
    op: str  # e.g. "load", "mma", "store", "cholesky_", "assign", "if", "for"
    target: str | None  # the variable assigned, or the array stored to
    inputs: dict[str, object] = field(default_factory=dict)  # operand name -> value
    output: object = None  # the value assigned or stored (ndarray or scalar)
    reads: list[Region] = field(default_factory=list)
    writes: list[Region] = field(default_factory=list)
    # When it ran: the steps of all programs with one tick are one statement, run for
    # every program at once (None in a trace made by hand).
    tick: int | None = None
    # The loop variables of the ``for`` loops around the statement, outermost first, as
    # this program had them then (``{"kb": 2}``: the third iteration of ``for kb in
    # range(...)``); empty outside loops.
    loops: dict[str, int] = field(default_factory=dict)

    def __repr__(self) -> str:
        target = f" \u2192 {self.target}" if self.target else ""
        text = f"<TraceStep {self.index} of program {self.program}, line {self.lineno}: {self.op}{target}"
        if self.loops:
            text += " (" + ", ".join(f"{k} = {v}" for k, v in self.loops.items()) + ")"
        if self.inputs:
            text += "; in " + ", ".join(f"{k}: {_summary(v)}" for k, v in self.inputs.items())
        if self.output is not None:
            text += f"; out {_summary(self.output)}"
        if self.reads:
            text += "; reads " + ", ".join(str(r) for r in self.reads)
        if self.writes:
            text += "; writes " + ", ".join(str(r) for r in self.writes)
        return text + ">"


def _summary(value) -> str:
    """A value in a few characters: an array's shape and dtype, a scalar itself."""
    if isinstance(value, np.ndarray):
        shape = "\u00d7".join(str(n) for n in value.shape) or "0-d"
        return f"{shape} {value.dtype}"
    text = repr(value)
    return text if len(text) <= 24 else text[:21] + "..."


@dataclass(frozen=True)
class ArrayWrite:
    """What one statement left in one array: its elements at ``index`` (flat, C order)
    hold ``values`` after the statement ran, in every program that stored."""

    tick: int
    array: str
    index: np.ndarray
    values: np.ndarray


@dataclass(frozen=True)
class SourceUnit:
    """The source of one unit of a trace: the kernel or a ``@qnb.func`` it calls."""

    name: str
    filename: str
    firstlineno: int  # the absolute line of ``lines[0]``
    lines: list[str]

    def holds(self, filename: str, lineno: int) -> bool:
        return filename == self.filename and 0 <= lineno - self.firstlineno < len(self.lines)


class SharedMemory:
    """Array parameters whose memory overlaps, replayed in the bytes they share: the
    bytes they span at launch, and where each parameter lies in them (offset, shape,
    strides, dtype). A store through one parameter then shows in every other, whatever
    its view (shifted, reshaped, a prefix, a slab, another dtype). At most one more copy
    of the memory the user's arrays already span."""

    def __init__(self, arrays: dict[str, np.ndarray]):
        low = min(arrays.values(), key=lambda a: _byte_bounds(a)[0])
        start = _byte_bounds(low)[0]
        end = max(_byte_bounds(a)[1] for a in arrays.values())
        self.initial = _bytes_from(low, end - start)
        self.layouts = {
            name: (_data_address(a) - start, a.shape, a.strides, a.dtype)
            for name, a in arrays.items()
        }

    @classmethod
    def find(cls, arrays: dict[str, np.ndarray]) -> list[SharedMemory]:
        """The groups of two or more ``arrays`` whose memory overlaps (directly or through
        another member of the group)."""
        names = [name for name, a in arrays.items() if a.size]
        group = {name: {name} for name in names}
        for k, first in enumerate(names):
            for second in names[k + 1 :]:
                if group[first] is not group[second] and _overlap(arrays[first], arrays[second]):
                    merged = group[first] | group[second]
                    for name in merged:
                        group[name] = merged
        groups = {id(g): g for g in group.values() if len(g) > 1}.values()
        return [cls({name: arrays[name] for name in names if name in g}) for g in groups]

    def views(self) -> dict[str, np.ndarray]:
        """Each parameter as a writable view of a fresh copy of the launch's bytes."""
        memory = self.initial.copy()
        return {
            name: np.ndarray(shape, dtype, buffer=memory, offset=offset, strides=strides)
            for name, (offset, shape, strides, dtype) in self.layouts.items()
        }


def _data_address(a: np.ndarray) -> int:
    return a.__array_interface__["data"][0]


def _byte_bounds(a: np.ndarray) -> tuple[int, int]:
    """The first byte and one past the last byte that ``a`` (non-empty) addresses."""
    low = high = _data_address(a)
    for n, stride in zip(a.shape, a.strides):
        reach = (n - 1) * stride
        low, high = (low + reach, high) if reach < 0 else (low, high + reach)
    return low, high + a.itemsize


def _bytes_from(a: np.ndarray, count: int) -> np.ndarray:
    """A copy of ``count`` bytes of memory from the lowest address ``a`` addresses."""
    first = tuple(slice(n - 1, n) if s < 0 else slice(0, 1) for n, s in zip(a.shape, a.strides))
    raw = a[first].reshape(-1).view(np.uint8)  # its first element's bytes: a view
    return np.lib.stride_tricks.as_strided(raw, (count,), (1,), writeable=False).copy()


def _overlap(a: np.ndarray, b: np.ndarray) -> bool:
    try:
        return bool(np.shares_memory(a, b, max_work=100_000))
    except np.exceptions.TooHardError:  # undecided: replaying them together is still exact
        return True


@dataclass
class Trace:
    """The recorded run of a kernel over a grid (cpu backend)."""

    kernel_name: str
    grid: tuple[int, int, int]
    filename: str
    firstlineno: int
    source_lines: list[str]  # the kernel's own source, one entry per line
    arrays: dict[str, np.ndarray]  # final contents of every array argument
    _steps: dict[tuple[int, int, int], list[TraceStep]] = field(default_factory=dict)
    # The arrays at launch (None: not recorded) and each store's effect, by tick.
    _initial: dict[str, np.ndarray] | None = None
    _writes: list[ArrayWrite] = field(default_factory=list)
    _shared: list[SharedMemory] = field(default_factory=list)
    # The kernel's and its funcs' sources (empty: only the kernel's, ``source_lines``).
    _units: list[SourceUnit] = field(default_factory=list)

    @classmethod
    def recorded(
        cls,
        kernel_name: str,
        grid: tuple[int, int, int],
        filename: str,
        firstlineno: int,
        source_lines: list[str],
        arrays: dict[str, np.ndarray],
        *,
        steps: dict[tuple[int, int, int], list[TraceStep]],
        initial: dict[str, np.ndarray] | None = None,
        writes: Sequence[ArrayWrite] = (),
        shared: Sequence[SharedMemory] = (),
        units: Sequence[SourceUnit] = (),
    ) -> Trace:
        """A trace from the record of a run: each program's ``steps`` (launch order), the
        arrays at launch (``initial``; None: not recorded, and ``arrays_at`` gives the
        final ``arrays``), what each store left in memory (``writes``, by tick), the groups
        of parameters bound to overlapping memory (``shared``) and the sources of the
        ``@qnb.func`` units the steps ran in (``units``). The cpu backend's recorder
        (``qnb.backends.cpu.trace``) builds its trace so; a trace made by hand may pass
        ``steps`` alone."""
        return cls(
            kernel_name,
            tuple(grid),
            filename,
            firstlineno,
            source_lines,
            arrays,
            _steps=dict(steps),
            _initial=initial,
            _writes=list(writes),
            _shared=list(shared),
            _units=list(units),
        )

    @property
    def programs(self) -> list[tuple[int, int, int]]:
        """Every program of the grid that ran, in launch order."""
        return list(self._steps)

    def steps(self, program=(0, 0, 0)) -> list[TraceStep]:
        """The steps of one program; ``program`` is an int or a tuple of up to 3 ints."""
        if isinstance(program, int | np.integer):
            program = (int(program),)
        program = tuple(program) + (0,) * (3 - len(program))
        try:
            return self._steps[program]
        except KeyError:
            raise KeyError(f"program {program} is not in this trace's grid {self.grid}") from None

    @property
    def initial_arrays(self) -> dict[str, np.ndarray]:
        """Every array argument as it was at launch (copies; the final arrays for a
        trace made without its history)."""
        source = self.arrays if self._initial is None else self._initial
        return {name: np.array(a) for name, a in source.items()}

    def arrays_at(self, program=(0, 0, 0), step: int = 0) -> dict[str, np.ndarray]:
        """Every array argument as it was when step ``step`` of ``program`` ran: after
        that statement ran in every program (a store's values are in), before the next.
        A negative ``step`` counts from the end. Copies, replayed from the launch's
        contents (a store shows in every parameter bound to the same memory); a trace
        made without its history gives its final arrays."""
        steps = self.steps(program)
        if not isinstance(step, int | np.integer) or isinstance(step, bool):
            raise TypeError(f"step is an index into the program's steps (an int), not {step!r}")
        if not -len(steps) <= step < len(steps):
            raise IndexError(
                f"program {steps[0].program if steps else program} has {len(steps)} "
                f"steps; there is no step {step}"
            )
        tick = steps[step].tick
        if self._initial is None or tick is None:
            return {name: np.array(a) for name, a in self.arrays.items()}
        out = self.initial_arrays  # C-contiguous copies: reshape(-1) is a view
        shared = {}  # parameters that overlap: views of their group's replayed bytes
        for memory in self._shared:
            shared.update(memory.views())
        ticks = [w.tick for w in self._writes]
        for write in self._writes[: bisect.bisect_right(ticks, tick)]:
            if write.array in shared:
                view = shared[write.array]
                view[np.unravel_index(write.index, view.shape)] = write.values
            else:
                out[write.array].reshape(-1)[write.index] = write.values
        out.update((name, np.array(view)) for name, view in shared.items())
        return out

    @property
    def kernel_source(self) -> SourceUnit:
        return SourceUnit(self.kernel_name, self.filename, self.firstlineno, self.source_lines)

    def source_of(self, step: TraceStep) -> SourceUnit | None:
        """The source of the unit ``step`` ran in: the kernel's, or a ``@qnb.func``'s
        (from another cell or file); None where the trace does not hold it."""
        for unit in [self.kernel_source, *self._units]:
            if unit.holds(step.filename, step.lineno):
                return unit
        return None

    def __len__(self) -> int:
        return sum(len(s) for s in self._steps.values())

    def __repr__(self) -> str:
        return (
            f"<qnb.Trace of {self.kernel_name!r}: {len(self._steps)} programs, {len(self)} steps>"
        )
