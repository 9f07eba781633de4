"""``qnb.puzzles.check``: a learner's kernel tried on every case of a puzzle, and what
went wrong, said in one sentence.

Each case is a launch on fresh arguments (random non-zero inputs, outputs poisoned with
NaN, or the least i32, so that an element no program writes shows), compared with the
puzzle's NumPy definition element by element. At the first failing case the grade
names the first wrong element (C order), and a cpu trace of that launch (the public
``kernel.trace``) says which program stored it and at which line; an element no
program stored is said so, with the region that nobody wrote. A kernel whose results
are right is then checked for hazards (``qnb.check``): one that races fails too.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from qnb.puzzles import describe
from qnb.puzzles.puzzle import Case, Puzzle

TRACE_PROGRAMS = 4096  # the most programs a cpu trace records (qnb.Trace)


@dataclass(frozen=True)
class CaseResult:
    """One case: ``passed``, and where not, the ``message``; ``tried`` is False for the
    cases after the first failing one (not run)."""

    case: Case
    passed: bool
    message: str = ""
    tried: bool = True

    @property
    def label(self) -> str:
        return self.case.label

    @property
    def sizes(self) -> dict:
        return dict(self.case.sizes)


@dataclass
class Grade:
    """What ``qnb.puzzles.check`` found (see its help)."""

    puzzle: str
    backend: str
    passed: bool
    cases: list[CaseResult]
    case: Case | None = None
    array: str | None = None  # the output the wrong element is in
    index: tuple[int, ...] | None = None
    expected: object = None
    got: object = None
    program: tuple[int, int, int] | None = None
    line: int | None = None
    message: str = ""
    hazard: object = None  # the qnb.check hazard record, where a race failed the kernel
    error: Exception | None = None  # the error the launch raised, where one did
    # for the picture: the output as stored, the expected one, the elements no one wrote
    got_array: np.ndarray | None = field(default=None, repr=False)
    expected_array: np.ndarray | None = field(default=None, repr=False)
    unwritten: np.ndarray | None = field(default=None, repr=False)
    wrong_mask: np.ndarray | None = field(default=None, repr=False)

    def __repr__(self) -> str:
        if self.passed:
            return f"<qnb.puzzles.Grade {self.puzzle!r} on {self.backend}: passed {self._count()}>"
        return f"<qnb.puzzles.Grade {self.puzzle!r} on {self.backend}: failed. {self.message}>"

    def _count(self) -> str:
        return f"{len(self.cases)} of {len(self.cases)} cases"

    def report(self) -> list[str]:
        """The grade in lines of text: the verdict, then one line per case tried."""
        head = (
            f"{self.puzzle}: passed, every case ({len(self.cases)}) on {self.backend}"
            if self.passed
            else f"{self.puzzle}: not yet. {self.message}"
        )
        lines = [head]
        for result in self.cases:
            mark = "\u2713" if result.passed else "\u2717" if result.tried else "\u00b7"
            lines.append(f"  {mark} {result.case}" + ("" if result.tried else ": not tried"))
        return lines

    def _repr_pretty_(self, printer, cycle) -> None:
        printer.text("\n".join(self.report()))

    def _repr_html_(self) -> str:
        from qnb.puzzles.report import grade_html

        return grade_html(self)


def check(puzzle: Puzzle, kernel, backend: str = "cpu") -> Grade:
    """Grade ``kernel`` on every case of ``puzzle`` (the cases after a failing one are
    not tried: they are listed as not run)."""
    results = []
    for number, case in enumerate(puzzle.cases):
        grade = _try(puzzle, kernel, backend, case, np.random.default_rng(number))
        if grade is not None:
            results.append(CaseResult(case, False, grade.message))
            later = puzzle.cases[number + 1 :]
            results += [CaseResult(c, False, "not tried", tried=False) for c in later]
            grade.cases = results
            return grade
        results.append(CaseResult(case, True))
    return Grade(puzzle.name, backend, True, results, message="every case passed")


def _launch(kernel, grid, args: dict, backend: str):
    import qnb

    with qnb.backend(backend):
        kernel[grid](*args.values())


def _try(puzzle: Puzzle, kernel, backend: str, case: Case, rng) -> Grade | None:
    """None where ``kernel`` passes ``case``; else the failed grade."""
    from qnb.errors import QnbError

    args, expected = puzzle.arguments(rng, case)
    fresh = {k: v.copy() if isinstance(v, np.ndarray) else v for k, v in args.items()}
    grid = puzzle.grid(dict(case.sizes))
    try:
        _launch(kernel, grid, args, backend)
    except QnbError as err:
        message = f"For {case.label}: {describe.error(err)}"
        return Grade(
            puzzle.name, backend, False, [], case, line=err.lineno, message=message, error=err
        )
    for name in puzzle.outputs:
        got, want = args[name], expected[name]
        wrong = ~_agree(got, want, puzzle.rtol, puzzle.atol)
        if wrong.any():
            return _wrong(puzzle, kernel, backend, case, grid, fresh, name, got, want, wrong)
    hazard = hazard_in(kernel, grid, fresh)
    if hazard is not None:
        message = f"For {case.label}: {describe.hazard(hazard)}"
        grade = Grade(puzzle.name, backend, False, [], case, hazard=hazard, message=message)
        grade.array, grade.index = hazard.array, tuple(hazard.index)
        grade.program, grade.line = tuple(hazard.programs[1]), hazard.lines[1]
        return grade
    return None


def hazard_in(kernel, grid, args: dict):
    """The first hazard ``qnb.check`` finds in the launch (a race between programs), or
    None."""
    from qnb.hazards import check

    found = check(kernel[grid], *args.values())
    return None if found.ok else found.hazards[0]


def _agree(got: np.ndarray, want: np.ndarray, rtol: float, atol: float) -> np.ndarray:
    if want.dtype.kind != "f":
        return got == want
    return np.isclose(got, want, rtol=rtol, atol=atol, equal_nan=False)


def _wrong(puzzle, kernel, backend, case, grid, args, name, got, want, wrong) -> Grade:
    index = tuple(int(i) for i in np.unravel_index(int(np.flatnonzero(wrong)[0]), wrong.shape))
    owners = store_owners(kernel, grid, args, name, got.shape)
    if owners is None:  # (no trace: too many programs) the poison tells what was not stored
        unwritten = np.isnan(got) if got.dtype.kind == "f" else got == np.iinfo(got.dtype).min
        program = line = None
    else:
        programs, lines = owners
        unwritten = programs[..., 0] < 0
        program = None if unwritten[index] else tuple(int(p) for p in programs[index])
        line = None if unwritten[index] else int(lines[index])
    unwritten &= wrong
    sentence = describe.wrong(name, got, want, wrong, unwritten, owners)
    return Grade(
        puzzle.name,
        backend,
        False,
        [],
        case,
        array=name,
        index=index,
        expected=want[index].item(),
        got=got[index].item(),
        program=program,
        line=line,
        message=f"For {case.label}: {sentence}",
        got_array=got,
        expected_array=want,
        unwritten=unwritten,
        wrong_mask=wrong,
    )


def store_owners(kernel, grid, args: dict, name: str, shape):
    """``(programs, lines)`` for output ``name`` (of ``shape``): per element, the program
    (3 ints; -1s where none did) that last stored it in a cpu trace of the launch, and
    that store's line; None where the grid has too many programs to trace, or where an
    atomic updates ``name`` (its elements have no one owner)."""
    grid3 = tuple(grid) + (1,) * (3 - len(grid))
    if grid3[0] * grid3[1] * grid3[2] > TRACE_PROGRAMS:
        return None
    fresh = [v.copy() if isinstance(v, np.ndarray) else v for v in args.values()]
    trace = kernel.trace[grid](*fresh)
    steps = [s for p in trace.programs for s in trace.steps(p)]
    if any(s.op.startswith("atomic_") and s.target == name for s in steps):
        return None  # updated atomically: many programs add to one element, none owns it
    view = (1,) * (2 - len(shape)) + tuple(shape[-2:])  # 1-D: one row
    programs = np.full((*view, 3), -1, np.int64)
    lines = np.zeros(view, np.int64)
    steps = [s for s in steps if s.writes]
    steps.sort(key=lambda s: s.tick if s.tick is not None else 0)  # (stable: grid order)
    for step in steps:
        for region in step.writes:
            if region.array == name:
                window = (slice(region.r0, region.r1), slice(region.c0, region.c1))
                programs[window] = step.program
                lines[window] = step.lineno
    return programs.reshape(*shape, 3), lines.reshape(shape)


__all__ = ["CaseResult", "Grade", "check", "hazard_in", "store_owners"]
