"""Self-grading tile-programming puzzles (contract: "Puzzles").

>>> import qnb.puzzles as puzzles
>>> puzzles.names()[:3]
['add_ten', 'multiply', 'guarded_square']
>>> puzzles.show("add_ten")            # the statement, as Markdown
>>> grade = puzzles.check("add_ten", my_kernel)
>>> grade.passed, grade.message

A puzzle is graded on the cpu backend by default (``backend="wgpu"`` runs it there);
every case is a launch on random non-zero data, always with a size of 1, sizes that are
not multiples of the tile, and a large one. A failed grade names the case, the first
wrong element, the program that stored it and its line (from a cpu trace), and says
what was wrong in one sentence; in a notebook it shows as a short report with a picture
of the wrong elements. ``notebooks/puzzles/`` holds every puzzle as a notebook.
"""

from __future__ import annotations

import inspect
import textwrap

from qnb.errors import QnbTypeError, caller_position, public
from qnb.puzzles.catalogue import PUZZLES
from qnb.puzzles.grade import CaseResult, Grade
from qnb.puzzles.puzzle import Case, Puzzle


class Statement(str):
    """A puzzle's statement: Markdown text, shown as Markdown in a notebook."""

    def _repr_markdown_(self) -> str:
        return str(self)


def names() -> list[str]:
    """The puzzle names, in teaching order."""
    return list(PUZZLES)


def puzzle(name: str) -> Puzzle:
    """The ``Puzzle`` record of ``name`` (its cases, its NumPy definition, its grid)."""
    found = PUZZLES.get(name) if isinstance(name, str) else None
    if found is None:
        known = ", ".join(PUZZLES)
        error = QnbTypeError(f"there is no puzzle {name!r}; the puzzles are: {known}")
        raise error.with_location(*caller_position())
    return found


@public
def show(name: str) -> Statement:
    """The statement of puzzle ``name`` as Markdown: what to compute, its NumPy
    definition, the kernel's signature and the grid it is launched over."""
    return Statement(puzzle(name).statement())


@public
def solution(name: str) -> str:
    """The source text of a reference solution of puzzle ``name`` (a ``@qnb.kernel``)."""
    from qnb.puzzles import solutions

    kernel = getattr(solutions, puzzle(name).name)
    return textwrap.dedent(inspect.getsource(kernel.__wrapped__)).strip() + "\n"


@public
def check(name: str, kernel, backend: str = "cpu") -> Grade:
    """Grade ``kernel`` (a ``@qnb.kernel``, or a kernel a ``%%qkernel`` cell defined) on
    every case of puzzle ``name`` → ``qnb.puzzles.Grade``: ``.passed``; ``.cases``
    (every shape tried, each with its outcome); on a failure ``.case`` (the first failing
    shape), ``.index`` (its first wrong element), ``.expected`` and ``.got``,
    ``.program`` (the program that stored that element, None when none wrote it),
    ``.line`` (the user's line of that store) and ``.message`` (one sentence). A kernel
    with a race between programs (``qnb.check``) fails with the hazard named, even
    where its result is right."""
    from qnb.kernel import Kernel
    from qnb.puzzles import grade

    chosen = puzzle(name)
    if not isinstance(kernel, Kernel):
        error = QnbTypeError(f"qnb.puzzles.check grades a @qnb.kernel, not {type(kernel).__name__}")
        raise error.with_location(*caller_position())
    return grade.check(chosen, kernel, backend)


__all__ = [
    "Case",
    "CaseResult",
    "Grade",
    "Puzzle",
    "Statement",
    "check",
    "names",
    "puzzle",
    "show",
    "solution",
]
