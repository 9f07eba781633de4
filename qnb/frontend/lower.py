"""AST + captured values + argument signature → typed :class:`~qnb.ir.KernelIR`.

The lowering specialises as it goes: captured constants, ``Template`` values and
``qnb.static(...)`` results are Python values (:class:`Py`) that fold, prune ``if``
branches and unroll static loops; everything else becomes typed IR. ``@qnb.func``
calls are inlined. Typing rules (promotion, weak Python literals, what each op
accepts) live in :mod:`qnb.frontend.semantics`.
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import enum
import types
from dataclasses import dataclass

from qnb import ir
from qnb.dtypes import DType, bool_, i32, is_dtype_like
from qnb.errors import QnbError, QnbSyntaxError, QnbTypeError
from qnb.frontend import semantics as sem
from qnb.frontend.capture import UNDEFINED, foreign_intrinsic, is_qnb_callable
from qnb.frontend.parse import KERNEL_BUILTINS, ParsedFunction
from qnb.frontend.semantics import Py


def _plural(count: int, one: str, many: str) -> str:
    return one if count == 1 else many


@dataclass
class ParamSpec:
    """One kernel parameter as this launch sees it."""

    name: str
    kind: str  # "array", "scalar" or "template"
    type: ir.Type | None = None
    value: object = None  # the Template value


@dataclass
class _Method:
    """``receiver.name`` before it is called (``t.load_``, ``arr.shape``…)."""

    name: str
    receiver: object
    node: ast.AST


@dataclass
class _Var:
    name: str  # the IR name
    type: ir.Type


class _Frame:
    """One function being lowered: the kernel itself or an inlined func."""

    def __init__(self, parsed: ParsedFunction, unit: int, roots: dict, prefix: str):
        self.parsed = parsed
        self.unit = unit
        self.roots = roots
        self.prefix = prefix
        self.scope: dict[str, object] = {}


def lower_kernel(parsed: ParsedFunction, roots_of, params: list[ParamSpec]) -> ir.KernelIR:
    """Lower a kernel. ``roots_of(parsed)`` gives a function's captured root values."""
    declared: dict[str, ir.Type] = {}
    for _ in range(4):
        lowerer = _Lowerer(parsed, roots_of, params, declared)
        kernel = lowerer.run()
        if lowerer.joined == declared or not lowerer.widened:
            return kernel
        declared = lowerer.joined
    return kernel


