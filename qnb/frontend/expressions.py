"""The walk of expressions: one ``expr_<Node>`` method per Python expression a kernel
may hold, each giving an IR expression, a compile-time value (``Py``), an array view,
a tuple, a compile-time list or a ``_Method``. The typing rules are in
:mod:`qnb.frontend.semantics`; evaluation order, indexing and compile-time values are
the walker's helpers (``order``, ``indexing``, ``compile_time``)."""

from __future__ import annotations

import ast
import builtins

from qnb import ir
from qnb.dtypes import DType, bool_, is_dtype_like
from qnb.errors import QnbCaptureError, QnbSyntaxError, QnbTypeError
from qnb.frontend import lists, operators
from qnb.frontend import semantics as sem
from qnb.frontend.bindings import Py, is_number
from qnb.frontend.capture import UNDEFINED, foreign_intrinsic, is_qnb_callable
from qnb.frontend.compile_time import is_static
from qnb.frontend.indexing import new_axis
from qnb.frontend.parse import KERNEL_BUILTINS
from qnb.frontend.scopes import UNBOUND
from qnb.frontend.values import (
    COMPARISON_SPELLING,
    OPERATOR_SPELLING,
    _Known,
    _Method,
    method_misuse,
    value_name,
)
from qnb.language import ShapeFamily


