"""Debug mode on the GPU backends: explicit bounds checks written into the IR.

The cpu backend checks bounds as it runs. A GPU backend cannot raise from inside a
kernel, so in debug mode (``@qnb.kernel(debug=True)``) this pass adds a hidden i32
array parameter, ``qnb_errors``, and before each statement a check per risky index:
a negative window bound, a scalar index or batch outside its array, the fixed column
(or row) of an unpadded vec line outside its array, a tile index outside the tile's shape. A failing check stores its number in ``qnb_errors[0]``; after the
launch the kernel layer reads it back and raises ``QnbIndexError`` at that check's
line. Checks inside the right operand of ``and``/``or`` are guarded by the left one,
as Python would short-circuit.

Because the checks are ordinary IR, every backend runs them with no code of its own.
"""

from __future__ import annotations

from dataclasses import dataclass

from qnb import ir
from qnb.dtypes import bool_, i32

ERRORS_PARAM = "qnb_errors"
ERRORS_TYPE = ir.Type("array", i32, 1)


@dataclass(frozen=True)
class Check:
    """What check number ``index + 1`` guards: where it is and what it means."""

    loc: ir.Loc | None
    message: str
    unit: str | None  # the qualified name of the unit ``loc`` points into


def add_bounds_checks(kernel: ir.KernelIR) -> tuple[ir.KernelIR, list[Check]]:
    """A copy of ``kernel`` with the checks and the ``qnb_errors`` parameter added."""
    checks = _BoundsChecks(kernel)
    checked = ir.KernelIR(
        kernel.name,
        [*kernel.params, ir.Param(ERRORS_PARAM, ERRORS_TYPE)],
        checks.body(kernel.body),
        dict(kernel.locals),
        list(kernel.units),
    )
    return checked, checks.table


def _i32_const(value, loc):
    return ir.Const(ir.scalar(i32), loc, value)


def _either(a, b):
    if a is None:
        return b
    return ir.Binary(ir.scalar(bool_), b.loc, "or", a, b)


def _compare(op, value, bound):
    return ir.Binary(ir.scalar(bool_), value.loc, op, value, bound)


def _outside(value, limit):
    """value < 0 or value >= limit."""
    return _either(_compare("lt", value, _i32_const(0, value.loc)), _compare("ge", value, limit))


def _dim(view, axis):
    return ir.ArrayDim(ir.scalar(i32), None, view.param, axis)


def _negative(loc, *bounds):
    """Any of ``bounds`` < 0."""
    negative = None
    for bound in bounds:
        negative = _either(negative, _compare("lt", bound, _i32_const(0, loc)))
    return negative


