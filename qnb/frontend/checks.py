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
    table: list[Check] = []
    errors = ir.ArrayView(ERRORS_PARAM, ERRORS_TYPE)
    shapes = {p.name: p.type for p in kernel.params if p.type.kind == "array"}

    def i32_const(value, loc):
        return ir.Const(ir.scalar(i32), loc, value)

    def either(a, b):
        if a is None:
            return b
        return ir.Binary(ir.scalar(bool_), b.loc, "or", a, b)

    def compare(op, value, bound):
        return ir.Binary(ir.scalar(bool_), value.loc, op, value, bound)

    def outside(value, limit):
        """value < 0 or value >= limit."""
        return either(compare("lt", value, i32_const(0, value.loc)), compare("ge", value, limit))

    def dim(view, axis):
        return ir.ArrayDim(ir.scalar(i32), None, view.param, axis)

    def view_checks(view, loc, out):
        if view.batch is not None:
            out.append(
                (
                    outside(view.batch, dim(view, 0)),
                    loc,
                    f"batch index out of range for {view.param!r}",
                )
            )

    def collect(node, out):
        """(violation condition, loc, message) for every risky index under ``node``."""
        if isinstance(node, ir.Logical):
            collect(node.left, out)
            inner = []
            collect(node.right, inner)
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
                collect(child, out)
        loc = getattr(node, "loc", None)
        if isinstance(node, ir.ArrayView):
            return
        if isinstance(node, ir.LoadWindow | ir.StoreWindow):
            view_checks(node.view, loc, out)
            if not node.padded:  # a padded load/store may start before the array
                negative = None
                for bound in (node.r0, node.r1, node.c0, node.c1):
                    negative = either(negative, compare("lt", bound, i32_const(0, loc)))
                out.append((negative, loc, f"negative window bound on {node.view.param!r}"))
        elif isinstance(node, ir.VecLoad | ir.VecStore):
            view_checks(node.view, loc, out)
            if not getattr(node, "padded", False):
                negative = either(
                    compare("lt", node.start, i32_const(0, loc)),
                    compare("lt", node.stop, i32_const(0, loc)),
                )
                out.append((negative, loc, f"negative bound on {node.view.param!r}"))
                if node.col is not None:  # the fixed column (or row) of a 2-D line
                    first = shapes[node.view.param].ndim - 2
                    side = first if node.axis == 1 else first + 1
                    what = "row" if node.axis == 1 else "column"
                    out.append(
                        (
                            outside(node.col, dim(node.view, side)),
                            loc,
                            f"{what} index out of range for {node.view.param!r}",
                        )
                    )
        elif isinstance(node, ir.ArrayLoad | ir.ArrayStore):
            view_checks(node.view, loc, out)
            first = shapes[node.view.param].ndim - len(node.indices)
            bad = None
            for axis, index in enumerate(node.indices, start=first):
                bad = either(bad, outside(index, dim(node.view, axis)))
            out.append((bad, loc, f"index out of range for {node.view.param!r}"))
        elif isinstance(node, ir.TileGet | ir.TileSet):
            shape = node.base.type.shape
            bad = outside(node.i, i32_const(shape[0], loc))
            if node.j is not None:
                bad = either(bad, outside(node.j, i32_const(shape[1], loc)))
            out.append((bad, loc, tile_index_message(shape)))
        elif isinstance(node, ir.RowCol):
            side = node.operand.type.shape[0 if node.which == "row" else 1]
            out.append(
                (outside(node.index, i32_const(side, loc)), loc, tile_index_message((side,)))
            )

    def guarded(stmt, parts):
        found = []
        for part in parts:
            collect(part, found)
        out = []
        for cond, loc, message in found:
            unit = kernel.units[loc.unit].qualname if loc and loc.unit < len(kernel.units) else None
            table.append(Check(loc, message, unit))
            code = i32_const(len(table), loc)
            store = ir.ArrayStore(loc, errors, [i32_const(0, loc)], code)
            out.append(ir.If(loc, cond, [store], []))
        return [*out, stmt]

    def body(stmts):
        result = []
        for stmt in stmts:
            result.extend(statement(stmt))
        return result

    def statement(stmt):
        if isinstance(stmt, ir.If):
            new = ir.If(stmt.loc, stmt.cond, body(stmt.then_body), body(stmt.else_body))
            return guarded(new, [stmt.cond])
        if isinstance(stmt, ir.For):
            new = ir.For(stmt.loc, stmt.var, stmt.start, stmt.stop, stmt.step, body(stmt.body))
            return guarded(new, [stmt.start, stmt.stop, stmt.step])
        if isinstance(stmt, ir.While):
            tests = guarded(None, [stmt.cond])[:-1]
            if not tests:
                return [ir.While(stmt.loc, stmt.cond, body(stmt.body))]
            # The condition runs before every iteration, so must its checks:
            # ``while True: <checks>; if not cond: break; <body>``.
            loc = stmt.loc
            stop = ir.If(
                loc, ir.Unary(ir.scalar(bool_), loc, "not", stmt.cond), [ir.Break(loc)], []
            )
            always = ir.Const(ir.scalar(bool_), loc, True)
            return [ir.While(loc, always, [*tests, stop, *body(stmt.body)])]
        if isinstance(stmt, ir.Assign):
            return guarded(stmt, [stmt.value])
        if isinstance(stmt, ir.StoreWindow | ir.VecStore | ir.ArrayStore):
            return guarded(stmt, [stmt])
        return [stmt]

    checked = ir.KernelIR(
        kernel.name,
        [*kernel.params, ir.Param(ERRORS_PARAM, ERRORS_TYPE)],
        body(kernel.body),
        dict(kernel.locals),
        list(kernel.units),
    )
    return checked, table


def tile_index_message(shape: tuple[int, ...]) -> str:
    """The error of an element index outside a tile or vec of ``shape`` (cpu and debug)."""
    if len(shape) == 1 or shape[0] == shape[1]:
        return f"tile index out of range 0..{shape[0] - 1}"
    return f"tile index out of range 0..{shape[0] - 1}, 0..{shape[1] - 1}"
