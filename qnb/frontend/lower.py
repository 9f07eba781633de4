"""AST + captured values + argument signature → typed :class:`~qnb.ir.KernelIR`.

The lowering specialises as it goes: captured constants, ``Template`` values and
``qnb.static(...)`` results are Python values (:class:`Py`) that fold, prune ``if``
branches and unroll static loops; everything else becomes typed IR. ``@qnb.func``
calls are inlined. Typing rules (promotion, weak Python literals, what each op
accepts) live in :mod:`qnb.frontend.semantics`.

The walker (:class:`_Lowerer`, here) owns the block being emitted and one helper per
question, each a module of its own:

- ``statements`` / ``expressions`` (:mod:`.statements`, :mod:`.expressions`): the walk,
  one ``stmt_<Node>`` / ``expr_<Node>`` method per Python node;
- ``scopes`` (:mod:`.scopes`): what each name is bound to, the runtime variables and
  their types, and how runtime control flow joins the bindings of its paths;
- ``order`` (:mod:`.order`): Python's evaluation order (temporaries where a later
  operand's code changes an earlier value);
- ``inliner`` (:mod:`.inline`): ``@qnb.func`` calls;
- ``indexing`` (:mod:`.indexing`): indices, windows, element reads and stores;
- ``compile_time`` (:mod:`.compile_time`): ``qnb.static``, attribute reads of
  compile-time values, ``Tile[M, N]``.

The walker's own methods are what the typing rules and ``lists`` call back
(``error``, ``loc``, ``emit``, ``to_expr``, ``coerce``, ``cast_elements`` …).
"""

from __future__ import annotations

import ast
import contextlib
from dataclasses import dataclass

from qnb import ir
from qnb.dtypes import DType, bool_, i32
from qnb.errors import QnbSyntaxError, QnbTypeError
from qnb.frontend import operators
from qnb.frontend.bindings import Py, is_number
from qnb.frontend.builder import Builder
from qnb.frontend.compile_time import CompileTime
from qnb.frontend.expressions import Expressions
from qnb.frontend.indexing import Indexing
from qnb.frontend.inline import Inliner, without_docstring
from qnb.frontend.order import EvaluationOrder
from qnb.frontend.parse import ParsedFunction
from qnb.frontend.reads import Recorder
from qnb.frontend.scopes import Frame, Scopes, Var, settle_pending
from qnb.frontend.statements import Statements
from qnb.frontend.values import _Method, method_misuse, value_name


@dataclass
class ParamSpec:
    """One kernel parameter as this launch sees it."""

    name: str
    kind: str  # "array", "scalar" or "template"
    type: ir.Type | None = None
    value: object = None  # the Template value


def lower_kernel(
    parsed: ParsedFunction, unit_of, params: list[ParamSpec], reads: Recorder | None = None
) -> ir.KernelIR:
    """Lower a kernel. ``unit_of(parsed)`` gives a function's unit name (unique per
    function object: two funcs from one factory are two units) and its captured roots.
    ``reads`` is the one way lowering reads an attribute of a compile-time value (see
    ``qnb.frontend.reads``): what it records enters the cache key."""
    declared: dict[str, ir.Type] = {}
    reads = reads if reads is not None else Recorder()
    for _ in range(4):
        lowerer = _Lowerer(parsed, unit_of, params, declared, reads)
        kernel = lowerer.run()
        scopes = lowerer.scopes
        if scopes.joined == declared or not scopes.widened:
            return kernel
        declared = scopes.joined
    return kernel