class _BoundsChecks:
    """One walk of a kernel's statements: each risky index becomes an ``If`` that stores
    its check's number (1-based, into :data:`table`) to ``qnb_errors[0]``."""

    def __init__(self, kernel: ir.KernelIR):
        self.kernel = kernel
        self.table: list[Check] = []
        self.errors = ir.ArrayView(ERRORS_PARAM, ERRORS_TYPE)
        self.shapes = {p.name: p.type for p in kernel.params if p.type.kind == "array"}

    # ---- the conditions: (violation condition, loc, message) for every risky index

    def collect(self, node, out):
        """The checks of every risky index under ``node``."""
        if isinstance(node, ir.Logical):
            self.collect(node.left, out)
            inner = []
            self.collect(node.right, inner)
            left = (
                node.left
                if node.op == "and"
                else ir.Unary(node.left.type, node.left.loc, "not", node.left)
            )
            for cond, loc, message in inner:  # only where the right side really runs
                out.append((ir.Binary(ir.scalar(bool_), loc, "and", left, cond), loc, message))
            return
        for child in ir.children(node):
            if isinstance(child, ir.Expr | ir.ArrayView):
                self.collect(child, out)
        if isinstance(node, ir.ArrayView):
            return
        loc = getattr(node, "loc", None)
        if isinstance(node, ir.LoadWindow | ir.StoreWindow):
            self.window(node, loc, out)
        elif isinstance(node, ir.VecLoad | ir.VecStore):
            self.line(node, loc, out)
        elif isinstance(node, ir.ArrayLoad | ir.ArrayStore):
            self.view(node.view, loc, out)
            first = self.shapes[node.view.param].ndim - len(node.indices)
            bad = None
            for axis, index in enumerate(node.indices, start=first):
                bad = _either(bad, _outside(index, _dim(node.view, axis)))
            out.append((bad, loc, f"index out of range for {node.view.param!r}"))
        elif isinstance(node, ir.TileGet | ir.TileSet):
            shape = node.base.type.shape
            bad = _outside(node.i, _i32_const(shape[0], loc))
            if node.j is not None:
                bad = _either(bad, _outside(node.j, _i32_const(shape[1], loc)))
            out.append((bad, loc, tile_index_message(shape)))
        elif isinstance(node, ir.RowCol):
            side = node.operand.type.shape[0 if node.which == "row" else 1]
            out.append(
                (_outside(node.index, _i32_const(side, loc)), loc, tile_index_message((side,)))
            )

    def view(self, view, loc, out):
        if view.batch is not None:
            message = f"batch index out of range for {view.param!r}"
            out.append((_outside(view.batch, _dim(view, 0)), loc, message))

    def window(self, node, loc, out):
        self.view(node.view, loc, out)
        if not node.padded:  # a padded load/store may start before the array
            negative = _negative(loc, node.r0, node.r1, node.c0, node.c1)
            out.append((negative, loc, f"negative window bound on {node.view.param!r}"))

    def line(self, node, loc, out):
        self.view(node.view, loc, out)
        if getattr(node, "padded", False):
            return
        negative = _negative(loc, node.start, node.stop)
        out.append((negative, loc, f"negative bound on {node.view.param!r}"))
        if node.col is not None:  # the fixed column (or row) of a 2-D line
            first = self.shapes[node.view.param].ndim - 2
            side = first if node.axis == 1 else first + 1
            what = "row" if node.axis == 1 else "column"
            bad = _outside(node.col, _dim(node.view, side))
            out.append((bad, loc, f"{what} index out of range for {node.view.param!r}"))

    # ---- the statements

    def guarded(self, stmt, parts):
        found = []
        for part in parts:
            self.collect(part, found)
        out = []
        units = self.kernel.units
        for cond, loc, message in found:
            unit = units[loc.unit].qualname if loc and loc.unit < len(units) else None
            self.table.append(Check(loc, message, unit))
            code = _i32_const(len(self.table), loc)
            store = ir.ArrayStore(loc, self.errors, [_i32_const(0, loc)], code)
            out.append(ir.If(loc, cond, [store], []))
        return [*out, stmt]

    def body(self, stmts):
        result = []
        for stmt in stmts:
            result.extend(self.statement(stmt))
        return result

    def statement(self, stmt):
        if isinstance(stmt, ir.If):
            new = ir.If(stmt.loc, stmt.cond, self.body(stmt.then_body), self.body(stmt.else_body))
            return self.guarded(new, [stmt.cond])
        if isinstance(stmt, ir.For):
            new = ir.For(stmt.loc, stmt.var, stmt.start, stmt.stop, stmt.step, self.body(stmt.body))
            return self.guarded(new, [stmt.start, stmt.stop, stmt.step])
        if isinstance(stmt, ir.While):
            return self.loop(stmt)
        if isinstance(stmt, ir.Assign):
            return self.guarded(stmt, [stmt.value])
        if isinstance(stmt, ir.StoreWindow | ir.VecStore | ir.ArrayStore):
            return self.guarded(stmt, [stmt])
        return [stmt]

    def loop(self, stmt: ir.While):
        tests = self.guarded(None, [stmt.cond])[:-1]
        if not tests:
            return [ir.While(stmt.loc, stmt.cond, self.body(stmt.body))]
        # The condition runs before every iteration, so must its checks:
        # ``while True: <checks>; if not cond: break; <body>``.
        loc = stmt.loc
        stop = ir.If(loc, ir.Unary(ir.scalar(bool_), loc, "not", stmt.cond), [ir.Break(loc)], [])
        always = ir.Const(ir.scalar(bool_), loc, True)
        return [ir.While(loc, always, [*tests, stop, *self.body(stmt.body)])]


def tile_index_message(shape: tuple[int, ...]) -> str:
    """The error of an element index outside a tile or vec of ``shape`` (cpu and debug)."""
    if len(shape) == 1 or shape[0] == shape[1]:
        return f"tile index out of range 0..{shape[0] - 1}"
    return f"tile index out of range 0..{shape[0] - 1}, 0..{shape[1] - 1}"


def table_to_json(table: list[Check]) -> list[list]:
    """The check table as an artifact stores it (JSON), so a launcher loaded from the
    cache raises each check's error without lowering the kernel again."""
    return [
        [None if c.loc is None else [c.loc.unit, c.loc.line, c.loc.col], c.message, c.unit]
        for c in table
    ]


def table_from_json(data: list[list]) -> list[Check]:
    """:func:`table_to_json`'s table back."""
    return [
        Check(None if loc is None else ir.Loc(*loc), message, unit) for loc, message, unit in data
    ]
