"""What a typing rule may ask of the walker: the whole of it.

The rules in :mod:`qnb.frontend.semantics` receive a :class:`Builder`, never the walker
(as Triton's ``semantic.py`` receives an IR builder, never the AST visitor): they can
report an error at a node, place IR at the user's line, emit a statement, turn a value
into an IR expression, and rebind the variable an in-place method names, and nothing
else, so they cannot grow into a second walker. :class:`RuleBuilder` says what each
does; the walker makes one :class:`Builder` and hands it to every rule.
"""

from __future__ import annotations

import ast
from typing import Protocol

from qnb import ir
from qnb.dtypes import DType


class RuleBuilder(Protocol):
    """The typing rules' narrow view of the lowering walker."""

    # ------------------------------------------------------------------ where and what went wrong

    def error(self, cls, message: str, node: ast.AST):
        """The error ``cls`` (``QnbTypeError`` …) at ``node``'s line in the user's source,
        to raise."""

    def loc(self, node: ast.AST) -> ir.Loc:
        """The IR location of ``node`` (its unit, line and column)."""

    # ------------------------------------------------------------------ values as IR

    def require_value(self, value, node: ast.AST) -> ir.Expr:
        """``value`` as a typed IR expression (a Python number becomes a constant);
        anything that is not a value (an array, a method, a module) is refused."""

    def to_index(self, value, node: ast.AST, what: str = "index") -> ir.Expr:
        """``value`` as an i32 scalar (an index, a window bound); ``what`` names it in
        the refusal."""

    def condition(self, value, node: ast.AST) -> ir.Expr:
        """``value`` as a bool scalar (a number is true where it is not 0)."""

    def py_truth(self, value, node: ast.AST) -> bool:
        """The truth of a compile-time value (refused where Python has none)."""

    def coerce(self, value, type_: ir.Type, node: ast.AST) -> ir.Expr:
        """``value`` converted to ``type_`` (a number or a scalar fills a tile or vec)."""

    def cast_elements(self, expr: ir.Expr, dtype: DType) -> ir.Expr:
        """``expr`` with its elements converted to ``dtype`` (unchanged if it has it)."""

    # ------------------------------------------------------------------ statements

    def emit(self, stmt: ir.Stmt) -> None:
        """Append ``stmt`` to the block being lowered (a store)."""

    def temporary(self, hint: str, shown: str, type_: ir.Type) -> str:
        """A fresh local of ``type_`` for a value a statement produces (an atomic's old
        value); a trace shows it as ``shown``."""

    def load_window(self, base: ir.Expr, view: ir.ArrayView, r0, r1, c0, c1, node: ast.AST):
        """``base`` with the window ``view[r0:r1, c0:c1]`` loaded over it (the walker's
        window rules: clamping, the 3-D slab)."""

    def update_in_place(self, target: ast.Name, value: ir.Expr, node: ast.AST) -> None:
        """Rebind the tile variable ``target`` names to ``value`` (an in-place method:
        ``t.eye_()``, ``t.load_(…)``), the caller's too for a func's parameter."""


_OPERATIONS = tuple(
    name for name, value in vars(RuleBuilder).items() if callable(value) and name[0] != "_"
)


class Builder:
    """A :class:`RuleBuilder` over the walker: it holds the walker's own methods of those
    names (bound, so a rule's call costs what a call of the walker's did) and nothing
    else of it."""

    __slots__ = _OPERATIONS

    def __init__(self, walker):
        self.error, self.loc = walker.error, walker.loc
        self.require_value, self.to_index = walker.require_value, walker.to_index
        self.condition, self.py_truth = walker.condition, walker.py_truth
        self.coerce, self.cast_elements = walker.coerce, walker.cast_elements
        self.emit, self.load_window = walker.emit, walker.load_window
        self.temporary = walker.typed_temporary
        self.update_in_place = walker.update_in_place
