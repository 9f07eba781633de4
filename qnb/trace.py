"""What ``kernel.trace[grid](*args)`` returns: every op of every program, with values.

A :class:`Trace` is recorded by the cpu backend. Each :class:`TraceStep` is one
statement of the kernel as it ran in one program: its source line, the op, the
values it read and produced, and the array regions it read and wrote.

The cpu backend runs every program in lockstep: one statement for all programs at once.
Each step carries that statement's ``tick``, and the trace keeps the arrays' contents at
launch and what each store left in memory, so :meth:`Trace.arrays_at` can replay the
arrays as they were at any step.
"""

from __future__ import annotations

import bisect
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

    def __repr__(self) -> str:
        target = f" \u2192 {self.target}" if self.target else ""
        text = f"<TraceStep {self.index} of program {self.program}, line {self.lineno}: {self.op}{target}"
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
        Copies, replayed from the launch's contents; a trace made without its history
        gives its final arrays."""
        steps = self.steps(program)
        if not -len(steps) <= step < len(steps):
            raise IndexError(
                f"program {steps[0].program if steps else program} has {len(steps)} "
                f"steps; there is no step {step}"
            )
        tick = steps[step].tick
        if self._initial is None or tick is None:
            return {name: np.array(a) for name, a in self.arrays.items()}
        out = self.initial_arrays  # C-contiguous copies: reshape(-1) is a view
        ticks = [w.tick for w in self._writes]
        for write in self._writes[: bisect.bisect_right(ticks, tick)]:
            out[write.array].reshape(-1)[write.index] = write.values
        return out

    def __len__(self) -> int:
        return sum(len(s) for s in self._steps.values())

    def __repr__(self) -> str:
        return (
            f"<qnb.Trace of {self.kernel_name!r}: {len(self._steps)} programs, {len(self)} steps>"
        )
