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
import copy
import enum
import types
from dataclasses import dataclass

from qnb import ir
from qnb.dtypes import DType, bool_, i32, is_dtype_like
from qnb.errors import QnbCaptureError, QnbError, QnbSyntaxError, QnbTypeError
from qnb.frontend import lists
from qnb.frontend import semantics as sem
from qnb.frontend.builder import Builder
from qnb.frontend.capture import UNDEFINED, foreign_intrinsic, is_qnb_callable
from qnb.frontend.parse import KERNEL_BUILTINS, ParsedFunction, is_negative_literal
from qnb.frontend.reads import Recorder
from qnb.frontend.semantics import Py
from qnb.language import ShapeFamily


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


class _Ambiguous:
    """A name that runtime control flow leaves bound to different compile-time values
    (an array, a tuple, a dtype…) on different paths: reading it is an error."""

    __slots__ = ("name", "node", "what")

    def __init__(self, name: str, node: ast.AST, what: str):
        self.name = name
        self.node = node  # the assignment under the runtime condition
        self.what = what  # what the name holds on some path ("an array", "a tuple"…)


class _PathNumber:
    """A name that runtime control flow leaves bound to compile-time numbers that differ
    between paths (a ``qnb.static`` loop's, under a runtime ``if``), or to one on some paths
    only: a runtime variable, made when first read (see _Pending)."""

    __slots__ = ("name", "node", "numbers", "var")

    def __init__(self, name: str, node: ast.AST, numbers: list):
        self.name = name
        self.node = node
        self.numbers = numbers  # the Python numbers it may hold (they type the variable)
        self.var: _Var | None = None


class _Pending:
    """A statement-to-be, placed where a ``qnb.static`` loop inside a runtime block left
    ``name`` bound to a compile-time number. If the number turns out to differ between
    paths (the name becomes a runtime variable after the block) this is the assignment of
    that variable, at the point Python made the binding (before any later break or
    continue); otherwise it is dropped, so the generated code has no dead stores."""

    __slots__ = ("assign", "loc", "name", "value")

    def __init__(self, name: str, value, loc: ir.Loc):
        self.name = name
        self.value = value
        self.loc = loc
        self.assign: ir.Assign | None = None


class _Known(ast.expr):
    """An expression already lowered, standing in for its AST (evaluated once)."""

    _fields = ()

    def __init__(self, value, like: ast.AST):
        super().__init__()
        self.value = value
        self.source = getattr(like, "source", like)  # the user's expression (for messages)
        ast.copy_location(self, like)


class _LoopWatch:
    """Compile-time bindings a runtime loop's body reads before it may rebind them."""

    def __init__(self, frame, entry: dict):
        self.frame = frame
        self.entry = entry
        self.reads: dict[str, ast.AST] = {}


_UNBOUND = object()


class _Frame:
    """One function being lowered: the kernel itself or an inlined func."""

    def __init__(self, parsed: ParsedFunction, unit: int, unit_name: str, roots: dict, prefix: str):
        self.parsed = parsed
        self.unit = unit
        self.unit_name = unit_name
        self.roots = roots
        self.prefix = prefix
        self.scope: dict[str, object] = {}
        # Parameters bound to the caller's Tile16/Vec16 variable: in-place ops reach it.
        self.aliases: set[str] = set()
        # Aliased parameters reassigned under a runtime condition (name -> that statement):
        # whether they still are the caller's tile depends on the run.
        self.detached: dict[str, ast.AST] = {}
        self.bound_at: dict[str, ast.AST] = {}  # where a compile-time binding was made
        self.base_depth = 0  # the runtime block depth its body starts at
        # Runtime variables assigned a compile-time number outside runtime control flow and
        # not assigned since: qnb.static(...) may read them (``n = 2``, ``rows, cols = shape``).
        self.known: dict[str, object] = {}
        self.pending: dict[str, list[_Pending]] = {}  # name -> its unresolved _Pending


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
        lowerer = _Lowerer(parsed, unit_of, params, declared)
        lowerer.reads = reads
        kernel = lowerer.run()
        if lowerer.joined == declared or not lowerer.widened:
            return kernel
        declared = lowerer.joined
    return kernel


