"""What ``kernel.trace[grid](*args)`` returns: every op of every program, with values.

A :class:`Trace` is recorded by the cpu backend. Each :class:`TraceStep` is one
statement of the kernel as it ran in one program: its source line, the op, the
values it read and produced, and the array regions it read and wrote.
"""

from __future__ import annotations

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


@dataclass
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

    @property
    def programs(self) -> list[tuple[int, int, int]]:
        """Every program of the grid that ran, in launch order."""
        return list(self._steps)

    def steps(self, program=(0, 0, 0)) -> list[TraceStep]:
        """The steps of one program; ``program`` is an int or a tuple of up to 3 ints."""
        if isinstance(program, int):
            program = (program,)
        program = tuple(program) + (0,) * (3 - len(program))
        try:
            return self._steps[program]
        except KeyError:
            raise KeyError(f"program {program} is not in this trace's grid {self.grid}") from None

    def __len__(self) -> int:
        return sum(len(s) for s in self._steps.values())

    def __repr__(self) -> str:
        return (
            f"<qnb.Trace of {self.kernel_name!r}: {len(self._steps)} programs, {len(self)} steps>"
        )