class _Lowerer:
    def __init__(self, parsed, roots_of, params, declared):
        self.roots_of = roots_of
        self.params = params
        self.declared = declared  # variable types widened by an earlier pass
        self.joined: dict[str, ir.Type] = {}
        self.display: dict[str, str] = {}  # IR local -> the name a trace shows
        self.widened = False
        self.units: list[ir.Unit] = []
        self.unit_index: dict[str, int] = {}
        self.frames: list[_Frame] = []
        self.block: list[ir.Stmt] = []
        self.counter = 0
        self.loop_depth = 0
        self.static_depth = 0
        self.block_depth = 0  # runtime blocks (if branches, loop bodies) open now
        self.static_blocks: list[int] = []  # block_depth where each static loop began
        self.kernel_parsed = parsed
        self.inline_stack: list[str] = []

    # ------------------------------------------------------------------ helpers

    @property
    def frame(self) -> _Frame:
        return self.frames[-1]

    def loc(self, node) -> ir.Loc:
        return ir.Loc(self.frame.unit, getattr(node, "lineno", 1), getattr(node, "col_offset", 0))

    def error(self, cls, message, node):
        return self.frame.parsed.error(cls, message, node)

    def fresh(self, hint: str) -> str:
        self.counter += 1
        return f"{hint}_{self.counter}"

    def temporary(self, hint: str, shown: str) -> str:
        """A fresh IR local that holds an intermediate value; a trace shows it as
        ``shown`` (in parentheses: it is not one of the user's variables)."""
        name = self.fresh(self.frame.prefix + hint)
        self.display[name] = f"({shown})"
        return name

    def unit_for(self, parsed: ParsedFunction) -> int:
        key = parsed.unit_name
        if key not in self.unit_index:
            self.unit_index[key] = len(self.units)
            self.units.append(ir.Unit(key))
        return self.unit_index[key]

    @contextlib.contextmanager
    def nested_block(self):
        saved = self.block
        self.block = []
        self.block_depth += 1
        try:
            yield self.block
        finally:
            self.block = saved
            self.block_depth -= 1

    def emit(self, stmt: ir.Stmt):
        self.block.append(stmt)

    # ------------------------------------------------------------------ entry

    def run(self) -> ir.KernelIR:
        parsed = self.kernel_parsed
        frame = _Frame(parsed, self.unit_for(parsed), self.roots_of(parsed), "")
        self.frames.append(frame)
        ir_params = []
        for spec in self.params:
            if spec.kind == "template":
                frame.scope[spec.name] = Py(spec.value)
            elif spec.kind == "array":
                frame.scope[spec.name] = ir.ArrayView(spec.name, spec.type)
                ir_params.append(ir.Param(spec.name, spec.type))
            else:
                frame.scope[spec.name] = _Var(spec.name, spec.type)
                ir_params.append(ir.Param(spec.name, spec.type))
        body = parsed.tree.body
        if (
            body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            body = body[1:]  # the docstring
        if body and isinstance(body[-1], ast.Return) and body[-1].value is None:
            body = body[:-1]
        self.lower_body(body)
        locals_ = dict(self.joined)
        kernel = ir.KernelIR(parsed.name, ir_params, self.block, locals_, self.units)
        kernel.display = dict(self.display)
        return kernel

    # ------------------------------------------------------------------ statements

    def lower_body(self, body):
        for stmt in body:
            self.lower_stmt(stmt)

    def lower_stmt(self, stmt):
        try:
            getattr(self, "stmt_" + type(stmt).__name__)(stmt)
        except RecursionError:
            raise self.error(
                QnbTypeError, "the kernel is nested too deeply to compile", stmt
            ) from None

    def stmt_Pass(self, stmt):
        pass

    def stmt_Expr(self, stmt):
        if isinstance(stmt.value, ast.Constant):
            return  # a stray string or number: nothing to do
        self.lower_expr(stmt.value)

    def stmt_Return(self, stmt):
        raise self.error(
            QnbSyntaxError, "return is only allowed as the last statement of a @qnb.func", stmt
        )

    def stmt_Break(self, stmt):
        self.loop_exit(stmt, "break", ir.Break)

    def stmt_Continue(self, stmt):
        self.loop_exit(stmt, "continue", ir.Continue)

    def loop_exit(self, stmt, word, node_class):
        if self.static_depth and not self.loop_depth:
            raise self.error(
                QnbSyntaxError, f"{word} inside a qnb.static loop is not supported", stmt
            )
        if not self.loop_depth:
            raise self.error(QnbSyntaxError, f"{word} outside a loop", stmt)
        self.emit(node_class(self.loc(stmt)))

    def stmt_AnnAssign(self, stmt):
        if stmt.value is None:
            return
        self.assign_target(stmt.target, self.lower_expr(stmt.value), stmt)

    def stmt_Assign(self, stmt):
        if len(stmt.targets) == 1 and self.is_full_tile_target(stmt.targets[0]):
            self.assign_full_tile(stmt.targets[0], stmt.value, stmt)
            return
        value = self.lower_expr(stmt.value)
        for target in stmt.targets:
            self.assign_target(target, value, stmt)

    def stmt_AugAssign(self, stmt):
        target = stmt.target
        op = sem.BINOPS.get(type(stmt.op))
        if op is None:
            raise self.error(
                QnbSyntaxError, f"the operator {type(stmt.op).__name__} is not supported", stmt
            )
        current = self.lower_expr(_as_load(target))
        value = self.binary(op, current, self.lower_expr(stmt.value), stmt)
        self.assign_target(target, value, stmt)

    def stmt_If(self, stmt):
        cond = self.lower_expr(stmt.test)
        if isinstance(cond, Py):
            self.lower_body(stmt.body if self.py_truth(cond, stmt.test) else stmt.orelse)
            return
        cond = self.condition(cond, stmt.test)
        with self.nested_block() as then_body:
            self.lower_body(stmt.body)
        with self.nested_block() as else_body:
            self.lower_body(stmt.orelse)
        self.emit(ir.If(self.loc(stmt), cond, then_body, else_body))

    def stmt_While(self, stmt):
        # Lowering the condition may emit statements (an inlined @qnb.func's body): those
        # must run before every test, so the loop becomes `while True: <stmts>; if not
        # cond: break; <body>`. A plain condition stays the IR's own While condition.
        with self.nested_block() as before_test:
            cond = self.lower_expr(stmt.test)
            if isinstance(cond, Py):
                if not self.py_truth(cond, stmt.test):
                    return
                cond = ir.Const(ir.scalar(bool_), self.loc(stmt.test), True)
            cond = self.condition(cond, stmt.test)
        body = self.loop_body(stmt.body)
        loc = self.loc(stmt)
        if before_test:
            stop = ir.If(
                loc, ir.Unary(ir.scalar(bool_), cond.loc, "not", cond), [ir.Break(loc)], []
            )
            always = ir.Const(ir.scalar(bool_), loc, True)
            self.emit(ir.While(loc, always, [*before_test, stop, *body]))
        else:
            self.emit(ir.While(loc, cond, body))

    def loop_body(self, statements) -> list[ir.Stmt]:
        with self.nested_block() as body:
            self.loop_depth += 1
            try:
                self.lower_body(statements)
            finally:
                self.loop_depth -= 1
        return body

    def stmt_For(self, stmt):
        iterator = stmt.iter
        name = stmt.target.id
        if self.is_static_call(iterator):
            values = self.static_value(iterator)
            try:
                items = list(values.value)
            except TypeError:
                raise self.error(
                    QnbTypeError, "qnb.static(...) in a for loop must give an iterable", iterator
                ) from None
            saved = self.frame.scope.get(name)
            self.static_depth += 1
            self.static_blocks.append(self.block_depth)
            saved_loop = self.loop_depth
            self.loop_depth = 0
            try:
                for item in items:
                    self.frame.scope[name] = Py(item)
                    self.lower_body(stmt.body)
            finally:
                self.static_depth -= 1
                self.static_blocks.pop()
                self.loop_depth = saved_loop
            if saved is not None:
                self.frame.scope[name] = saved
            return
        if not (isinstance(iterator, ast.Call) and self.callee_is(iterator.func, range)):
            raise self.error(
                QnbSyntaxError,
                "a kernel's for loop must iterate over range(...) or qnb.static(...)",
                iterator,
            )
        if iterator.keywords or not 1 <= len(iterator.args) <= 3:
            raise self.error(QnbTypeError, "range() takes 1 to 3 positional arguments", iterator)
        args = [self.to_index(self.lower_expr(a), a, "range() bound") for a in iterator.args]
        if len(args) == 1:
            args.insert(0, ir.Const(ir.scalar(i32), self.loc(iterator), 0))
        if len(args) == 2:
            args.append(ir.Const(ir.scalar(i32), self.loc(iterator), 1))
        step = args[2]
        if isinstance(step, ir.Const) and step.value == 0:
            raise self.error(QnbTypeError, "range() step must not be zero", iterator.args[2])
        var = self.bind_local(name, ir.scalar(i32), stmt.target)
        body = self.loop_body(stmt.body)
        self.emit(ir.For(self.loc(stmt), var.name, args[0], args[1], step, body))

    # ------------------------------------------------------------------ assignment

    def is_full_tile_target(self, target) -> bool:
        return (
            isinstance(target, ast.Subscript)
            and isinstance(target.slice, ast.Slice)
            and target.slice.lower is None
            and target.slice.upper is None
        )

    def assign_full_tile(self, target, value_node, stmt):
        """``t[:] = arr[r0:r1, c0:c1]`` (window load in place) or ``t[:] = tile``."""
        if not isinstance(target.value, ast.Name):
            raise self.error(QnbSyntaxError, "t[:] = ... needs a tile variable on the left", target)
        current = self.lower_expr(target.value)
        if not (isinstance(current, ir.Expr) and current.type.kind == "tile"):
            raise self.error(QnbTypeError, "t[:] = ... needs a Tile16 on the left", target)
        if isinstance(value_node, ast.Subscript):
            view = self.lower_expr(value_node.value)
            if isinstance(view, ir.ArrayView):
                window = self.window_indices(view, value_node, want="tile")
                value = self.load_window(current, *window, value_node)
                self.assign_name(target.value, value, stmt)
                return
        value = self.lower_expr(value_node)
        self.assign_name(target.value, self.coerce(value, current.type, value_node), stmt)

    def assign_target(self, target, value, stmt):
        if isinstance(target, ast.Name):
            self.assign_name(target, value, stmt)
        elif isinstance(target, ast.Tuple):
            items = (
                value.value if isinstance(value, Py) and isinstance(value.value, tuple) else None
            )
            if items is None and isinstance(value, tuple):
                items = value
            if items is None or len(items) != len(target.elts):
                raise self.error(
                    QnbTypeError, f"cannot unpack this value into {len(target.elts)} names", target
                )
            for element, item in zip(target.elts, items):
                self.assign_name(element, item if not isinstance(value, Py) else Py(item), stmt)
        elif isinstance(target, ast.Subscript):
            self.assign_subscript(target, value, stmt)
        else:
            raise self.error(QnbSyntaxError, "unsupported assignment target", target)

    def assign_name(self, target: ast.Name, value, stmt):
        name = target.id
        if isinstance(value, ir.ArrayView):
            if value.batch is not None and not isinstance(value.batch, ir.Const):
                batch = self.materialise(value.batch, "batch", target)
                value = ir.ArrayView(value.param, value.type, batch)
            self.frame.scope[name] = value
            return
        unconditional = self.static_blocks and self.block_depth == self.static_blocks[-1]
        still_static = isinstance(self.frame.scope.get(name, value), Py)
        if isinstance(value, Py) and unconditional and still_static:
            # A name computed from static loop values stays static - unless a runtime
            # branch assigns it, which only the running kernel can resolve.
            self.frame.scope[name] = value
            return
        if isinstance(value, Py) and not sem.is_number(value.value):
            self.frame.scope[name] = value  # dtypes, tuples, None: compile-time names
            return
        existing = self.frame.scope.get(name)
        if isinstance(existing, Py) and not sem.is_number(existing.value):
            existing = None
        if isinstance(existing, _Var):
            raw = self.to_expr(value, stmt, existing.type.dtype)
            self.record_type(existing.name, raw.type, existing.type, target)
            expr = self.coerce(raw, existing.type, target)
            self.emit(ir.Assign(self.loc(stmt), existing.name, expr))
            return
        expr = self.to_expr(value, stmt)
        var = self.bind_local(name, expr.type, target)
        if var.type != expr.type:
            expr = self.coerce(expr, var.type, target)
        self.emit(ir.Assign(self.loc(stmt), var.name, expr))

    def bind_local(self, name, type_, node) -> _Var:
        """Declare (or reuse) the IR variable for a Python local."""
        existing = self.frame.scope.get(name)
        if isinstance(existing, _Var):
            self.record_type(existing.name, type_, existing.type, node)
            return existing
        ir_name = self.frame.prefix + name
        if ir_name in self.joined and not isinstance(existing, _Var):
            ir_name = self.fresh(ir_name)
        declared = self.declared.get(ir_name, type_)
        if declared.kind != type_.kind:
            declared = type_
        var = _Var(ir_name, declared)
        self.display[ir_name] = name
        self.frame.scope[name] = var
        self.record_type(ir_name, type_, declared, node)
        return var

    def record_type(self, ir_name, new: ir.Type, current: ir.Type, node):
        if new.kind != current.kind:
            raise self.error(
                QnbTypeError,
                f"variable {ir_name.split('_')[-1]!r} holds a {current}; "
                f"it cannot also hold a {new}",
                node,
            )
        known = self.joined.get(ir_name, current)
        joined = (
            known
            if new.dtype is known.dtype
            else known.with_dtype(sem.join_dtypes(known.dtype, new.dtype))
        )
        if joined != current:
            self.widened = True
        self.joined[ir_name] = joined

    def materialise(self, expr, hint, node) -> ir.Expr:
        name = self.temporary(hint, hint)
        self.joined[name] = expr.type
        self.emit(ir.Assign(self.loc(node), name, expr))
        return ir.Var(expr.type, self.loc(node), name)

    def assign_subscript(self, target, value, stmt):
        base = self.lower_expr(target.value)
        if isinstance(base, ir.ArrayView):
            self.store_to_array(base, target, value, stmt)
            return
        if isinstance(base, ir.Expr) and base.type.kind in ("tile", "vec"):
            if not isinstance(target.value, ast.Name):
                raise self.error(QnbSyntaxError, "element writes need a tile variable", target)
            indices = self.subscript_parts(target)
            i, j = self.element_indices(base, indices, target)
            element = self.coerce(value, ir.scalar(base.type.dtype), target)
            new = ir.TileSet(base.type, self.loc(target), base, i, j, element)
            self.assign_name(target.value, new, stmt)
            return
        raise self.error(
            QnbTypeError, "only arrays, tiles and vectors can be assigned by index", target
        )

    def store_to_array(self, view: ir.ArrayView, target, value, stmt):
        parts = self.subscript_parts(target)
        has_slice = any(isinstance(p, ast.Slice) for p in parts)
        if not has_slice:
            view, parts = self.apply_batch(view, parts, target)
            indices = self.array_indices(view, parts, target)
            element = self.coerce(value, ir.scalar(view.type.dtype), target)
            self.emit(ir.ArrayStore(self.loc(stmt), view, indices, element))
            return
        if not isinstance(value, ir.Expr) or value.type.kind not in ("tile", "vec"):
            raise self.error(
                QnbTypeError,
                "a slice of an array can only be assigned a Tile16 "
                "(2-D window) or a Vec16 (1-D range)",
                target,
            )
        if value.type.kind == "tile":
            view, r0, r1, c0, c1 = self.window_indices(view, target, want="tile")
            self.emit(
                ir.StoreWindow(
                    self.loc(stmt), self.cast_elements(value, view.type.dtype), view, r0, r1, c0, c1
                )
            )
            return
        view, start, stop, col = self.window_indices(view, target, want="vec")
        if col is not None:
            raise self.error(
                QnbTypeError, "a Vec16 can be stored into a 1-D array range only", target
            )
        self.emit(
            ir.VecStore(
                self.loc(stmt), self.cast_elements(value, view.type.dtype), view, start, stop
            )
        )

    # ------------------------------------------------------------------ expressions

    def lower_expr(self, node):
        method = getattr(self, "expr_" + type(node).__name__, None)
        if method is None:
            raise self.error(QnbSyntaxError, f"{type(node).__name__} is not supported here", node)
        return method(node)

    def expr_Constant(self, node):
        if node.value is Ellipsis or isinstance(node.value, bytes | complex):
            raise self.error(QnbSyntaxError, f"the constant {node.value!r} is not supported", node)
        return Py(node.value)

    def expr_Tuple(self, node):
        items = [self.lower_expr(e) for e in node.elts]
        if all(isinstance(i, Py) for i in items):
            return Py(tuple(i.value for i in items))
        return tuple(items)

    def expr_Name(self, node):
        name = node.id
        frame = self.frame
        if name in frame.scope:
            found = frame.scope[name]
            if isinstance(found, _Var):
                return ir.Var(found.type, self.loc(node), found.name)
            return found
        if name in frame.parsed.local_names:
            raise self.error(QnbTypeError, f"{name!r} is used before it is assigned", node)
        value = frame.roots.get(name, UNDEFINED)
        if value is UNDEFINED:
            value = getattr(builtins, name, UNDEFINED) if name in KERNEL_BUILTINS else UNDEFINED
        if value is UNDEFINED:
            raise self.error(QnbTypeError, f"name {name!r} is not defined", node)
        return Py(value)

    def expr_Attribute(self, node):
        base = self.lower_expr(node.value)
        attr = node.attr
        if isinstance(base, Py):
            value = base.value
            if isinstance(value, (types.ModuleType, type, enum.Enum)) or getattr(
                value, "_qnb_intrinsic", None
            ):
                try:
                    return Py(getattr(value, attr))
                except AttributeError:
                    raise self.error(
                        QnbTypeError, f"{_py_name(value)} has no attribute {attr!r}", node
                    ) from None
            raise self.error(
                QnbTypeError,
                f"attribute {attr!r} of a {type(value).__name__} is not supported in a kernel",
                node,
            )
        if isinstance(base, ir.ArrayView):
            if attr in ("shape", "ndim", "dtype"):
                if attr == "ndim":
                    return Py(base.view_ndim)
                if attr == "dtype":
                    return Py(base.type.dtype)
                return _Method("shape", base, node)
            raise self.error(QnbTypeError, f"arrays have no attribute {attr!r} in a kernel", node)
        if isinstance(base, ir.Expr) and base.type.kind in ("tile", "vec"):
            if attr == "T":
                if base.type.kind != "tile":
                    raise self.error(QnbTypeError, ".T is defined for Tile16 only", node)
                return ir.Transpose(base.type, self.loc(node), base)
            if attr == "dtype":
                return Py(base.type.dtype)
            if attr == "SIZE":
                return Py(16)
            if attr in sem.TILE_METHODS:
                return _Method(attr, base, node)
            raise self.error(QnbTypeError, f"{base.type} has no attribute {attr!r}", node)
        if isinstance(base, ir.Expr) and attr == "dtype":
            return Py(base.type.dtype)
        raise self.error(QnbTypeError, f"attribute {attr!r} is not supported here", node)

    def expr_BinOp(self, node):
        if isinstance(node.op, ast.MatMult):
            return self.matmul(self.lower_expr(node.left), self.lower_expr(node.right), None, node)
        op = sem.BINOPS.get(type(node.op))
        if op is None:
            raise self.error(
                QnbSyntaxError, f"the operator {type(node.op).__name__} is not supported", node
            )
        return self.binary(op, self.lower_expr(node.left), self.lower_expr(node.right), node)

    def expr_UnaryOp(self, node):
        operand = self.lower_expr(node.operand)
        if isinstance(operand, Py):
            try:
                return Py(sem.fold_unary(node.op, operand.value))
            except Exception as exc:  # noqa: BLE001 - the user's own compile-time arithmetic
                raise self.error(
                    QnbTypeError, f"cannot evaluate this at compile time: {exc}", node
                ) from None
        operand = self.require_value(operand, node)
        if isinstance(node.op, ast.UAdd):
            return operand
        if isinstance(node.op, ast.USub):
            if operand.type.dtype is bool_:
                raise self.error(QnbTypeError, "cannot negate a bool value", node)
            return ir.Unary(operand.type, self.loc(node), "neg", operand)
        if isinstance(node.op, ast.Not):
            if operand.type.kind != "scalar":
                raise self.error(QnbTypeError, "'not' needs a scalar; use ~mask for tiles", node)
            return ir.Unary(ir.scalar(bool_), self.loc(node), "not", self.condition(operand, node))
        if operand.type.dtype is not bool_:
            raise self.error(QnbTypeError, "~ is defined for bool masks only", node)
        return ir.Unary(operand.type, self.loc(node), "not", operand)

    def expr_BoolOp(self, node):
        op = "and" if isinstance(node.op, ast.And) else "or"
        result = self.lower_expr(node.values[0])
        for value_node in node.values[1:]:
            if isinstance(result, Py):
                truth = self.py_truth(result, node)
                if (op == "and") != truth:
                    return Py(truth)
                result = self.lower_expr(value_node)
                continue
            left = self.condition(result, node)
            with self.nested_block() as before_right:
                right = self.lower_expr(value_node)
                if isinstance(right, Py):
                    truth = self.py_truth(right, node)
                    right = ir.Const(ir.scalar(bool_), self.loc(value_node), truth)
                right = self.condition(right, value_node)
            if before_right:
                result = self.short_circuit(op, left, before_right, right, node)
            else:
                result = ir.Logical(ir.scalar(bool_), self.loc(node), op, left, right)
        return result

    def short_circuit(self, op, left, before_right, right, node) -> ir.Expr:
        """``left and/or right`` where computing ``right`` takes statements (an inlined
        func): they run only where Python would evaluate ``right``."""
        loc = self.loc(node)
        name = self.temporary(op, f"… {op} …")
        self.joined[name] = ir.scalar(bool_)
        self.emit(ir.Assign(loc, name, left))
        taken = left if op == "and" else ir.Unary(ir.scalar(bool_), loc, "not", left)
        self.emit(ir.If(loc, taken, [*before_right, ir.Assign(loc, name, right)], []))
        return ir.Var(ir.scalar(bool_), loc, name)

    def expr_Compare(self, node):
        left = self.lower_expr(node.left)
        result = None
        for op_node, right_node in zip(node.ops, node.comparators):
            op = sem.CMPOPS.get(type(op_node))
            if op is None:
                raise self.error(
                    QnbSyntaxError,
                    f"the comparison {type(op_node).__name__} is not supported",
                    node,
                )
            right = self.lower_expr(right_node)
            part = self.binary(op, left, right, node)
            if result is None:
                result = part
            elif isinstance(result, Py) and isinstance(part, Py):
                result = Py(result.value and part.value)
            else:
                result = ir.Logical(
                    ir.scalar(bool_),
                    self.loc(node),
                    "and",
                    self.condition(self.to_expr(result, node), node),
                    self.condition(self.to_expr(part, node), node),
                )
            left = right
        return result

    def expr_IfExp(self, node):
        """``a if c else b`` evaluates only the side Python would: with a runtime scalar
        ``c`` it becomes an ``If`` assigning a temporary, so ``arr[i] if i < n else 0``
        never reads ``arr[i]`` for ``i >= n`` and a func call's stores run only when taken.
        A tile or vec ``c`` (an elementwise choice, as ``qnb.where``) computes both sides."""
        cond = self.lower_expr(node.test)
        if isinstance(cond, Py):
            return self.lower_expr(node.body if self.py_truth(cond, node.test) else node.orelse)
        with self.nested_block() as before_body:
            body = self.lower_expr(node.body)
        with self.nested_block() as before_else:
            orelse = self.lower_expr(node.orelse)
        chosen = self.where(cond, body, orelse, node)  # typed as qnb.where types it
        if chosen.cond.type.kind != "scalar":
            if before_body or before_else:
                raise self.error(
                    QnbTypeError,
                    "a conditional expression with a Tile16/Vec16 condition computes both "
                    "sides, so a side cannot call a @qnb.func that stores; use an if statement",
                    node,
                )
            return chosen
        loc = self.loc(node)
        name = self.temporary("choice", "… if … else …")
        self.joined[name] = chosen.type
        if_true = self.coerce(chosen.if_true, chosen.type, node.body)
        if_false = self.coerce(chosen.if_false, chosen.type, node.orelse)
        self.emit(
            ir.If(
                loc,
                chosen.cond,
                [*before_body, ir.Assign(loc, name, if_true)],
                [*before_else, ir.Assign(loc, name, if_false)],
            )
        )
        return ir.Var(chosen.type, loc, name)

    def expr_Subscript(self, node):
        base = self.lower_expr(node.value)
        parts = self.subscript_parts(node)
        if isinstance(base, _Method) and base.name == "shape":
            index = self.lower_expr(node.slice)
            if not isinstance(index, Py) or not isinstance(index.value, int):
                raise self.error(QnbTypeError, "arr.shape[d] needs a constant d", node)
            view = base.receiver
            axis = index.value + (view.view_ndim if index.value < 0 else 0)
            if not 0 <= axis < view.view_ndim:
                raise self.error(
                    QnbTypeError,
                    f"axis {index.value} is out of range for a {view.view_ndim}-D array",
                    node,
                )
            if view.batch is not None:
                axis += 1
            return ir.ArrayDim(ir.scalar(i32), self.loc(node), view.param, axis)
        if isinstance(base, Py):
            try:
                key = self.lower_expr(node.slice)
                if isinstance(key, Py):
                    return Py(base.value[key.value])
            except QnbError:
                raise
            except Exception as exc:  # noqa: BLE001 - indexing the user's own constant
                raise self.error(QnbTypeError, f"cannot index this constant: {exc}", node) from None
            raise self.error(QnbTypeError, "a constant can only be indexed by a constant", node)
        if isinstance(base, ir.ArrayView):
            if any(isinstance(p, ast.Slice) for p in parts):
                view, *window = self.window_indices(base, node, want="any")
                return self.slice_load(view, window, node)
            view, rest = self.apply_batch(base, parts, node)
            if not rest:
                return view
            indices = self.array_indices(view, rest, node)
            return ir.ArrayLoad(ir.scalar(view.type.dtype), self.loc(node), view, indices)
        if isinstance(base, ir.Expr) and base.type.kind in ("tile", "vec"):
            if any(isinstance(p, ast.Slice) for p in parts):
                raise self.error(
                    QnbTypeError, "tiles cannot be sliced; index elements with t[i, j]", node
                )
            i, j = self.element_indices(base, parts, node)
            return ir.TileGet(ir.scalar(base.type.dtype), self.loc(node), base, i, j)
        raise self.error(QnbTypeError, "this value cannot be indexed", node)

    def expr_Call(self, node):
        callee = self.lower_expr(node.func)  # once: it may inline a func (emitting code)
        if _is_static(callee):
            return self.static_value(node)
        if isinstance(callee, _Method):
            return self.call_method(callee, node)
        if not isinstance(callee, Py):
            raise self.error(QnbTypeError, "this value cannot be called", node)
        target = callee.value
        if is_qnb_callable(target):
            return self.inline(target, node)
        name = getattr(target, "_qnb_intrinsic", None) or foreign_intrinsic(target)
        if name is None:
            for builtin_name in KERNEL_BUILTINS:
                if target is getattr(builtins, builtin_name):
                    name = "builtin." + builtin_name
        if name is None:
            if is_dtype_like(target) or isinstance(target, DType):
                name = "builtin.cast"
            else:
                raise self.error(
                    QnbTypeError, f"{_py_name(target)} cannot be called inside a kernel", node
                )
        handler = sem.INTRINSICS.get(name)
        if handler is None:
            raise self.error(QnbTypeError, f"{name} cannot be used here", node)
        args = [self.lower_expr(a) for a in node.args]
        kwargs = {k.arg: self.lower_expr(k.value) for k in node.keywords}
        if None in kwargs:
            raise self.error(QnbSyntaxError, "**kwargs are not supported", node)
        return handler(self, node, target, args, kwargs)

    def call_method(self, method: _Method, node):
        args = [self.lower_expr(a) for a in node.args]
        kwargs = {k.arg: self.lower_expr(k.value) for k in node.keywords}
        handler = sem.TILE_METHODS.get(method.name)
        if handler is None:
            raise self.error(QnbTypeError, f"{method.name}() is not a method here", node)
        return handler(self, node, method, args, kwargs)

    # ------------------------------------------------------------------ static and funcs

    def is_static_call(self, node) -> bool:
        return isinstance(node, ast.Call) and _is_static(self.py_callee(node.func))

    def static_value(self, node) -> Py:
        if len(node.args) != 1 or node.keywords:
            raise self.error(QnbTypeError, "qnb.static takes exactly one expression", node)
        namespace = dict(self.frame.roots)
        for name, value in self.frame.scope.items():
            if isinstance(value, Py):
                namespace[name] = value.value
            elif name in namespace:
                del namespace[name]
        expression = ast.Expression(node.args[0])
        ast.fix_missing_locations(expression)
        runtime = [
            n.id
            for n in ast.walk(node.args[0])
            if isinstance(n, ast.Name)
            and n.id in self.frame.scope
            and not isinstance(self.frame.scope[n.id], Py)
        ]
        if runtime:
            raise self.error(
                QnbTypeError,
                f"qnb.static(...) can only read compile-time values; "
                f"{runtime[0]!r} is a runtime value",
                node,
            )
        try:
            code = compile(expression, self.frame.parsed.filename, "eval")
            return Py(eval(code, {"__builtins__": builtins}, namespace))  # noqa: S307
        except Exception as exc:  # noqa: BLE001 - the user's own compile-time expression
            raise self.error(
                QnbTypeError, f"qnb.static(...) failed: {type(exc).__name__}: {exc}", node
            ) from None

    def inline(self, target, node):
        parsed: ParsedFunction = target._qnb_parsed
        if parsed.unit_name in self.inline_stack:
            raise self.error(
                QnbTypeError,
                f"{parsed.name!r} calls itself; recursion is not supported in kernels",
                node,
            )
        if node.keywords:
            raise self.error(QnbTypeError, "call @qnb.func helpers with positional arguments", node)
        if len(node.args) != len(parsed.param_names):
            raise self.error(
                QnbTypeError,
                f"{parsed.name}() takes {len(parsed.param_names)} "
                f"{_plural(len(parsed.param_names), 'argument', 'arguments')} "
                f"but {len(node.args)} {'was' if len(node.args) == 1 else 'were'} given",
                node,
            )
        args = [self.lower_expr(a) for a in node.args]
        self.counter += 1
        frame = _Frame(
            parsed, self.unit_for(parsed), self.roots_of(parsed), f"{parsed.name}{self.counter}_"
        )
        for name, arg_node, value in zip(parsed.param_names, node.args, args):
            if (
                isinstance(value, ir.Var)
                and value.type.kind in ("tile", "vec")
                and isinstance(arg_node, ast.Name)
            ):
                frame.scope[name] = self.frame.scope[arg_node.id]  # in-place ops reach the caller
            elif isinstance(value, ir.Expr):
                frame.scope[name] = None
                var_name = frame.prefix + name
                self.joined[var_name] = value.type
                self.display[var_name] = name
                self.emit(ir.Assign(self.loc(node), var_name, value))
                frame.scope[name] = _Var(var_name, value.type)
            else:
                frame.scope[name] = value
        body = parsed.tree.body
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
            body = body[1:]
        result = Py(None)
        tail = body[-1] if body else None
        if isinstance(tail, ast.Return):
            body = body[:-1]
        self.frames.append(frame)
        self.inline_stack.append(parsed.unit_name)
        try:
            for inner in ast.walk(ast.Module(body=body, type_ignores=[])):
                if isinstance(inner, ast.Return):
                    raise self.error(
                        QnbSyntaxError, "a @qnb.func may return only at its end", inner
                    )
            saved_depth = self.loop_depth
            self.loop_depth = 0
            try:
                self.lower_body(body)
                if isinstance(tail, ast.Return) and tail.value is not None:
                    result = self.lower_expr(tail.value)
            finally:
                self.loop_depth = saved_depth
        finally:
            self.frames.pop()
            self.inline_stack.pop()
        return result

    # ------------------------------------------------------------------ typing helpers

    def py_callee(self, func_node) -> Py | None:
        """The compile-time value a call's callee names (``range``, ``qnb.static``), if any.
        Only names and attribute chains are looked at: nothing is emitted."""
        root = func_node
        while isinstance(root, ast.Attribute):
            root = root.value
        if not isinstance(root, ast.Name):
            return None
        try:
            value = self.lower_expr(func_node)
        except QnbError:
            return None
        return value if isinstance(value, Py) else None

    def callee_is(self, func_node, expected) -> bool:
        callee = self.py_callee(func_node)
        return callee is not None and callee.value is expected

    def py_truth(self, value: Py, node) -> bool:
        try:
            return bool(value.value)
        except Exception:  # noqa: BLE001
            raise self.error(
                QnbTypeError, "this compile-time value has no truth value", node
            ) from None

    def require_value(self, value, node) -> ir.Expr:
        if isinstance(value, ir.Expr):
            return value
        return self.to_expr(value, node)

    def to_expr(self, value, node, dtype: DType | None = None) -> ir.Expr:
        """A typed IR expression for a runtime value or a Python number."""
        if isinstance(value, ir.Expr):
            return value
        if isinstance(value, Py) and sem.is_number(value.value):
            return sem.const(self, value.value, node, dtype)
        what = (
            "an array"
            if isinstance(value, ir.ArrayView)
            else _py_name(getattr(value, "value", value))
        )
        raise self.error(QnbTypeError, f"{what} cannot be used as a value here", node)

    def to_index(self, value, node, what="index") -> ir.Expr:
        expr = self.to_expr(value, node, i32)
        if expr.type.kind != "scalar" or expr.type.dtype not in (i32, bool_):
            raise self.error(
                QnbTypeError, f"{what} must be an integer scalar, not {expr.type}", node
            )
        if expr.type.dtype is bool_:
            expr = ir.Cast(ir.scalar(i32), expr.loc, expr)
        return expr

    def condition(self, value, node) -> ir.Expr:
        expr = self.to_expr(value, node)
        if expr.type.kind != "scalar":
            raise self.error(
                QnbTypeError,
                f"a {expr.type} has no single truth value; use "
                "qnb.where(...) or a reduction such as t.max()",
                node,
            )
        if expr.type.dtype is bool_:
            return expr
        zero = ir.Const(expr.type, expr.loc, 0)
        return ir.Binary(ir.scalar(bool_), expr.loc, "ne", expr, zero)

    def coerce(self, value, type_: ir.Type, node) -> ir.Expr:
        """``value`` converted to ``type_`` (a Python number, or the same kind of value)."""
        expr = self.to_expr(value, node, type_.dtype)
        if expr.type == type_:
            return expr
        if expr.type.kind == "scalar" and type_.kind in ("tile", "vec"):
            scalar_ = self.cast_elements(expr, type_.dtype)
            return ir.TileFill(type_, expr.loc, "full", scalar_)
        if expr.type.kind != type_.kind:
            raise self.error(QnbTypeError, f"expected a {type_}, got a {expr.type}", node)
        return self.cast_elements(expr, type_.dtype)

    def cast_elements(self, expr: ir.Expr, dtype: DType) -> ir.Expr:
        if expr.type.dtype is dtype:
            return expr
        if isinstance(expr, ir.Const):
            return ir.Const(
                expr.type.with_dtype(dtype), expr.loc, sem.convert_value(expr.value, dtype)
            )
        return ir.Cast(expr.type.with_dtype(dtype), expr.loc, expr)

    def binary(self, op, left, right, node):
        return sem.binary(self, op, left, right, node)

    def where(self, cond, a, b, node):
        return sem.where(self, cond, a, b, node)

    def matmul(self, a, b, acc, node):
        return sem.matmul(self, a, b, acc, node)

    # ------------------------------------------------------------------ arrays

    def subscript_parts(self, node) -> list:
        return list(node.slice.elts) if isinstance(node.slice, ast.Tuple) else [node.slice]

    def apply_batch(self, view: ir.ArrayView, parts, node):
        """``arr[b, ...]`` on a 3-D array: the slab view, and the remaining index parts."""
        if (
            view.batch is None
            and view.type.ndim == 3
            and len(parts) in (1, 3)
            and not isinstance(parts[0], ast.Slice)
        ):
            batch = self.to_index(self.lower_expr(parts[0]), parts[0], "batch index")
            return ir.ArrayView(view.param, view.type, batch), parts[1:]
        return view, parts

    def array_indices(self, view: ir.ArrayView, parts, node) -> list[ir.Expr]:
        if len(parts) != view.view_ndim:
            if view.batch is not None:  # arr[b] was taken as a slab: say what arr is
                message = (
                    f"{view.param!r} is a 3-D array: an element is {view.param}[b, i, j], "
                    f"got {len(parts) + 1} {_plural(len(parts) + 1, 'index', 'indices')}"
                )
            else:
                message = (
                    f"a {view.view_ndim}-D array needs {view.view_ndim} indices, got {len(parts)}"
                )
            raise self.error(QnbTypeError, message, node)
        return [self.to_index(self.lower_expr(p), p) for p in parts]

    def element_indices(self, base: ir.Expr, parts, node):
        want = 2 if base.type.kind == "tile" else 1
        if len(parts) != want:
            raise self.error(
                QnbTypeError,
                f"a {base.type} is indexed with {want} {'indices' if want == 2 else 'index'}",
                node,
            )
        indices = [self.to_index(self.lower_expr(p), p) for p in parts]
        return indices[0], (indices[1] if want == 2 else None)

    def window_indices(self, view: ir.ArrayView, node, want: str):
        """Parse ``arr[(b,) r0:r1, c0:c1]`` / ``arr[(b,) r0:r1, col]`` / ``arr[s0:s1]``.

        Returns (view, r0, r1, c0, c1) for a tile window, or (view, start, stop, col)
        for a vector window (col None on 1-D arrays)."""
        parts = self.subscript_parts(node)
        if view.batch is None and view.type.ndim == 3:
            if len(parts) != 3 or isinstance(parts[0], ast.Slice):
                raise self.error(
                    QnbTypeError, "a 3-D array is sliced as arr[b, r0:r1, c0:c1]", node
                )
            batch = self.to_index(self.lower_expr(parts[0]), parts[0], "batch index")
            view = ir.ArrayView(view.param, view.type, batch)
            parts = parts[1:]
        ndim = view.view_ndim
        if len(parts) != ndim:
            raise self.error(QnbTypeError, f"a {ndim}-D array needs {ndim} slice parts here", node)

        def bounds(part):
            return (
                self.to_index(self.lower_expr(part.lower), part.lower, "slice start"),
                self.to_index(self.lower_expr(part.upper), part.upper, "slice stop"),
            )

        if ndim == 1:
            if not isinstance(parts[0], ast.Slice):
                raise self.error(QnbTypeError, "expected a slice", node)
            start, stop = bounds(parts[0])
            if want == "tile":
                raise self.error(QnbTypeError, "a 1-D slice is a Vec16, not a Tile16", node)
            return view, start, stop, None
        rows, cols = parts
        if not isinstance(rows, ast.Slice):
            raise self.error(QnbTypeError, "the row part must be a slice r0:r1", rows)
        r0, r1 = bounds(rows)
        if isinstance(cols, ast.Slice):
            if want == "vec":
                raise self.error(QnbTypeError, "a 2-D window is a Tile16, not a Vec16", node)
            c0, c1 = bounds(cols)
            return view, r0, r1, c0, c1
        if want == "tile":
            raise self.error(QnbTypeError, "arr[r0:r1, col] is a Vec16, not a Tile16", node)
        col = self.to_index(self.lower_expr(cols), cols, "column index")
        return view, r0, r1, col

    def slice_load(self, view, window, node):
        if len(window) == 4:
            r0, r1, c0, c1 = window
            zeros = sem.fill(self, "tile", "full", 0, view.type.dtype, node)
            return self.load_window(zeros, view, r0, r1, c0, c1, node)
        start, stop, col = window
        return ir.VecLoad(ir.vec(view.type.dtype), self.loc(node), view, start, stop, col)

    def load_window(self, base, view, r0, r1, c0, c1, node):
        if view.view_ndim != 2:
            raise self.error(
                QnbTypeError,
                f"tile windows need a 2-D array (or a slab of a 3-D "
                f"one), got a {view.view_ndim}-D array",
                node,
            )
        if base.type.dtype is not view.type.dtype:
            raise self.error(
                QnbTypeError,
                f"the tile is {base.type.dtype} but the array is "
                f"{view.type.dtype}; load into a {view.type.dtype} tile and use "
                ".astype()",
                node,
            )
        return ir.LoadWindow(base.type, self.loc(node), base, view, r0, r1, c0, c1)


def _is_static(callee) -> bool:
    return isinstance(callee, Py) and getattr(callee.value, "_qnb_intrinsic", None) == "static"


def _as_load(target):
    """The load-context twin of an assignment target (for augmented assignment)."""
    clone = ast.parse(ast.unparse(target), mode="eval").body
    ast.copy_location(clone, target)
    for new, old in zip(ast.walk(clone), ast.walk(target)):
        ast.copy_location(new, old)
    return clone


def _py_name(value) -> str:
    if isinstance(value, types.ModuleType):
        return f"module {value.__name__!r}"
    name = getattr(value, "__qualname__", None) or getattr(value, "__name__", None)
    if name and callable(value):
        return f"{name}()"
    return f"a {type(value).__name__}"


__all__ = ["ParamSpec", "lower_kernel"]
