"""Python's evaluation order, kept: operands, call arguments, comparators and indices
are lowered left to right, and where a later one emits statements (an inlined func that
stores, or updates a tile in place) an earlier value those statements change is taken
into a temporary first. Code without such calls is lowered unchanged."""

from __future__ import annotations

import ast

from qnb import ir
from qnb.dtypes import i32
from qnb.errors import QnbTypeError
from qnb.frontend.parse import is_negative_literal
from qnb.frontend.scopes import Pending, Var
from qnb.frontend.semantics import Py
from qnb.frontend.values import _Known, _Method, plural, unparse


class EvaluationOrder:
    def __init__(self, lower):
        self.lower = lower  # the walker

    def materialise(self, expr, hint, node) -> ir.Expr:
        """``expr`` computed now into a temporary; the temporary's variable."""
        lower = self.lower
        shown = unparse(node) if isinstance(node, ast.expr) else hint
        name = lower.temporary(hint, shown)
        lower.scopes.joined[name] = expr.type
        lower.emit(ir.Assign(lower.loc(node), name, expr))
        return ir.Var(expr.type, lower.loc(node), name)

    def ordered(self, nodes, earlier=()) -> list:
        """Lower ``nodes`` left to right after the ``earlier`` (value, node) pairs, as
        Python evaluates them: where a node emits statements (an inlined func's body), a
        value before it that those statements change (an array element read before a
        store, ``t[0, 0]`` or ``t * 2`` before a func updates ``t`` in place) is taken
        into a temporary first. Nothing is copied when nothing later emits statements."""
        lower = self.lower
        values = [value for value, _ in earlier]
        sources = [node for _, node in earlier]
        for node in nodes:
            with lower.captured_block() as emitted:
                value = lower.lower_expr(node)
            if emitted:
                assigned, stores = effects(emitted)
                if assigned or stores:
                    values = [
                        self.pinned(value_, source, assigned, stores)
                        for value_, source in zip(values, sources)
                    ]
                lower.block.extend(emitted)
            values.append(value)
            sources.append(node)
        return values

    def pinned(self, value, node, assigned: set[str], stores: bool, variables=False):
        """``value``, held in a temporary if it reads what ``assigned``/``stores`` change.

        A variable itself is kept unless ``variables``: a tile variable is the tile, as a
        NumPy array is in Python (``t + bump(t)`` adds the tile bump updated in place; the
        variable of an in-place method or a func's tile parameter must stay itself), and
        nothing but an assignment changes a number variable."""
        if isinstance(value, tuple):
            return tuple(self.pinned(item, node, assigned, stores, variables) for item in value)
        if isinstance(value, ir.ArrayView):
            batch = value.batch
            if isinstance(batch, ir.Expr) and depends_on(batch, assigned, stores):
                batch = self.materialise(batch, "batch", node)
                return ir.ArrayView(value.param, value.type, batch)
            return value
        if isinstance(value, ir.Var) and not variables:
            return value
        if (
            isinstance(value, ir.Expr)
            and not isinstance(value, ir.Const)
            and depends_on(value, assigned, stores)
        ):
            return self.materialise(value, "operand", node)
        return value

    def evaluate_once(self, target: ast.Subscript, earlier=()) -> tuple[ast.Subscript, list]:
        """A copy of ``target`` whose container and index expressions are lowered now,
        after the ``earlier`` (value, node) pairs (the value being assigned: Python computes
        it first), and those values, held in temporaries where lowering the target emits
        statements that change what they read."""
        indexing = self.lower.indexing
        base = target.value
        nodes = [] if isinstance(base, ast.Name | _Known) else [base]

        def collect(node):
            if not is_negative_literal(node):  # a literal -1 is refused where it is used
                nodes.append(node)

        indexing.map_subscript(target, collect)
        values = self.ordered(nodes, earlier)
        lowered = iter(values[len(earlier) :])

        def known(node):
            return node if is_negative_literal(node) else _Known(next(lowered), node)

        if not isinstance(base, ast.Name | _Known):
            base = known(base)
        copy = indexing.map_subscript(target, known, base, target.ctx)
        return copy, values[: len(earlier)]

    def pin_indices(self, target: ast.Subscript) -> ast.Subscript:
        """``target`` with each runtime index held in a temporary (the indices are taken
        before code that could change what they read)."""

        def pin(node):
            value = node.value if isinstance(node, _Known) else None
            if isinstance(value, ir.Expr) and not isinstance(
                value, ir.Const | ir.Var | ir.ProgramId
            ):
                return _Known(self.materialise(value, "index", node), node)
            return node

        return self.lower.indexing.map_subscript(target, pin, target.value, ast.Store())

    def unpack(self, target: ast.Tuple, value, value_node) -> list:
        """The values a tuple assignment gives its targets. Python computes every value
        before it assigns any target, so a value that reads what an earlier target
        assigns (``a, b = b, a``; ``y[0], y[1] = y[1], y[0]``) is taken into a temporary
        first."""
        lower = self.lower
        count = len(target.elts)
        if isinstance(value, Py) and isinstance(value.value, tuple):
            items = [Py(item) for item in value.value]
        elif isinstance(value, tuple):
            items = list(value)
        elif isinstance(value, _Method) and value.name == "shape":  # rows, cols = x.shape
            view = value.receiver
            first = 0 if view.batch is None else 1
            loc = lower.loc(value.node)
            items = [
                ir.ArrayDim(ir.scalar(i32), loc, view.param, first + axis)
                for axis in range(view.view_ndim)
            ]
        else:
            items = None
        if items is None or len(items) != count:
            raise lower.error(
                QnbTypeError,
                f"cannot unpack this value into {count} {plural(count, 'target', 'targets')}",
                target,
            )
        value_nodes = target.elts
        if isinstance(value_node, ast.Tuple) and len(value_node.elts) == count:
            value_nodes = value_node.elts
        assigned: set[str] = set()
        stores = False
        scope = lower.scopes.frame.scope
        for index, element in enumerate(target.elts):
            if assigned or stores:
                items[index] = self.pinned(
                    items[index], value_nodes[index], assigned, stores, variables=True
                )
            root = element.value if isinstance(element, ast.Subscript) else element
            bound = scope.get(root.id) if isinstance(root, ast.Name) else None
            if isinstance(bound, Var):
                assigned.add(bound.name)
            elif isinstance(element, ast.Subscript):
                stores = True  # an array element (or something only the store will tell)
        return items