class _Lowerer:
    """One lowering pass over a kernel: the block being emitted, the units met, and the
    helpers that answer each question (see the module docstring)."""

    def __init__(self, parsed, unit_of, params, declared, reads: Recorder):
        self.unit_of = unit_of
        self.params = params
        self.kernel_parsed = parsed
        self.reads = reads
        self.units: list[ir.Unit] = []
        self.unit_index: dict[str, int] = {}
        self.block: list[ir.Stmt] = []
        self.loop_depth = 0  # runtime loops open in the function being lowered
        self.static_depth = 0  # qnb.static loops open
        self.scopes = Scopes(self, declared)
        self.order = EvaluationOrder(self)
        self.indexing = Indexing(self)
        self.inliner = Inliner(self)
        self.compile_time = CompileTime(self)
        self.statements = Statements(self)
        self.expressions = Expressions(self)
        self.builder = Builder(self)  # all the typing rules (semantics) may use of this walker

    # ------------------------------------------------------------------ entry

    def run(self) -> ir.KernelIR:
        parsed = self.kernel_parsed
        frame = self.new_frame(parsed, "")
        self.scopes.frames.append(frame)
        ir_params = []
        for spec in self.params:
            if spec.kind == "template":
                frame.scope[spec.name] = Py(operators.plain_value(spec.value))
            elif spec.kind == "array":
                frame.scope[spec.name] = ir.ArrayView(spec.name, spec.type)
                ir_params.append(ir.Param(spec.name, spec.type))
            else:
                frame.scope[spec.name] = Var(spec.name, spec.type)
                ir_params.append(ir.Param(spec.name, spec.type))
        # (a kernel may end early as a func may)
        tail = self.inliner.lower_func_body(without_docstring(parsed.tree.body))
        if tail is not None and tail.value is not None:
            self.statements.stmt_Return(tail)
        locals_ = dict(self.scopes.joined)
        statements = settle_pending(self.block)
        kernel = ir.KernelIR(parsed.name, ir_params, statements, locals_, self.units)
        kernel.display = dict(self.scopes.display)
        return kernel

    def new_frame(self, parsed: ParsedFunction, prefix: str) -> Frame:
        name, roots = self.unit_of(parsed)
        if name not in self.unit_index:
            self.unit_index[name] = len(self.units)
            self.units.append(ir.Unit(name))
        frame = Frame(parsed, self.unit_index[name], name, roots, prefix)
        frame.base_depth = self.scopes.block_depth
        return frame

    # ------------------------------------------------------------------ emission

    @property
    def frame(self) -> Frame:
        return self.scopes.frames[-1]

    def loc(self, node) -> ir.Loc:
        unit = self.scopes.frames[-1].unit
        return ir.Loc(unit, getattr(node, "lineno", 1), getattr(node, "col_offset", 0))

    def error(self, cls, message, node):
        return self.scopes.frames[-1].parsed.error(cls, message, node)

    def fresh(self, hint: str) -> str:
        return self.scopes.fresh(hint)

    def temporary(self, hint: str, shown: str) -> str:
        """A fresh IR local that holds an intermediate value; a trace shows it as
        ``shown`` (in parentheses: it is not one of the user's variables)."""
        name = self.scopes.fresh(self.frame.prefix + hint)
        self.scopes.display[name] = f"({shown})"
        return name

    def typed_temporary(self, hint: str, shown: str, type_: ir.Type) -> str:
        """:meth:`temporary`, its type known (the rules' ``builder.temporary``)."""
        name = self.temporary(hint, shown)
        self.scopes.joined[name] = type_
        return name

    def emit(self, stmt: ir.Stmt):
        self.block.append(stmt)

    @contextlib.contextmanager
    def nested_block(self):
        """A runtime block (an ``if`` branch, a loop body): the statements emitted meanwhile."""
        saved, scopes = self.block, self.scopes
        saved_path = scopes.block_path
        self.block = []
        scopes.block_depth += 1
        scopes.blocks_opened += 1
        scopes.block_path = (*saved_path, scopes.blocks_opened)
        try:
            yield self.block
        finally:
            self.block = saved
            scopes.block_depth -= 1
            scopes.block_path = saved_path

    @contextlib.contextmanager
    def captured_block(self):
        """The statements lowering emits meanwhile, held back to be placed by the caller
        (they still run unconditionally: no runtime block opens)."""
        saved = self.block
        self.block = []
        try:
            yield self.block
        finally:
            self.block = saved

    # ------------------------------------------------------------------ dispatch

    def lower_body(self, body):
        for stmt in body:
            self.lower_stmt(stmt)

    def lower_stmt(self, stmt):
        try:
            getattr(self.statements, "stmt_" + type(stmt).__name__)(stmt)
        except RecursionError:
            raise self.error(
                QnbTypeError, "the kernel is nested too deeply to compile", stmt
            ) from None

    def lower_expr(self, node):
        method = getattr(self.expressions, "expr_" + type(node).__name__, None)
        if method is None:
            raise self.error(QnbSyntaxError, f"{type(node).__name__} is not supported here", node)
        return method(node)

    # ------------------------------------------------------------------ values and types
    # (what the typing rules in semantics.py build with)

    def require_value(self, value, node) -> ir.Expr:
        if isinstance(value, ir.Expr):
            return value
        return self.to_expr(value, node)

    def to_expr(self, value, node, dtype: DType | None = None) -> ir.Expr:
        """A typed IR expression for a runtime value or a Python number."""
        if isinstance(value, ir.Expr):
            return value
        if isinstance(value, Py) and is_number(value.value):
            return operators.const(self.builder, value.value, node, dtype)
        if isinstance(value, _Method):
            raise self.error(QnbTypeError, method_misuse(value), node)
        raise self.error(QnbTypeError, f"{value_name(value)} cannot be used as a value here", node)

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
        if expr.type.kind != type_.kind or expr.type.shape != type_.shape:
            raise self.error(QnbTypeError, f"expected a {type_}, got a {expr.type}", node)
        return self.cast_elements(expr, type_.dtype)

    def cast_elements(self, expr: ir.Expr, dtype: DType) -> ir.Expr:
        if expr.type.dtype is dtype:
            return expr
        if isinstance(expr, ir.Const):
            return ir.Const(
                expr.type.with_dtype(dtype), expr.loc, operators.convert_value(expr.value, dtype)
            )
        return ir.Cast(expr.type.with_dtype(dtype), expr.loc, expr)

    def binary(self, op, left, right, node):
        return operators.binary(self.builder, op, left, right, node)

    def where(self, cond, a, b, node):
        return operators.where(self.builder, cond, a, b, node)

    def matmul(self, a, b, acc, node):
        return operators.matmul(self.builder, a, b, acc, node)

    # ------------------------------------------------------------------ for the rules and lists
    # (semantics.py and lists.py call these on the walker; each is its helper's)

    def py_truth(self, value: Py, node) -> bool:
        return self.compile_time.py_truth(value, node)

    def is_static_call(self, node) -> bool:
        return self.compile_time.is_static_call(node)

    def static_value(self, node) -> Py:
        return self.compile_time.static_value(node)

    def materialise(self, expr, hint, node) -> ir.Expr:
        return self.order.materialise(expr, hint, node)

    def ordered(self, nodes, earlier=()) -> list:
        return self.order.ordered(nodes, earlier)

    def assign_name(self, target: ast.Name, value, stmt):
        self.scopes.assign_name(target, value, stmt)

    def update_in_place(self, target: ast.Name, value, stmt):
        self.scopes.update_in_place(target, value, stmt)

    def bind_local(self, name, type_, node) -> Var:
        return self.scopes.bind_local(name, type_, node)

    def load_window(self, base, view, r0, r1, c0, c1, node):
        return self.indexing.load_window(base, view, r0, r1, c0, c1, node)

    def element_value(self, value, dtype: DType, target, into: str) -> ir.Expr:
        return self.indexing.element_value(value, dtype, target, into)

    def expr_Name(self, node):
        return self.expressions.expr_Name(node)


__all__ = ["ParamSpec", "lower_kernel"]