class _Lowerer:
    def __init__(self, parsed, unit_of, params, declared):
        self.unit_of = unit_of
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
        self.loop_watches: list[_LoopWatch] = []
        self.builder = Builder(self)  # all the typing rules (semantics) may use of this walker

    # ------------------------------------------------------------------ helpers

    @property
    def frame(self) -> _Frame:
        return self.frames[-1]

    def loc(self, node) -> ir.Loc:
        return ir.Loc(self.frame.unit, getattr(node, "lineno", 1), getattr(node, "col_offset", 0))

    def error(self, cls, message, node):
        return self.frame.parsed.error(cls, message, node)

    def fresh(self, hint: str) -> str:
        """A new IR name. It has a "." (no Python identifier has one) and a number no
        other generated name has, so it never meets a user's variable."""
        self.counter += 1
        return f"{hint}.{self.counter}"

    def temporary(self, hint: str, shown: str) -> str:
        """A fresh IR local that holds an intermediate value; a trace shows it as
        ``shown`` (in parentheses: it is not one of the user's variables)."""
        name = self.fresh(self.frame.prefix + hint)
        self.display[name] = f"({shown})"
        return name

    def new_frame(self, parsed: ParsedFunction, prefix: str) -> _Frame:
        name, roots = self.unit_of(parsed)
        if name not in self.unit_index:
            self.unit_index[name] = len(self.units)
            self.units.append(ir.Unit(name))
        frame = _Frame(parsed, self.unit_index[name], name, roots, prefix)
        frame.base_depth = self.block_depth
        return frame

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

    def emit(self, stmt: ir.Stmt):
        self.block.append(stmt)

    # ------------------------------------------------------------------ entry

    def run(self) -> ir.KernelIR:
        parsed = self.kernel_parsed
        frame = self.new_frame(parsed, "")
        self.frames.append(frame)
        ir_params = []
        for spec in self.params:
            if spec.kind == "template":
                frame.scope[spec.name] = Py(sem.plain_value(spec.value))
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
        tail = self.lower_func_body(body)  # (a kernel may end early as a func may)
        if tail is not None and tail.value is not None:
            self.stmt_Return(tail)
        locals_ = dict(self.joined)
        statements = _settle_pending(self.block)
        kernel = ir.KernelIR(parsed.name, ir_params, statements, locals_, self.units)
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
        if len(stmt.targets) > 1 and isinstance(value, ir.Expr) and not isinstance(value, ir.Const):
            # ``a = b = a + 1``: every target gets the value computed before the first store.
            value = self.materialise(value, "value", stmt.value)
        for target in stmt.targets:
            self.assign_target(target, value, stmt)

    def stmt_AugAssign(self, stmt):
        """``target op= value``. The target's container and indices are evaluated once,
        as Python does; on a name it updates in place (``t += u`` reaches the caller's
        tile from inside a @qnb.func, as it would on a NumPy array)."""
        target = stmt.target
        if self.is_full_tile_target(target) and isinstance(target.value, ast.Name):
            target = target.value  # t[:] += u is t += u
        if isinstance(target, ast.Name):
            current = self.expr_Name(ast.copy_location(ast.Name(target.id, ast.Load()), target))
            value = self.augmented(stmt, current, self.lower_expr(stmt.value))
            self.update_in_place(target, value, stmt)
            return
        target, _ = self.evaluate_once(target)
        saved = self.block
        self.block = []  # what computing the right side emits (an inlined func's body)
        try:
            right = self.lower_expr(stmt.value)
        finally:
            right_statements, self.block = self.block, saved
        if right_statements:
            # The right side runs code: the indices and the current element are taken
            # before it, as Python takes them.
            target = self.pin_indices(target)
            current = self.lower_expr(target)
            if isinstance(current, ir.Expr):
                current = self.materialise(current, "current", target)
        else:
            current = self.lower_expr(target)
        self.block.extend(right_statements)
        self.assign_subscript(target, self.augmented(stmt, current, right), stmt)

    def augmented(self, stmt, current, value):
        if isinstance(stmt.op, ast.MatMult):
            return self.matmul(current, value, None, stmt)
        op = sem.BINOPS.get(type(stmt.op))
        if op is None:
            spelled = _OPERATOR_SPELLING.get(type(stmt.op), type(stmt.op).__name__)
            raise self.error(QnbSyntaxError, f"the operator {spelled}= is not supported", stmt)
        return self.binary(op, current, value, stmt)

    def evaluate_once(self, target: ast.Subscript, earlier=()) -> tuple[ast.Subscript, list]:
        """A copy of ``target`` whose container and index expressions are lowered now,
        after the ``earlier`` (value, node) pairs (the value being assigned: Python computes
        it first), and those values, held in temporaries where lowering the target emits
        statements that change what they read."""
        base = target.value
        nodes = [] if isinstance(base, ast.Name | _Known) else [base]

        def collect(node):
            if not is_negative_literal(node):  # a literal -1 is refused where it is used
                nodes.append(node)

        self.map_subscript(target, collect)
        values = self.ordered(nodes, earlier)
        lowered = iter(values[len(earlier) :])

        def known(node):
            return node if is_negative_literal(node) else _Known(next(lowered), node)

        if not isinstance(base, ast.Name | _Known):
            base = known(base)
        copy = self.map_subscript(target, known, base, target.ctx)
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

        return self.map_subscript(target, pin, target.value, ast.Store())

    def map_subscript(self, target: ast.Subscript, fn, base=None, ctx=None):
        """``fn`` applied to each index and slice bound of ``target``, in order (a missing
        bound stays None); with ``ctx``, the subscript rebuilt on ``base`` from the results."""
        parts = []
        for part in self.subscript_parts(target):
            if isinstance(part, ast.Slice):
                bounds = [None if b is None else fn(b) for b in (part.lower, part.upper)]
                part = ast.copy_location(ast.Slice(*bounds), part)
            else:
                part = fn(part)
            parts.append(part)
        if ctx is None:
            return None
        index = (
            ast.copy_location(ast.Tuple(parts, ast.Load()), target.slice)
            if isinstance(target.slice, ast.Tuple)
            else parts[0]
        )
        return ast.copy_location(ast.Subscript(base, index, ctx), target)

    def stmt_If(self, stmt):
        cond = self.lower_expr(stmt.test)
        if isinstance(cond, Py):
            self.lower_body(stmt.body if self.py_truth(cond, stmt.test) else stmt.orelse)
            return
        cond = self.condition(cond, stmt.test)
        detached = self.enter_runtime_block([*stmt.body, *stmt.orelse], stmt)
        entry = dict(self.frame.scope)
        entry_detached = dict(self.frame.detached)
        with self.nested_block() as then_body:
            self.lower_body(stmt.body)
        then_bound = self.rewind(entry)
        self.frame.detached = entry_detached
        with self.nested_block() as else_body:
            self.lower_body(stmt.orelse)
        else_bound = self.rewind(entry)
        self.merge_paths(entry, [then_bound, else_bound], detached, stmt)
        self.emit(ir.If(self.loc(stmt), cond, then_body, else_body))

    def stmt_While(self, stmt):
        # Lowering the condition may emit statements (an inlined @qnb.func's body): those
        # must run before every test, so the loop becomes `while True: <stmts>; if not
        # cond: break; <body>`. A plain condition stays the IR's own While condition.
        detached = self.enter_runtime_block(stmt.body, stmt)
        watch = _LoopWatch(self.frame, dict(self.frame.scope))
        self.loop_watches.append(watch)
        try:
            with self.nested_block() as before_test:
                cond = self.lower_expr(stmt.test)
                never = isinstance(cond, Py) and not self.py_truth(cond, stmt.test)
                if isinstance(cond, Py):
                    cond = ir.Const(ir.scalar(bool_), self.loc(stmt.test), True)
                cond = self.condition(cond, stmt.test)
            body = [] if never else self.loop_body(stmt.body)
        finally:
            self.loop_watches.pop()
        self.leave_loop(watch, detached, stmt)
        if never:
            self.block.extend(before_test)  # the test runs once
            return
        loc = self.loc(stmt)
        if before_test:
            stop = ir.If(
                loc, ir.Unary(ir.scalar(bool_), cond.loc, "not", cond), [ir.Break(loc)], []
            )
            always = ir.Const(ir.scalar(bool_), loc, True)
            self.emit(ir.While(loc, always, [*before_test, stop, *body]))
        else:
            self.emit(ir.While(loc, cond, body))

    def note_static_numbers(self, before: dict, node):
        """After a static loop inside a runtime block: a _Pending for each name it left
        bound to a new compile-time number."""
        frame = self.frame
        for name, value in frame.scope.items():
            if (
                isinstance(value, Py)
                and sem.is_number(value.value)
                and before.get(name) is not value
            ):
                pending = _Pending(name, value.value, self.loc(frame.bound_at.get(name, node)))
                self.emit(pending)
                frame.pending.setdefault(name, []).append(pending)

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
        if self.is_static_call(iterator) and self.static_list_loop(stmt):
            return
        if self.is_static_call(iterator):
            values = self.static_value(iterator)
            try:
                items = list(values.value)
            except TypeError:
                raise self.error(
                    QnbTypeError, "qnb.static(...) in a for loop must give an iterable", iterator
                ) from None
            frame = self.frame
            # The outermost static loop of a runtime block: the numbers it leaves bound may
            # have to become runtime variables after the block (_Pending).
            in_runtime_block = self.block_depth > frame.base_depth and (
                not self.static_blocks or self.static_blocks[-1] < self.block_depth
            )
            before = dict(frame.scope) if in_runtime_block else None
            self.static_depth += 1
            self.static_blocks.append(self.block_depth)
            saved_loop = self.loop_depth
            self.loop_depth = 0
            try:
                for item in items:
                    # As in Python, the loop variable keeps the last item after the loop.
                    self.release_alias(name)
                    frame.known.pop(name, None)
                    frame.scope[name] = Py(sem.plain_value(item))
                    frame.bound_at[name] = stmt
                    self.lower_body(stmt.body)
            finally:
                self.static_depth -= 1
                self.static_blocks.pop()
                self.loop_depth = saved_loop
            if before is not None:
                self.note_static_numbers(before, stmt)
            return
        if not (isinstance(iterator, ast.Call) and self.callee_is(iterator.func, range)):
            raise self.error(
                QnbSyntaxError,
                "a kernel's for loop must iterate over range(...) or qnb.static(...)",
                iterator,
            )
        if iterator.keywords or not 1 <= len(iterator.args) <= 3:
            raise self.error(QnbTypeError, "range() takes 1 to 3 positional arguments", iterator)
        bounds = self.ordered(iterator.args)
        args = [self.to_index(b, a, "range() bound") for b, a in zip(bounds, iterator.args)]
        if len(args) == 1:
            args.insert(0, ir.Const(ir.scalar(i32), self.loc(iterator), 0))
        if len(args) == 2:
            args.append(ir.Const(ir.scalar(i32), self.loc(iterator), 1))
        step = args[2]
        if isinstance(step, ir.Const) and step.value == 0:
            raise self.error(QnbTypeError, "range() step must not be zero", iterator.args[2])
        detached = self.enter_runtime_block([stmt], stmt)
        self.release_alias(name)
        var = self.bind_local(name, ir.scalar(i32), stmt.target)
        entry = dict(self.frame.scope)
        watch = _LoopWatch(self.frame, entry)
        self.loop_watches.append(watch)
        try:
            body = self.loop_body(stmt.body)
        finally:
            self.loop_watches.pop()
        self.leave_loop(watch, detached, stmt)
        self.emit(ir.For(self.loc(stmt), var.name, args[0], args[1], step, body))

    def static_list_loop(self, stmt) -> bool:
        """``for x in qnb.static(xs)`` over a compile-time list: unrolled, ``x`` bound to
        each element variable in turn (``x += t`` updates the element, as it would update
        a NumPy array held in a Python list). False when the iterable is no list."""
        iterator = stmt.iter
        if len(iterator.args) != 1 or iterator.keywords:
            return False
        source = iterator.args[0]
        if isinstance(source, ast.Name):
            found = self.frame.scope.get(source.id)
            if not isinstance(found, lists.StaticList):
                return False
            self.compile_time_read(source.id, found, source)
        elif isinstance(source, ast.List | ast.ListComp):
            found = self.lower_expr(source)
        else:
            return False
        name, frame = stmt.target.id, self.frame
        self.static_depth += 1
        self.static_blocks.append(self.block_depth)
        saved_loop, self.loop_depth = self.loop_depth, 0
        try:
            for how, item in lists.elements(self, found, stmt):
                self.release_alias(name)
                frame.known.pop(name, None)
                slot = frame.scope.get(item) if how == "slot" else None
                if isinstance(slot, _Var):
                    frame.scope[name] = slot  # the element itself
                    frame.aliases.add(name)
                    frame.bound_at[name] = stmt
                else:
                    value = item if how == "value" else slot
                    frame.scope.pop(name, None)
                    self.assign_name(
                        ast.copy_location(ast.Name(name, ast.Store()), stmt), value, stmt
                    )
                self.lower_body(stmt.body)
        finally:
            self.static_depth -= 1
            self.static_blocks.pop()
            self.loop_depth = saved_loop
        return True

    # ------------------------------------------------------------------ runtime control flow
    #
    # A compile-time binding (an array, a tuple, a dtype…) has no runtime storage, so a
    # runtime ``if`` or loop cannot choose between two of them. Each branch (or loop body)
    # is lowered from the bindings at its entry; afterwards a name left bound to different
    # compile-time values on different paths becomes _Ambiguous, and reading it raises.

    def enter_runtime_block(self, statements, node) -> set[str]:
        """Before a runtime ``if``/loop: a number the block assigns becomes a runtime
        variable now, and a func parameter that is the caller's tile and that the block
        reassigns becomes the func's own copy. Returns those parameters."""
        frame = self.frame
        plain, every = _assigned_names(statements)
        for name in sorted(every):
            value = frame.scope.get(name)
            frame.known.pop(name, None)  # the block may change it
            if isinstance(value, Py) and sem.is_number(value.value):
                expr = self.to_expr(value, node)
                var = self.bind_local(name, expr.type, node)
                self.emit(ir.Assign(self.loc(node), var.name, self.coerce(expr, var.type, node)))
            elif isinstance(value, _PathNumber):
                self.path_number_var(name, value, node)
        detached = set()
        for name in sorted(plain & (frame.aliases | set(frame.detached))):
            if name in frame.aliases:
                alias = frame.scope[name]
                self.release_alias(name)
                var = self.bind_local(name, alias.type, node)
                copy = ir.Var(alias.type, self.loc(node), alias.name)
                self.emit(ir.Assign(self.loc(node), var.name, copy))
            frame.detached[name] = node  # until the block reassigns it
            detached.add(name)
        return detached

    def rewind(self, entry: dict) -> dict:
        """The bindings a branch changed (name -> value, _UNBOUND if none); a compile-time
        one is set back to its value at ``entry``, so the next branch starts from there.
        (A runtime variable stays: both branches assign the same IR variable.)"""
        scope = self.frame.scope
        changed = {}
        for name in set(scope) | set(entry):
            now, before = scope.get(name, _UNBOUND), entry.get(name, _UNBOUND)
            if now is before:
                continue
            changed[name] = now
            if not (before is _UNBOUND and isinstance(now, _Var)):
                if before is _UNBOUND:
                    del scope[name]
                else:
                    scope[name] = before
        return changed

    def merge_paths(self, entry: dict, paths: list[dict], detached: set[str], node):
        """After a runtime branch: a name bound alike on every path keeps that binding.
        A runtime variable is one storage on every path, so it stays (where a path never
        assigned it, it holds what it held before: zero if nothing). Compile-time numbers
        that differ between paths become a runtime variable (_PathNumber). A name bound
        to different compile-time values of another kind becomes _Ambiguous."""
        frame = self.frame
        for name in set().union(*paths):
            values = [path.get(name, entry.get(name, _UNBOUND)) for path in paths]
            first = values[0]
            if all(_same_binding(first, other) for other in values[1:]):
                if first is _UNBOUND:
                    frame.scope.pop(name, None)
                else:
                    frame.scope[name] = first
            else:
                frame.scope[name] = self.merged_binding(name, values, node)
        for name in detached:
            frame.detached[name] = node  # reassigned on some paths only

    def merged_binding(self, name: str, values: list, node):
        """The binding after a runtime branch whose paths left ``name`` bound to ``values``
        (not all the same)."""
        variables: dict[str, _Var] = {}
        numbers: list = []
        others = []
        for value in values:
            if isinstance(value, _PathNumber) and value.var is not None:
                value = value.var
            if isinstance(value, _Var):
                variables[value.name] = value
            elif isinstance(value, _PathNumber):
                numbers.extend(value.numbers)
            elif isinstance(value, Py) and sem.is_number(value.value):
                numbers.append(value.value)
            elif value is not _UNBOUND:
                others.append(value)
        bound_at = self.frame.bound_at.get(name, node)
        if others or len(variables) > 1:
            what = _binding_name(others[0]) if others else "a different variable on each path"
            return _Ambiguous(name, bound_at, what)
        if variables:
            (var,) = variables.values()
            self.settle(name, var, numbers, node)
            return var
        return _PathNumber(name, bound_at, numbers)

    def path_number_var(self, name: str, found: _PathNumber, node) -> _Var:
        """The runtime variable of a _PathNumber, made on first use."""
        if found.var is None:
            first = sem.const(self.builder, found.numbers[0], found.node).type
            found.var = self.bind_local(name, first, found.node)
            self.settle(name, found.var, found.numbers, node)
        self.frame.scope[name] = found.var
        return found.var

    def settle(self, name: str, var: _Var, numbers: list, node):
        """``name``'s compile-time numbers become values of its runtime variable ``var``:
        typed with it, and assigned where each was bound (its _Pending)."""
        for number in numbers:
            self.record_type(var.name, sem.const(self.builder, number, node).type, var.type, node)
        for pending in self.frame.pending.pop(name, []):
            value = self.coerce(Py(pending.value), var.type, node)
            pending.assign = ir.Assign(pending.loc, var.name, value)

    def leave_loop(self, watch: _LoopWatch, detached: set[str], node):
        """After a runtime loop's body: a compile-time binding the body read and then
        changed would differ between iterations, which the lowered body cannot do."""
        frame = self.frame
        body = self.rewind(watch.entry)
        for name, value in body.items():
            before = watch.entry.get(name, _UNBOUND)
            if name in watch.reads and not _same_binding(before, value):
                read_line = frame.parsed.position(watch.reads[name])[1]
                raise self.error(
                    QnbTypeError,
                    f"{name!r} holds {_binding_name(before)}, which cannot be rebound under "
                    f"a runtime condition: this loop reads it (line {read_line}) and then "
                    "rebinds it, so its iterations would differ; use another name",
                    frame.bound_at.get(name, node),
                )
        self.merge_paths(watch.entry, [body, {}], detached, node)

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
            raise self.error(QnbTypeError, "t[:] = ... needs a tile on the left", target)
        if isinstance(value_node, ast.Subscript):
            view = self.lower_expr(value_node.value)
            if isinstance(view, ir.ArrayView):
                _kind, *window = self.window_indices(view, value_node, want="tile")
                value = self.load_window(current, *window, value_node)
                self.update_in_place(target.value, value, stmt)
                return
        value = self.lower_expr(value_node)
        self.update_in_place(target.value, self.coerce(value, current.type, value_node), stmt)

    def assign_target(self, target, value, stmt):
        """A plain assignment ``target = value`` (``value`` already lowered)."""
        if isinstance(target, ast.Name):
            self.release_alias(target.id)
            self.assign_name(target, value, stmt)
        elif isinstance(target, ast.Tuple):
            items = self.unpack(target, value, getattr(stmt, "value", None))
            # Python assigns the targets left to right once every value is computed.
            for index, element in enumerate(target.elts):
                if isinstance(element, ast.Name):
                    self.release_alias(element.id)
                    self.assign_name(element, items[index], stmt)
                    continue
                rest = [(item, element) for item in items[index:]]
                element, items[index:] = self.evaluate_once(element, rest)
                self.assign_subscript(element, items[index], stmt)
        elif isinstance(target, ast.Subscript):
            target, (value,) = self.evaluate_once(target, [(value, stmt)])
            self.assign_subscript(target, value, stmt)
        else:
            raise self.error(QnbSyntaxError, "unsupported assignment target", target)

    def unpack(self, target: ast.Tuple, value, value_node) -> list:
        """The values a tuple assignment gives its targets. Python computes every value
        before it assigns any target, so a value that reads what an earlier target
        assigns (``a, b = b, a``; ``y[0], y[1] = y[1], y[0]``) is taken into a temporary
        first."""
        count = len(target.elts)
        if isinstance(value, Py) and isinstance(value.value, tuple):
            items = [Py(item) for item in value.value]
        elif isinstance(value, tuple):
            items = list(value)
        elif isinstance(value, _Method) and value.name == "shape":  # rows, cols = x.shape
            view = value.receiver
            first = 0 if view.batch is None else 1
            loc = self.loc(value.node)
            items = [
                ir.ArrayDim(ir.scalar(i32), loc, view.param, first + axis)
                for axis in range(view.view_ndim)
            ]
        else:
            items = None
        if items is None or len(items) != count:
            raise self.error(
                QnbTypeError,
                f"cannot unpack this value into {count} {_plural(count, 'target', 'targets')}",
                target,
            )
        value_nodes = target.elts
        if isinstance(value_node, ast.Tuple) and len(value_node.elts) == count:
            value_nodes = value_node.elts
        assigned: set[str] = set()
        stores = False
        for index, element in enumerate(target.elts):
            if assigned or stores:
                items[index] = self.pinned(
                    items[index], value_nodes[index], assigned, stores, variables=True
                )
            root = element.value if isinstance(element, ast.Subscript) else element
            bound = self.frame.scope.get(root.id) if isinstance(root, ast.Name) else None
            if isinstance(bound, _Var):
                assigned.add(bound.name)
            elif isinstance(element, ast.Subscript):
                stores = True  # an array element (or something only the store will tell)
        return items

    def release_alias(self, name: str):
        """Plain assignment to a func parameter that is the caller's Tile16/Vec16 makes the
        name the func's own value, as in Python: the caller's tile is not changed."""
        frame = self.frame
        if name in frame.aliases:
            frame.aliases.discard(name)
            del frame.scope[name]
        frame.detached.pop(name, None)

    def update_in_place(self, target: ast.Name, value, stmt):
        """``t.load_(…)``, ``t[i, j] = s``, ``t += u``, ``t[:] = …``: the tile ``t`` names
        changes (the caller's, for a func parameter that received one)."""
        rebound = self.frame.detached.get(target.id)
        if rebound is not None:
            line = self.frame.parsed.position(rebound)[1]
            raise self.error(
                QnbTypeError,
                f"{target.id!r} is reassigned under the runtime condition at line {line}, so "
                "whether this in-place update reaches the caller's tile depends on the run; "
                "assign the new value to another name",
                stmt,
            )
        self.assign_name(target, value, stmt)

    def assign_name(self, target: ast.Name, value, stmt):
        if lists.is_list(value):
            lists.bind(self, target, value, stmt)
            return
        name = target.id
        frame = self.frame
        frame.bound_at[name] = stmt
        frame.known.pop(name, None)
        replaced = frame.scope.get(name)
        if isinstance(replaced, _PathNumber):
            # Not inside a block that assigns it (those make its variable at their entry):
            # this binding replaces it on every path.
            if replaced.var is not None:
                frame.scope[name] = replaced.var
            else:
                del frame.scope[name]
                frame.pending.pop(name, None)
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
            self.frame.scope[name] = value  # dtypes, tuples, None
            return
        existing = self.frame.scope.get(name)
        if isinstance(existing, Py) and not sem.is_number(existing.value):
            existing = None
        if isinstance(existing, _Var):
            raw = self.to_expr(value, stmt, existing.type.dtype)
            self.record_type(existing.name, raw.type, existing.type, target)
            expr = self.coerce(raw, existing.type, target)
            self.emit(ir.Assign(self.loc(stmt), existing.name, expr))
        else:
            expr = self.to_expr(value, stmt)
            var = self.bind_local(name, expr.type, target)
            if var.type != expr.type:
                expr = self.coerce(expr, var.type, target)
            self.emit(ir.Assign(self.loc(stmt), var.name, expr))
        # Outside runtime control flow, a number stays known: qnb.static(...) reads it.
        outside = self.block_depth == frame.base_depth
        if isinstance(value, Py) and outside and frame.scope[name].type.kind == "scalar":
            frame.known[name] = value.value

    def bind_local(self, name, type_, node) -> _Var:
        """Declare (or reuse) the IR variable for a Python local."""
        self.frame.known.pop(name, None)
        existing = self.frame.scope.get(name)
        if isinstance(existing, _Var):
            self.record_type(existing.name, type_, existing.type, node)
            return existing
        ir_name = self.frame.prefix + name
        if ir_name in self.joined and not isinstance(existing, _Var):
            ir_name = self.fresh(ir_name)
        declared = self.declared.get(ir_name, type_)
        if declared.kind != type_.kind or declared.shape != type_.shape:
            declared = type_
        var = _Var(ir_name, declared)
        self.display[ir_name] = name
        self.frame.scope[name] = var
        self.record_type(ir_name, type_, declared, node)
        return var

    def record_type(self, ir_name, new: ir.Type, current: ir.Type, node):
        if new.kind != current.kind or new.shape != current.shape:
            raise self.error(
                QnbTypeError,
                f"variable {self.display.get(ir_name, ir_name)!r} holds a {current}; "
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
        shown = _unparse(node) if isinstance(node, ast.expr) else hint
        name = self.temporary(hint, shown)
        self.joined[name] = expr.type
        self.emit(ir.Assign(self.loc(node), name, expr))
        return ir.Var(expr.type, self.loc(node), name)

    def ordered(self, nodes, earlier=()) -> list:
        """Lower ``nodes`` left to right after the ``earlier`` (value, node) pairs, as
        Python evaluates them: where a node emits statements (an inlined func's body), a
        value before it that those statements change (an array element read before a
        store, ``t[0, 0]`` or ``t * 2`` before a func updates ``t`` in place) is taken
        into a temporary first. Nothing is copied when nothing later emits statements."""
        values = [value for value, _ in earlier]
        sources = [node for _, node in earlier]
        for node in nodes:
            with self.captured_block() as emitted:
                value = self.lower_expr(node)
            if emitted:
                assigned, stores = _effects(emitted)
                if assigned or stores:
                    values = [
                        self.pinned(value_, source, assigned, stores)
                        for value_, source in zip(values, sources)
                    ]
                self.block.extend(emitted)
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
            if isinstance(batch, ir.Expr) and _depends_on(batch, assigned, stores):
                batch = self.materialise(batch, "batch", node)
                return ir.ArrayView(value.param, value.type, batch)
            return value
        if isinstance(value, ir.Var) and not variables:
            return value
        if (
            isinstance(value, ir.Expr)
            and not isinstance(value, ir.Const)
            and _depends_on(value, assigned, stores)
        ):
            return self.materialise(value, "operand", node)
        return value

    def assign_subscript(self, target, value, stmt):
        base = self.lower_expr(target.value)
        if lists.is_list(base):
            lists.write(self, base, self.lower_expr(target.slice), value, target, stmt)
            return
        if isinstance(base, ir.ArrayView):
            self.store_to_array(base, target, value, stmt)
            return
        if isinstance(base, ir.Expr) and base.type.kind in ("tile", "vec"):
            if not isinstance(target.value, ast.Name):
                raise self.error(QnbSyntaxError, "element writes need a tile variable", target)
            indices = self.subscript_parts(target)
            if any(isinstance(p, ast.Slice) for p in indices):
                raise self.error(
                    QnbTypeError,
                    f"a {base.type} cannot be sliced; write elements with t[i, j] = s, "
                    "or the whole tile with t[:] = ...",
                    target,
                )
            i, j = self.element_indices(base, indices, target)
            element = self.element_value(value, base.type.dtype, target, "tile")
            new = ir.TileSet(base.type, self.loc(target), base, i, j, element)
            self.update_in_place(target.value, new, stmt)
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
            element = self.element_value(value, view.type.dtype, target, "array")
            self.emit(ir.ArrayStore(self.loc(stmt), view, indices, element))
            return
        if not isinstance(value, ir.Expr) or value.type.kind not in ("tile", "vec"):
            raise self.error(
                QnbTypeError,
                "a slice of an array can only be assigned a tile "
                "(2-D window) or a vec (a 1-D range, a row or a column)",
                target,
            )
        if value.type.kind == "tile":
            _kind, view, r0, r1, c0, c1 = self.window_indices(view, target, want="tile")
            self.emit(
                ir.StoreWindow(
                    self.loc(stmt), self.cast_elements(value, view.type.dtype), view, r0, r1, c0, c1
                )
            )
            return
        _kind, view, start, stop, col, axis = self.window_indices(view, target, want="vec")
        value = self.cast_elements(value, view.type.dtype)
        self.emit(ir.VecStore(self.loc(stmt), value, view, start, stop, col, False, axis))

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

    def expr__Known(self, node):
        return node.value

    def expr_List(self, node):
        return lists.display(self, node)

    def expr_ListComp(self, node):
        return lists.comprehension(self, node)

    def expr_Tuple(self, node):
        items = self.ordered(node.elts)
        if all(isinstance(i, Py) for i in items):
            return Py(tuple(i.value for i in items))
        return tuple(items)

    def expr_Name(self, node):
        name = node.id
        frame = self.frame
        if name in frame.scope:
            found = frame.scope[name]
            if isinstance(found, _PathNumber):
                found = self.path_number_var(name, found, node)
            if isinstance(found, _Var):
                return ir.Var(found.type, self.loc(node), found.name)
            self.compile_time_read(name, found, node)
            return found
        if name in frame.parsed.local_names:
            raise self.error(QnbTypeError, f"{name!r} is used before it is assigned", node)
        value = frame.roots.get(name, UNDEFINED)
        if value is UNDEFINED:
            value = getattr(builtins, name, UNDEFINED) if name in KERNEL_BUILTINS else UNDEFINED
        if value is UNDEFINED:
            raise self.error(QnbTypeError, f"name {name!r} is not defined", node)
        return Py(sem.plain_value(value))

    def compile_time_read(self, name, found, node):
        """Note a read of a compile-time binding (see leave_loop); refuse an ambiguous one."""
        if isinstance(found, _Ambiguous):
            line = self.frame.parsed.position(found.node)[1]
            raise self.error(
                QnbTypeError,
                f"{name!r} is bound to {found.what}, which cannot be rebound under a runtime "
                f"condition (it has no runtime storage): line {line} binds it on some paths "
                "only; bind it before the runtime if/loop, or use another name on each path",
                node,
            )
        for watch in self.loop_watches:
            if watch.frame is self.frame and watch.entry.get(name, _UNBOUND) is found:
                watch.reads.setdefault(name, node)

    def expr_Attribute(self, node):
        base = self.lower_expr(node.value)
        attr = node.attr
        if isinstance(base, Py):
            value = base.value
            if attr == "eye" and getattr(value, "_qnb_kind", None) == "tile":
                m, n = value._qnb_shape
                if m != n:
                    raise self.error(
                        QnbTypeError,
                        f"eye is the identity of a square tile type; {value._qnb_intrinsic} is "
                        f"{m}×{n}",
                        node,
                    )
            if isinstance(value, (types.ModuleType, type, enum.Enum)) or getattr(
                value, "_qnb_intrinsic", None
            ):
                try:
                    return Py(sem.plain_value(self.reads.attr(value, attr)))
                except QnbCaptureError as err:
                    raise err.with_location(*self.frame.parsed.position(node)) from None
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
                    raise self.error(QnbTypeError, ".T is defined for tiles only", node)
                m, n = base.type.shape
                return ir.Transpose(ir.tile(base.type.dtype, (n, m)), self.loc(node), base)
            if attr == "dtype":
                return Py(base.type.dtype)
            if attr == "SHAPE":
                return Py(base.type.shape)
            if attr == "SIZE":
                shape = base.type.shape
                if len(shape) == 2 and shape[0] != shape[1]:
                    raise self.error(
                        QnbTypeError,
                        f"SIZE is the side of a square tile; a {base.type.shape_name} has "
                        "SHAPE (M, N)",
                        node,
                    )
                return Py(shape[0])
            if attr in sem.TILE_METHODS:
                return _Method(attr, base, node)
            raise self.error(QnbTypeError, f"{base.type} has no attribute {attr!r}", node)
        if isinstance(base, ir.Expr) and attr == "dtype":
            return Py(base.type.dtype)
        raise self.error(QnbTypeError, f"attribute {attr!r} is not supported here", node)

    def expr_BinOp(self, node):
        if isinstance(node.op, ast.MatMult):
            left, right = self.ordered([node.left, node.right])
            return self.matmul(left, right, None, node)
        op = sem.BINOPS.get(type(node.op))
        if op is None:
            spelled = _OPERATOR_SPELLING.get(type(node.op), type(node.op).__name__)
            raise self.error(QnbSyntaxError, f"the operator {spelled} is not supported", node)
        left, right = self.ordered([node.left, node.right])
        return self.binary(op, left, right, node)

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
        return sem.invert(self.builder, operand, node)

    def expr_BoolOp(self, node):
        """``a and b`` / ``a or b`` as in Python: the right side runs only where Python
        would run it. Bool operands give a bool; other scalars give the operand that
        decides (``0.0 or 2.5`` is 2.5, ``3.0 and 2.5`` is 2.5)."""
        op = "and" if isinstance(node.op, ast.And) else "or"
        result = self.lower_expr(node.values[0])
        for value_node in node.values[1:]:
            result = self.logical(
                op, result, lambda n=value_node: self.lower_expr(n), node, value_node
            )
        return result

    def logical(self, op, left, lower_right, node, right_node):
        """``left and/or right``, with ``left`` lowered and ``lower_right()`` lowering the
        right side, which runs only where Python would run it."""
        if isinstance(left, Py):
            if (op == "and") != self.py_truth(left, node):
                return left
            return lower_right()
        left = self.require_value(left, node)
        with self.nested_block() as before_right:
            right = lower_right()
        if not (_is_bool(left) and _is_bool(right)):
            return self.choose_operand(op, left, before_right, right, node, right_node)
        left = self.condition(left, node)
        if isinstance(right, Py):
            right = ir.Const(ir.scalar(bool_), self.loc(right_node), right.value)
        if before_right:
            return self.short_circuit(op, left, before_right, right, node)
        return ir.Logical(ir.scalar(bool_), self.loc(node), op, left, right)

    def choose_operand(self, op, left, before_right, right, node, right_node) -> ir.Expr:
        """``left or right`` / ``left and right`` on scalars that are not bools: the value
        of the operand that decides; ``right`` is computed only where Python computes it."""
        loc = self.loc(node)
        if not isinstance(left, ir.Const | ir.Var):
            left = self.materialise(left, op, node)  # read twice: the test and the value
        test = self.condition(left, node)
        chosen = self.where(test, left, right, node)  # the result type, as qnb.where gives it
        if chosen.type.kind != "scalar":
            raise self.error(
                QnbTypeError,
                f"'{op}' chooses between scalars; for tiles and vectors use qnb.where(...)",
                node,
            )
        name = self.temporary(op, f"… {op} …")
        self.joined[name] = chosen.type
        take_left = [ir.Assign(loc, name, self.coerce(left, chosen.type, node))]
        take_right = [
            *before_right,
            ir.Assign(loc, name, self.coerce(right, chosen.type, right_node)),
        ]
        if op == "or":
            self.emit(ir.If(loc, test, take_left, take_right))
        else:
            self.emit(ir.If(loc, test, take_right, take_left))
        return ir.Var(chosen.type, loc, name)

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
        """``a < b < c`` is ``a < b and b < c`` with ``b`` evaluated once: ``c`` is
        evaluated only where ``a < b`` holds, as in Python."""
        ops = []
        for op_node in node.ops:
            op = sem.CMPOPS.get(type(op_node))
            if op is None:
                spelled = _COMPARISON_SPELLING.get(type(op_node), type(op_node).__name__)
                raise self.error(
                    QnbSyntaxError, f"the comparison {spelled!r} is not supported", node
                )
            ops.append(op)
        left, right = self.ordered([node.left, node.comparators[0]])
        result = self.binary(ops[0], left, right, node)
        middle = [right, node.comparators[0]]  # the operand two comparisons share

        def compare_next(op, right_node):
            left, right = self.ordered([right_node], [tuple(middle)])
            middle[:] = [right, right_node]
            return self.binary(op, left, right, node)

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
        cond = self.lower_expr(node.test)
        if isinstance(cond, Py):
            return self.lower_expr(node.body if self.py_truth(cond, node.test) else node.orelse)
        with self.nested_block() as before_body:
            body = self.lower_expr(node.body)
        with self.nested_block() as before_else:
            orelse = self.lower_expr(node.orelse)
        for side in (body, orelse):
            if not isinstance(side, ir.Expr) and not (
                isinstance(side, Py) and sem.is_number(side.value)
            ):
                raise self.error(
                    QnbTypeError,
                    f"{_value_name(side)} cannot be chosen by a runtime condition; make the "
                    "condition compile-time with qnb.static(...) or a qnb.Template parameter",
                    node,
                )
        chosen = self.where(cond, body, orelse, node)  # typed as qnb.where types it
        if chosen.cond.type.kind != "scalar":
            if before_body or before_else:
                raise self.error(
                    QnbTypeError,
                    "a conditional expression with a tile or vec condition computes both "
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
        new_axis = _new_axis(self.subscript_parts(node))  # v[:, None] / v[None, :]
        base = self.lower_expr(node.value)
        if lists.is_list(base):
            return lists.read(self, base, self.lower_expr(node.slice), node)
        if isinstance(base, ir.ArrayView | ir.Expr):
            # The indices, left to right after the container (a func call in an index runs
            # before the element is read, but after a tile expression is computed).
            container = _Known(base, node.value)
            node = ast.copy_location(ast.Subscript(container, node.slice, node.ctx), node)
            node, (base,) = self.evaluate_once(node, [(base, container)])
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
        if isinstance(base, Py) and isinstance(base.value, ShapeFamily):
            return self.shaped_type(base.value, node)
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
                kind, view, *window = self.window_indices(base, node, want="any")
                return self.slice_load(kind, view, window, node)
            view, rest = self.apply_batch(base, parts, node)
            if not rest:
                return view
            indices = self.array_indices(view, rest, node)
            return ir.ArrayLoad(ir.scalar(view.type.dtype), self.loc(node), view, indices)
        if isinstance(base, ir.Expr) and base.type.kind in ("tile", "vec"):
            if base.type.kind == "vec" and new_axis is not None:
                n = base.type.shape[0]
                shape = (n, 1) if new_axis == 1 else (1, n)
                return ir.Reshape(ir.tile(base.type.dtype, shape), self.loc(node), base)
            if any(isinstance(p, ast.Slice) for p in parts):
                raise self.error(
                    QnbTypeError,
                    "tiles cannot be sliced; index elements with t[i, j] (a vec v becomes a "
                    "column with v[:, None] and a row with v[None, :])",
                    node,
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
                what = ast.unparse(node.func)
                raise self.error(QnbSyntaxError, sem.unsupported_call_message(what), node)
        handler = sem.INTRINSICS.get(name) or sem.shaped_intrinsic(target)
        if handler is None:
            message = (
                f"{name}(...) is not a constructor; use {name}.zeros(dtype) or {name}.full(value, "
                "dtype)"
                if getattr(target, "_qnb_kind", None) == "vec"
                else f"{name}[...] is a type; call its constructors ({name}[M, N].zeros(dtype) …)"
                if name in ("Tile", "Vec")
                else f"{name} cannot be called"
            )
            raise self.error(QnbTypeError, message, node)
        if any(k.arg is None for k in node.keywords):
            raise self.error(QnbSyntaxError, "**kwargs are not supported", node)
        values = self.ordered([*node.args, *(k.value for k in node.keywords)])
        args = values[: len(node.args)]
        kwargs = {k.arg: v for k, v in zip(node.keywords, values[len(node.args) :])}
        return handler(self.builder, node, target, args, kwargs)

    def shaped_type(self, family, node):
        """``Tile[M, N]`` / ``Vec[N]`` in a kernel: the sizes are compile-time values."""
        key = self.lower_expr(node.slice)
        parts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        if isinstance(key, tuple):  # a size bound to a compile-time number (n = 32)
            key = tuple(
                Py(self.frame.known[p.id])
                if isinstance(item, ir.Var) and isinstance(p, ast.Name) and p.id in self.frame.known
                else item
                for item, p in zip(key, parts)
            )
            if all(isinstance(item, Py) for item in key):
                key = Py(tuple(item.value for item in key))
        elif (
            isinstance(key, ir.Var)
            and isinstance(node.slice, ast.Name)
            and node.slice.id in self.frame.known
        ):
            key = Py(self.frame.known[node.slice.id])
        if not isinstance(key, Py):
            raise self.error(
                QnbTypeError,
                f"{family!r}[...] takes compile-time sizes (literals, captured constants, "
                "qnb.Template parameters or static loop values), not runtime values",
                node,
            )
        try:
            return Py(family.lookup(sem.plain_value(key.value)))
        except ValueError as exc:
            raise self.error(QnbTypeError, str(exc), node) from None

    def call_method(self, method: _Method, node):
        # The receiver (``(t * 2).row(...)``) is computed before the arguments.
        values = self.ordered(
            [*node.args, *(k.value for k in node.keywords)], [(method.receiver, node.func)]
        )
        method = _Method(method.name, values[0], method.node)
        args = values[1 : 1 + len(node.args)]
        kwargs = {k.arg: v for k, v in zip(node.keywords, values[1 + len(node.args) :])}
        handler = sem.TILE_METHODS.get(method.name)
        if handler is None:
            raise self.error(QnbTypeError, _method_misuse(method), node)
        return handler(self.builder, node, method, args, kwargs)

    # ------------------------------------------------------------------ static and funcs

    def is_static_call(self, node) -> bool:
        return isinstance(node, ast.Call) and _is_static(self.py_callee(node.func))

    def static_value(self, node) -> Py:
        if len(node.args) != 1 or node.keywords:
            raise self.error(QnbTypeError, "qnb.static takes exactly one expression", node)
        frame = self.frame
        # Captured names (an undefined one stays out, so Python's NameError names it),
        # then the kernel's compile-time bindings, which shadow them.
        namespace = {k: v for k, v in frame.roots.items() if v is not UNDEFINED}
        for name, value in frame.scope.items():
            if isinstance(value, Py):
                namespace[name] = value.value
            elif isinstance(value, _Var) and name in frame.known:
                namespace[name] = frame.known[name]
            elif isinstance(value, lists.StaticList):
                namespace[name] = lists.Length(len(value))  # len(xs) only
            elif name in namespace:
                del namespace[name]
        expression = ast.Expression(node.args[0])
        ast.fix_missing_locations(expression)
        for name_node in ast.walk(node.args[0]):
            if isinstance(name_node, ast.Name) and name_node.id in frame.scope:
                found = frame.scope[name_node.id]
                if not isinstance(found, _Var | _PathNumber):
                    self.compile_time_read(name_node.id, found, name_node)
        runtime = [
            n.id
            for n in ast.walk(node.args[0])
            if isinstance(n, ast.Name) and n.id in frame.scope and n.id not in namespace
        ]
        if runtime:
            raise self.error(
                QnbTypeError,
                f"qnb.static(...) can only read compile-time values; "
                f"{runtime[0]!r} is a runtime value",
                node,
            )
        # Every attribute the expression reads goes through the recorder (it enters the key).
        expression = _ReadAttributes().visit(copy.deepcopy(expression))  # the tree is shared
        ast.fix_missing_locations(expression)
        namespace[_READ_ATTRIBUTE] = self.read_attribute(node)
        try:
            code = compile(expression, frame.parsed.filename, "eval")
            # One namespace (globals): a generator expression inside sees the names too.
            value = eval(code, {**namespace, "__builtins__": builtins})  # noqa: S307
        except QnbCaptureError as err:
            raise err.with_location(*frame.parsed.position(node)) from None
        except NameError as exc:
            name = getattr(exc, "name", None)
            if name in frame.parsed.local_names:
                message = f"{name!r} is used before it is assigned"
            elif name is not None:
                message = f"name {name!r} is not defined"
            else:
                message = f"qnb.static(...) failed: NameError: {exc}"
            raise self.error(QnbTypeError, message, node) from None
        except Exception as exc:  # noqa: BLE001 - the user's own compile-time expression
            raise self.error(
                QnbTypeError, f"qnb.static(...) failed: {type(exc).__name__}: {exc}", node
            ) from None
        return Py(sem.plain_value(value))

    def read_attribute(self, node):
        """``getattr`` for a ``qnb.static`` expression: the recorder's, with Python's own
        errors (a read qnb cannot key raises QnbCaptureError at the expression)."""
        reads = self.reads

        def read(value, name):
            return reads.attr(value, name)

        return read

    def inline(self, target, node):
        parsed: ParsedFunction = target.parsed
        unit_name, _ = self.unit_of(parsed)
        if unit_name in self.inline_stack:
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

        args = self.ordered(node.args)
        self.counter += 1
        frame = self.new_frame(parsed, f"{parsed.name}.{self.counter}.")
        for name, arg_node, value in zip(parsed.param_names, node.args, args):
            if (
                isinstance(value, ir.Var)
                and value.type.kind in ("tile", "vec")
                and isinstance(arg_node, ast.Name)
            ):
                # The caller's tile: in-place ops on it reach the caller (release_alias).
                frame.scope[name] = self.frame.scope[arg_node.id]
                frame.aliases.add(name)
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
        self.frames.append(frame)
        self.inline_stack.append(unit_name)
        try:
            saved_depth = self.loop_depth
            self.loop_depth = 0
            try:
                tail = self.lower_func_body(body)
                if isinstance(tail, ast.Return) and tail.value is not None:
                    result = self.lower_expr(tail.value)
                    if isinstance(result, ir.Expr) and _reads_state(result, frame.prefix):
                        # Python takes the value when the func returns: code the caller
                        # runs next (``f(c) + g(c)``, g storing to c) must not change it.
                        result = self.materialise(result, "result", tail)
            finally:
                self.loop_depth = saved_depth
        finally:
            self.frames.pop()
            self.inline_stack.pop()
        return result

    def lower_func_body(self, body) -> ast.Return | None:
        """Lower a @qnb.func's statements up to the ``return`` that ends it, and return
        that ``return`` (None: it ends without one). An ``if`` decided at compile time
        (``if qnb.static(flag):``) is pruned as it is met, so a return that ends its
        taken branch ends the func: what follows is not lowered, as Python would not
        run it. A return anywhere else (under a runtime ``if``) is refused; parse.py
        has refused the rest at decoration."""
        for stmt in body:
            if isinstance(stmt, ast.Return):
                return stmt
            if isinstance(stmt, ast.If) and _holds_return(stmt):
                cond = self.lower_expr(stmt.test)
                if not isinstance(cond, Py):
                    inner = next(n for n in ast.walk(stmt) if isinstance(n, ast.Return))
                    raise self.error(
                        QnbSyntaxError,
                        "a kernel or func may return early only from an `if` decided at compile "
                        "time (`if qnb.static(...)`); this `if` is decided at run time",
                        inner,
                    )
                taken = stmt.body if self.py_truth(cond, stmt.test) else stmt.orelse
                tail = self.lower_func_body(taken)
                if tail is not None:
                    return tail
                continue
            self.lower_stmt(stmt)
        return None

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
            return sem.const(self.builder, value.value, node, dtype)
        if isinstance(value, _Method):
            raise self.error(QnbTypeError, _method_misuse(value), node)
        raise self.error(QnbTypeError, f"{_value_name(value)} cannot be used as a value here", node)

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

    def element_value(self, value, dtype: DType, target, into: str) -> ir.Expr:
        """The scalar stored into one element of an array or a tile (``into``)."""
        if isinstance(value, ir.Expr) and value.type.kind in ("tile", "vec"):
            name = _unparse(target.value)
            if into == "tile":
                hint = f"an element of {name} is a scalar"
            elif value.type.kind == "tile":
                hint = (
                    f"store a tile with t.store({name}, row, col) or into a window "
                    f"{name}[r0:r1, c0:c1] = t"
                )
            else:
                hint = f"store a vector with v.store({name}, start) or into {name}[s0:s1] = v"
            raise self.error(
                QnbTypeError, f"cannot store a {value.type} into one element; {hint}", target
            )
        return self.coerce(value, ir.scalar(dtype), target)

    def cast_elements(self, expr: ir.Expr, dtype: DType) -> ir.Expr:
        if expr.type.dtype is dtype:
            return expr
        if isinstance(expr, ir.Const):
            return ir.Const(
                expr.type.with_dtype(dtype), expr.loc, sem.convert_value(expr.value, dtype)
            )
        return ir.Cast(expr.type.with_dtype(dtype), expr.loc, expr)

    def binary(self, op, left, right, node):
        return sem.binary(self.builder, op, left, right, node)

    def where(self, cond, a, b, node):
        return sem.where(self.builder, cond, a, b, node)

    def matmul(self, a, b, acc, node):
        return sem.matmul(self.builder, a, b, acc, node)

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

    def refuse_negative_literals(self, parts):
        for part in parts:
            if is_negative_literal(part):
                raise self.error(
                    QnbSyntaxError,
                    "Negative indices are not supported (elements are counted from 0)",
                    part,
                )

    def array_indices(self, view: ir.ArrayView, parts, node) -> list[ir.Expr]:
        self.refuse_negative_literals(parts)
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
        self.refuse_negative_literals(parts)
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
        """Parse ``arr[(b,) r0:r1, c0:c1]`` / ``arr[(b,) r0:r1, col]`` /
        ``arr[(b,) row, c0:c1]`` / ``arr[s0:s1]``.

        Returns ("tile", view, r0, r1, c0, c1) for a tile window, or ("vec", view, start,
        stop, col, axis) for a vector window (col None on 1-D arrays; axis 1 for a row,
        with ``col`` the fixed row, as in :class:`ir.VecLoad`)."""
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
            return "vec", view, start, stop, None, 0
        rows, cols = parts
        if not isinstance(rows, ast.Slice):
            # arr[row, c0:c1]: a row of the array
            if want == "tile":
                raise self.error(QnbTypeError, "arr[row, c0:c1] is a Vec16, not a Tile16", node)
            row = self.to_index(self.lower_expr(rows), rows, "row index")
            c0, c1 = bounds(cols)
            return "vec", view, c0, c1, row, 1
        r0, r1 = bounds(rows)
        if isinstance(cols, ast.Slice):
            if want == "vec":
                raise self.error(QnbTypeError, "a 2-D window is a Tile16, not a Vec16", node)
            c0, c1 = bounds(cols)
            return "tile", view, r0, r1, c0, c1
        if want == "tile":
            raise self.error(QnbTypeError, "arr[r0:r1, col] is a Vec16, not a Tile16", node)
        col = self.to_index(self.lower_expr(cols), cols, "column index")
        return "vec", view, r0, r1, col, 0

    def slice_load(self, kind, view, window, node):
        if kind == "tile":
            r0, r1, c0, c1 = window
            zeros = sem.fill(self.builder, "tile", "full", 0, view.type.dtype, node)
            return self.load_window(zeros, view, r0, r1, c0, c1, node)
        start, stop, col, axis = window
        vec = ir.vec(view.type.dtype)
        return ir.VecLoad(vec, self.loc(node), view, start, stop, col, None, False, axis)

    def load_window(self, base, view, r0, r1, c0, c1, node):
        if view.view_ndim != 2:
            raise self.error(
                QnbTypeError,
                f"tile windows need a 2-D array (or a slab of a 3-D "
                f"one), got a {view.view_ndim}-D array",
                node,
            )
        # a tile of another dtype takes the elements converted, as astype converts them
        return ir.LoadWindow(base.type, self.loc(node), base, view, r0, r1, c0, c1)


_READ_ATTRIBUTE = "__qnb_read_attribute__"


class _ReadAttributes(ast.NodeTransformer):
    """``x.name`` (read) becomes ``__qnb_read_attribute__(x, "name")``."""

    def visit_Attribute(self, node):
        self.generic_visit(node)
        if not isinstance(node.ctx, ast.Load):
            return node
        call = ast.Call(
            ast.Name(_READ_ATTRIBUTE, ast.Load()), [node.value, ast.Constant(node.attr)], []
        )
        return ast.copy_location(call, node)


def _new_axis(parts) -> int | None:
    """``v[:, None]`` (1: a column) or ``v[None, :]`` (0: a row); None for anything else."""
    if len(parts) != 2:
        return None

    def full(part):
        return isinstance(part, ast.Slice) and part.lower is part.upper is part.step is None

    def none(part):
        return isinstance(part, ast.Constant) and part.value is None

    if full(parts[0]) and none(parts[1]):
        return 1
    if none(parts[0]) and full(parts[1]):
        return 0
    return None


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
    """How a message names a compile-time value."""
    if isinstance(value, types.ModuleType):
        return f"module {value.__name__!r}"
    if isinstance(value, DType) or is_dtype_like(value):
        return f"the dtype {getattr(value, '__name__', value)}"
    if getattr(value, "_qnb_annotation", False):
        return repr(value)  # qnb.Template, qnb.Array[...]
    name = getattr(value, "__qualname__", None) or getattr(value, "__name__", None)
    if name and isinstance(value, type):
        return name
    if name and callable(value):
        return f"{name}()"
    return f"a {type(value).__name__}"


def _value_name(value) -> str:
    """How a message names a value that is not a number (an array, a tuple, a dtype…)."""
    if isinstance(value, ir.ArrayView):
        return "an array"
    if isinstance(value, tuple):
        return "a tuple"
    return _py_name(value.value if isinstance(value, Py) else value)


def _unparse(node) -> str:
    """The user's spelling of an expression (also of one already lowered, in part or
    whole)."""
    return ast.unparse(_as_written(node))


def _as_written(node):
    """``node`` with each _Known in it back to the expression it stands for."""
    if isinstance(node, _Known):
        return node.source
    if isinstance(node, list):
        return [_as_written(item) for item in node]
    if not isinstance(node, ast.AST) or not any(isinstance(n, _Known) for n in ast.walk(node)):
        return node
    fields = {name: _as_written(getattr(node, name, None)) for name in node._fields}
    return ast.copy_location(type(node)(**fields), node)


def _method_misuse(method: _Method) -> str:
    spelled = ast.unparse(method.node)
    if method.name == "shape":
        return f"{spelled} must be indexed: {spelled}[d]"
    return f"{spelled} is a method; call it: {spelled}(...)"


_OPERATOR_SPELLING = {
    ast.MatMult: "@",
    ast.LShift: "<<",
    ast.RShift: ">>",
    ast.Add: "+",
    ast.Sub: "-",
    ast.Mult: "*",
    ast.Div: "/",
    ast.FloorDiv: "//",
    ast.Mod: "%",
    ast.Pow: "**",
    ast.BitAnd: "&",
    ast.BitOr: "|",
    ast.BitXor: "^",
}
_COMPARISON_SPELLING = {ast.In: "in", ast.NotIn: "not in", ast.Is: "is", ast.IsNot: "is not"}


def _is_bool(value) -> bool:
    if isinstance(value, Py):
        return isinstance(value.value, bool)
    return isinstance(value, ir.Expr) and value.type.dtype is bool_


def _reads_state(expr: ir.Expr, own_prefix: str) -> bool:
    """Whether later code could change what ``expr`` reads: an array element, or a
    variable that is not one of an inlined func's own (``own_prefix``)."""
    for node in ir.walk(expr):
        if isinstance(node, ir.ArrayLoad | ir.LoadWindow | ir.VecLoad):
            return True
        if isinstance(node, ir.Var) and not node.name.startswith(own_prefix):
            return True
    return False


def _assigned_names(statements) -> tuple[set[str], set[str]]:
    """The names ``statements`` assign: (by plain assignment and for loops, by any
    assignment including ``x += …``)."""
    plain: set[str] = set()
    every: set[str] = set()
    for stmt in statements:
        for node in ast.walk(stmt):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                every.add(node.id)
            targets = ()
            if isinstance(node, ast.Assign):
                targets = node.targets
            elif isinstance(node, ast.AnnAssign | ast.For):
                targets = (node.target,)
            for target in targets:
                for element in target.elts if isinstance(target, ast.Tuple) else (target,):
                    if isinstance(element, ast.Name):
                        plain.add(element.id)
    return plain, every


def _same_binding(a, b) -> bool:
    """Whether two bindings of a name are the same value (so paths that made them agree)."""
    if a is b:
        return True
    if isinstance(a, Py) and isinstance(b, Py):
        return _same_py(a.value, b.value)
    if isinstance(a, ir.ArrayView) and isinstance(b, ir.ArrayView):
        return a.param == b.param and a.type == b.type and _same_index(a.batch, b.batch)
    if isinstance(a, _Var) and isinstance(b, _Var):
        return a.name == b.name
    return False


def _same_py(a, b) -> bool:
    if type(a) is not type(b):
        return False
    if isinstance(a, tuple):
        return len(a) == len(b) and all(_same_py(x, y) for x, y in zip(a, b))
    if isinstance(a, float):
        return a.hex() == b.hex() or (a != a and b != b)
    try:
        return bool(a == b)
    except Exception:  # noqa: BLE001 - a compile-time value without a usable ==
        return False


def _same_index(a, b) -> bool:
    if a is None or b is None:
        return a is b
    if isinstance(a, ir.Const) and isinstance(b, ir.Const):
        return a.value == b.value and a.type == b.type
    return isinstance(a, ir.Var) and isinstance(b, ir.Var) and a.name == b.name


def _binding_name(value) -> str:
    """How a message names a compile-time binding."""
    if isinstance(value, ir.ArrayView):
        return "an array"
    if isinstance(value, Py):
        if isinstance(value.value, tuple):
            return f"the tuple {value.value!r}"
        if isinstance(value.value, DType) or is_dtype_like(value.value):
            return _py_name(value.value)
        return f"the compile-time value {value.value!r}"
    return "a compile-time value"


def _settle_pending(statements: list) -> list:
    """``statements`` with each _Pending replaced by its assignment, or dropped."""
    out = []
    for stmt in statements:
        if isinstance(stmt, _Pending):
            if stmt.assign is not None:
                out.append(stmt.assign)
            continue
        if isinstance(stmt, ir.If):
            stmt.then_body = _settle_pending(stmt.then_body)
            stmt.else_body = _settle_pending(stmt.else_body)
        elif isinstance(stmt, ir.For | ir.While):
            stmt.body = _settle_pending(stmt.body)
        out.append(stmt)
    return out


def _effects(statements: list) -> tuple[set[str], bool]:
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
        elif isinstance(stmt, ir.If):
            pending.extend(stmt.then_body)
            pending.extend(stmt.else_body)
        elif isinstance(stmt, ir.For):
            assigned.add(stmt.var)
            pending.extend(stmt.body)
        elif isinstance(stmt, ir.While):
            pending.extend(stmt.body)
        elif isinstance(stmt, _Pending) and stmt.assign is not None:
            assigned.add(stmt.assign.name)
    return assigned, stores


def _depends_on(expr: ir.Expr, assigned: set[str], stores: bool) -> bool:
    """Whether what ``expr`` reads is among what _effects found changed."""
    for node in ir.walk(expr):
        if isinstance(node, ir.Var) and node.name in assigned:
            return True
        if stores and isinstance(node, ir.ArrayLoad | ir.LoadWindow | ir.VecLoad):
            return True
    return False


__all__ = ["ParamSpec", "lower_kernel"]


def _holds_return(stmt: ast.stmt) -> bool:
    """Whether a ``return`` stands anywhere inside ``stmt``."""
    return any(isinstance(node, ast.Return) for node in ast.walk(stmt))