def effects(statements: list) -> tuple[set[str], bool]:
    """What ``statements`` change: the variables they assign, and whether they store to
    any array."""
    assigned: set[str] = set()
    stores = False
    pending = list(statements)
    while pending:
        stmt = pending.pop()
        if isinstance(stmt, ir.Assign):
            assigned.add(stmt.name)
        elif isinstance(stmt, ir.ArrayStore | ir.StoreWindow | ir.VecStore):
            stores = True
        elif isinstance(stmt, ir.Atomic):
            stores = True
            if stmt.result is not None:
                assigned.add(stmt.result)
        elif isinstance(stmt, ir.If):
            pending.extend(stmt.then_body)
            pending.extend(stmt.else_body)
        elif isinstance(stmt, ir.For):
            assigned.add(stmt.var)
            pending.extend(stmt.body)
        elif isinstance(stmt, ir.While):
            pending.extend(stmt.body)
        elif isinstance(stmt, Pending) and stmt.assign is not None:
            assigned.add(stmt.assign.name)
    return assigned, stores


def depends_on(expr: ir.Expr, assigned: set[str], stores: bool) -> bool:
    """Whether what ``expr`` reads is among what effects found changed."""
    for node in ir.walk(expr):
        if isinstance(node, ir.Var) and node.name in assigned:
            return True
        if stores and isinstance(node, ir.ArrayLoad | ir.LoadWindow | ir.VecLoad):
            return True
    return False


def reads_state(expr: ir.Expr, own_prefix: str) -> bool:
    """Whether later code could change what ``expr`` reads: an array element, or a
    variable that is not one of an inlined func's own (``own_prefix``)."""
    for node in ir.walk(expr):
        if isinstance(node, ir.ArrayLoad | ir.LoadWindow | ir.VecLoad):
            return True
        if isinstance(node, ir.Var) and not node.name.startswith(own_prefix):
            return True
    return False
