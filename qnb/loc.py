"""Where an IR node came from: the unit (kernel or func) and the line and column relative
to that unit's ``def`` line. Its own module because errors carry one (``QnbError.ir_loc``)
and the IR builds them, and errors must not import the IR (the IR imports the op registry,
which imports the language stubs, which raise errors)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Loc:
    unit: int
    line: int
    col: int = 0