class Expressions:
    def __init__(self, lower):
        self.lower = lower  # the walker

    def expr_Constant(self, node):
        if node.value is Ellipsis or isinstance(node.value, bytes | complex):
            raise self.lower.error(
                QnbSyntaxError, f"the constant {node.value!r} is not supported", node
            )
        return Py(node.value)

    def expr__Known(self, node):
        return node.value

    def expr_List(self, node):
        return lists.display(self.lower, node)

    def expr_ListComp(self, node):
        return lists.comprehension(self.lower, node)

    def expr_Tuple(self, node):
        items = self.lower.order.ordered(node.elts)
        if all(isinstance(i, Py) for i in items):
            return Py(tuple(i.value for i in items))
        return tuple(items)

    def expr_Name(self, node):
        lower = self.lower
        name = node.id
        found = lower.scopes.read(name, node)
        if found is not UNBOUND:
            return found
        frame = lower.scopes.frame
        if name in frame.parsed.local_names:
            raise lower.error(QnbTypeError, f"{name!r} is used before it is assigned", node)
        value = frame.roots.get(name, UNDEFINED)
        if value is UNDEFINED:
            value = getattr(builtins, name, UNDEFINED) if name in KERNEL_BUILTINS else UNDEFINED
        if value is UNDEFINED:
            raise lower.error(QnbTypeError, f"name {name!r} is not defined", node)
        return Py(operators.plain_value(value))

    def expr_Attribute(self, node):
        lower = self.lower
        base = lower.lower_expr(node.value)
        attr = node.attr
        if isinstance(base, Py):
            return lower.compile_time.attribute(base.value, attr, node)
        if isinstance(base, ir.ArrayView):
            if attr in ("shape", "ndim", "dtype"):
                if attr == "ndim":
                    return Py(base.view_ndim)
                if attr == "dtype":
                    return Py(base.type.dtype)
                return _Method("shape", base, node)
            raise lower.error(QnbTypeError, f"arrays have no attribute {attr!r} in a kernel", node)
        if isinstance(base, ir.Expr) and base.type.kind in ("tile", "vec"):
            return self.tile_attribute(base, attr, node)
        if isinstance(base, ir.Expr) and attr == "dtype":
            return Py(base.type.dtype)
        raise lower.error(QnbTypeError, f"attribute {attr!r} is not supported here", node)

    def tile_attribute(self, base: ir.Expr, attr: str, node):
        """``t.T``, ``t.dtype``, ``t.SHAPE``, ``t.SIZE`` or a method before its call."""
        lower = self.lower
        if attr == "T":
            if base.type.kind != "tile":
                raise lower.error(QnbTypeError, ".T is defined for tiles only", node)
            m, n = base.type.shape
            return ir.Transpose(ir.tile(base.type.dtype, (n, m)), lower.loc(node), base)
        if attr == "dtype":
            return Py(base.type.dtype)
        if attr == "SHAPE":
            return Py(base.type.shape)
        if attr == "SIZE":
            shape = base.type.shape
            if len(shape) == 2 and shape[0] != shape[1]:
                raise lower.error(
                    QnbTypeError,
                    f"SIZE is the side of a square tile; a {base.type.shape_name} has SHAPE (M, N)",
                    node,
                )
            return Py(shape[0])
        if attr in sem.TILE_METHODS:
            return _Method(attr, base, node)
        raise lower.error(QnbTypeError, f"{base.type} has no attribute {attr!r}", node)

    def expr_BinOp(self, node):
        lower = self.lower
        if isinstance(node.op, ast.MatMult):
            left, right = lower.order.ordered([node.left, node.right])
            return lower.matmul(left, right, None, node)
        op = operators.BINOPS.get(type(node.op))
        if op is None:
            spelled = OPERATOR_SPELLING.get(type(node.op), type(node.op).__name__)
            raise lower.error(QnbSyntaxError, f"the operator {spelled} is not supported", node)
        left, right = lower.order.ordered([node.left, node.right])
        return lower.binary(op, left, right, node)

    def expr_UnaryOp(self, node):
        lower = self.lower
        operand = lower.lower_expr(node.operand)
        if isinstance(operand, Py):
            try:
                return Py(operators.fold_unary(node.op, operand.value))
            except QnbCaptureError as err:  # a configuration object used as a value
                raise lower.error(QnbCaptureError, err.message, node) from None
            except Exception as exc:  # noqa: BLE001 - the user's own compile-time arithmetic
                raise lower.error(
                    QnbTypeError, f"cannot evaluate this at compile time: {exc}", node
                ) from None
        operand = lower.require_value(operand, node)
        if isinstance(node.op, ast.UAdd):
            return operand
        if isinstance(node.op, ast.USub):
            if operand.type.dtype is bool_:
                raise lower.error(QnbTypeError, "cannot negate a bool value", node)
            return ir.Unary(operand.type, lower.loc(node), "neg", operand)
        if isinstance(node.op, ast.Not):
            if operand.type.kind != "scalar":
                raise lower.error(QnbTypeError, "'not' needs a scalar; use ~mask for tiles", node)
            condition = lower.condition(operand, node)
            return ir.Unary(ir.scalar(bool_), lower.loc(node), "not", condition)
        return operators.invert(lower.builder, operand, node)

    def expr_BoolOp(self, node):
        """``a and b`` / ``a or b`` as in Python: the right side runs only where Python
        would run it. Bool operands give a bool; other scalars give the operand that
        decides (``0.0 or 2.5`` is 2.5, ``3.0 and 2.5`` is 2.5)."""
        lower = self.lower
        op = "and" if isinstance(node.op, ast.And) else "or"
        result = lower.lower_expr(node.values[0])
        for value_node in node.values[1:]:
            result = self.logical(
                op, result, lambda n=value_node: lower.lower_expr(n), node, value_node
            )
        return result

    def logical(self, op, left, lower_right, node, right_node):
        """``left and/or right``, with ``left`` lowered and ``lower_right()`` lowering the
        right side, which runs only where Python would run it."""
        lower = self.lower
        if isinstance(left, Py):
            if (op == "and") != lower.py_truth(left, node):
                return left
            return lower_right()
        left = lower.require_value(left, node)
        with lower.nested_block() as before_right:
            right = lower_right()
        if not (_is_bool(left) and _is_bool(right)):
            return self.choose_operand(op, left, before_right, right, node, right_node)
        left = lower.condition(left, node)
        if isinstance(right, Py):
            right = ir.Const(ir.scalar(bool_), lower.loc(right_node), right.value)
        if before_right:
            return self.short_circuit(op, left, before_right, right, node)
        return ir.Logical(ir.scalar(bool_), lower.loc(node), op, left, right)

    def choose_operand(self, op, left, before_right, right, node, right_node) -> ir.Expr:
        """``left or right`` / ``left and right`` on scalars that are not bools: the value
        of the operand that decides; ``right`` is computed only where Python computes it."""
        lower = self.lower
        loc = lower.loc(node)
        if not isinstance(left, ir.Const | ir.Var):
            left = lower.order.materialise(left, op, node)  # read twice: the test and the value
        test = lower.condition(left, node)
        chosen = lower.where(test, left, right, node)  # the result type, as qnb.where gives it
        if chosen.type.kind != "scalar":
            raise lower.error(
                QnbTypeError,
                f"'{op}' chooses between scalars; for tiles and vectors use qnb.where(...)",
                node,
            )
        name = lower.temporary(op, f"… {op} …")
        lower.scopes.joined[name] = chosen.type
        take_left = [ir.Assign(loc, name, lower.coerce(left, chosen.type, node))]
        take_right = [
            *before_right,
            ir.Assign(loc, name, lower.coerce(right, chosen.type, right_node)),
        ]
        if op == "or":
            lower.emit(ir.If(loc, test, take_left, take_right))
        else:
            lower.emit(ir.If(loc, test, take_right, take_left))
        return ir.Var(chosen.type, loc, name)

    def short_circuit(self, op, left, before_right, right, node) -> ir.Expr:
        """``left and/or right`` where computing ``right`` takes statements (an inlined
        func): they run only where Python would evaluate ``right``."""
        lower = self.lower
        loc = lower.loc(node)
        name = lower.temporary(op, f"… {op} …")
        lower.scopes.joined[name] = ir.scalar(bool_)
        lower.emit(ir.Assign(loc, name, left))
        taken = left if op == "and" else ir.Unary(ir.scalar(bool_), loc, "not", left)
        lower.emit(ir.If(loc, taken, [*before_right, ir.Assign(loc, name, right)], []))
        return ir.Var(ir.scalar(bool_), loc, name)

    def expr_Compare(self, node):
        """``a < b < c`` is ``a < b and b < c`` with ``b`` evaluated once: ``c`` is
        evaluated only where ``a < b`` holds, as in Python."""
        lower = self.lower
        ops = []
        for op_node in node.ops:
            op = operators.CMPOPS.get(type(op_node))
            if op is None:
                spelled = COMPARISON_SPELLING.get(type(op_node), type(op_node).__name__)
                raise lower.error(
                    QnbSyntaxError, f"the comparison {spelled!r} is not supported", node
                )
            ops.append(op)
        left, right = lower.order.ordered([node.left, node.comparators[0]])
        result = lower.binary(ops[0], left, right, node)
        middle = [right, node.comparators[0]]  # the operand two comparisons share

        def compare_next(op, right_node):
            left, right = lower.order.ordered([right_node], [tuple(middle)])
            middle[:] = [right, right_node]
            return lower.binary(op, left, right, node)

        for op, right_node in zip(ops[1:], node.comparators[1:]):
            result = self.logical(
                "and", result, lambda o=op, r=right_node: compare_next(o, r), node, right_node
            )
        return result

    def expr_IfExp(self, node):
        """``a if c else b`` evaluates only the side Python would: with a runtime scalar
        ``c`` it becomes an ``If`` assigning a temporary, so ``arr[i] if i < n else 0``
        never reads ``arr[i]`` for ``i >= n`` and a func call's stores run only when taken.
        A tile or vec ``c`` (an elementwise choice, as ``qnb.where``) computes both sides."""
        lower = self.lower
        cond = lower.lower_expr(node.test)
        if isinstance(cond, Py):
            return lower.lower_expr(node.body if lower.py_truth(cond, node.test) else node.orelse)
        with lower.nested_block() as before_body:
            body = lower.lower_expr(node.body)
        with lower.nested_block() as before_else:
            orelse = lower.lower_expr(node.orelse)
        for side in (body, orelse):
            if not isinstance(side, ir.Expr) and not (
                isinstance(side, Py) and is_number(side.value)
            ):
                raise lower.error(
                    QnbTypeError,
                    f"{value_name(side)} cannot be chosen by a runtime condition; make the "
                    "condition compile-time with qnb.static(...) or a qnb.Template parameter",
                    node,
                )
        chosen = lower.where(cond, body, orelse, node)  # typed as qnb.where types it
        if chosen.cond.type.kind != "scalar":
            if before_body or before_else:
                raise lower.error(
                    QnbTypeError,
                    "a conditional expression with a tile or vec condition computes both "
                    "sides, so a side cannot call a @qnb.func that stores; use an if statement",
                    node,
                )
            return chosen
        loc = lower.loc(node)
        name = lower.temporary("choice", "… if … else …")
        lower.scopes.joined[name] = chosen.type
        if_true = lower.coerce(chosen.if_true, chosen.type, node.body)
        if_false = lower.coerce(chosen.if_false, chosen.type, node.orelse)
        lower.emit(
            ir.If(
                loc,
                chosen.cond,
                [*before_body, ir.Assign(loc, name, if_true)],
                [*before_else, ir.Assign(loc, name, if_false)],
            )
        )
        return ir.Var(chosen.type, loc, name)

    def expr_Subscript(self, node):
        lower = self.lower
        indexing = lower.indexing
        axis = new_axis(indexing.subscript_parts(node))  # v[:, None] / v[None, :]
        base = lower.lower_expr(node.value)
        if lists.is_list(base):
            return lists.read(lower, base, lower.lower_expr(node.slice), node)
        if isinstance(base, ir.ArrayView | ir.Expr):
            # The indices, left to right after the container (a func call in an index runs
            # before the element is read, but after a tile expression is computed).
            container = _Known(base, node.value)
            node = ast.copy_location(ast.Subscript(container, node.slice, node.ctx), node)
            node, (base,) = lower.order.evaluate_once(node, [(base, container)])
        if isinstance(base, _Method) and base.name == "shape":
            return indexing.array_dim(base.receiver, node)
        if isinstance(base, Py) and isinstance(base.value, ShapeFamily):
            return lower.compile_time.shaped_type(base.value, node)
        if isinstance(base, Py):
            return lower.compile_time.index(base, node)
        if isinstance(base, ir.ArrayView):
            return indexing.read_array(base, node)
        if isinstance(base, ir.Expr) and base.type.kind in ("tile", "vec"):
            return indexing.read_tile(base, node, axis)
        raise lower.error(QnbTypeError, "this value cannot be indexed", node)

    def expr_Call(self, node):
        lower = self.lower
        callee = lower.lower_expr(node.func)  # once: it may inline a func (emitting code)
        if is_static(callee):
            return lower.compile_time.static_value(node)
        if isinstance(callee, _Method):
            return self.call_method(callee, node)
        if not isinstance(callee, Py):
            raise lower.error(QnbTypeError, "this value cannot be called", node)
        target = callee.value
        if is_qnb_callable(target):
            return lower.inliner.inline(target, node)
        name = getattr(target, "_qnb_intrinsic", None) or foreign_intrinsic(target)
        if name is None:
            for builtin_name in KERNEL_BUILTINS:
                if target is getattr(builtins, builtin_name):
                    name = "builtin." + builtin_name
        if name is None:
            if is_dtype_like(target) or isinstance(target, DType):
                name = "builtin.cast"
            else:
                what = ast.unparse(node.func)
                raise lower.error(QnbSyntaxError, sem.unsupported_call_message(what), node)
        handler = sem.INTRINSICS.get(name) or sem.shaped_intrinsic(target)
        if handler is None:
            raise lower.error(QnbTypeError, _not_callable(name, target), node)
        if any(k.arg is None for k in node.keywords):
            raise lower.error(QnbSyntaxError, "**kwargs are not supported", node)
        values = lower.order.ordered([*node.args, *(k.value for k in node.keywords)])
        args = values[: len(node.args)]
        kwargs = {k.arg: v for k, v in zip(node.keywords, values[len(node.args) :])}
        return handler(lower.builder, node, target, args, kwargs)

    def call_method(self, method: _Method, node):
        lower = self.lower
        # The receiver (``(t * 2).row(...)``) is computed before the arguments.
        values = lower.order.ordered(
            [*node.args, *(k.value for k in node.keywords)], [(method.receiver, node.func)]
        )
        method = _Method(method.name, values[0], method.node)
        args = values[1 : 1 + len(node.args)]
        kwargs = {k.arg: v for k, v in zip(node.keywords, values[1 + len(node.args) :])}
        handler = sem.TILE_METHODS.get(method.name)
        if handler is None:
            raise lower.error(QnbTypeError, method_misuse(method), node)
        return handler(lower.builder, node, method, args, kwargs)


def _not_callable(name: str, target) -> str:
    """Why calling a qnb name that has no rule of its own is refused."""
    if name in ("Tile", "Vec"):
        return f"{name}[...] is a type; call its constructors ({name}[M, N].zeros(dtype) …)"
    return f"{name} cannot be called"


def _is_bool(value) -> bool:
    if isinstance(value, Py):
        return isinstance(value.value, bool)
    return isinstance(value, ir.Expr) and value.type.dtype is bool_
