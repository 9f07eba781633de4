"""The walk of statements: one ``stmt_<Node>`` method per Python statement a kernel may
hold. Each emits IR statements into the walker's current block; a runtime ``if`` or loop
asks the scopes (``scopes.Scopes``) to enter it and to merge the paths it leaves."""

from __future__ import annotations

import ast

from qnb import ir
from qnb.dtypes import bool_, i32
from qnb.errors import QnbSyntaxError, QnbTypeError
from qnb.frontend import lists, operators
from qnb.frontend.bindings import Py
from qnb.frontend.scopes import Var
from qnb.frontend.values import OPERATOR_SPELLING


class Statements:
    def __init__(self, lower):
        self.lower = lower  # the walker

    def stmt_Pass(self, stmt):
        pass

    def stmt_Expr(self, stmt):
        if isinstance(stmt.value, ast.Constant):
            return  # a stray string or number: nothing to do
        self.lower.lower_expr(stmt.value)

    def stmt_Return(self, stmt):
        raise self.lower.error(
            QnbSyntaxError, "return is only allowed as the last statement of a @qnb.func", stmt
        )

    def stmt_Break(self, stmt):
        self.loop_exit(stmt, "break", ir.Break)

    def stmt_Continue(self, stmt):
        self.loop_exit(stmt, "continue", ir.Continue)

    def loop_exit(self, stmt, word, node_class):
        lower = self.lower
        if lower.static_depth and not lower.loop_depth:
            raise lower.error(
                QnbSyntaxError, f"{word} inside a qnb.static loop is not supported", stmt
            )
        if not lower.loop_depth:
            raise lower.error(QnbSyntaxError, f"{word} outside a loop", stmt)
        lower.emit(node_class(lower.loc(stmt)))

    # ------------------------------------------------------------------ assignment

    def stmt_AnnAssign(self, stmt):
        if stmt.value is None:
            return
        self.assign_target(stmt.target, self.lower.lower_expr(stmt.value), stmt)

    def stmt_Assign(self, stmt):
        lower = self.lower
        if len(stmt.targets) == 1 and is_full_tile_target(stmt.targets[0]):
            lower.indexing.assign_full_tile(stmt.targets[0], stmt.value, stmt)
            return
        value = lower.lower_expr(stmt.value)
        if len(stmt.targets) > 1 and isinstance(value, ir.Expr) and not isinstance(value, ir.Const):
            # ``a = b = a + 1``: every target gets the value computed before the first store.
            value = lower.order.materialise(value, "value", stmt.value)
        for target in stmt.targets:
            self.assign_target(target, value, stmt)

    def stmt_AugAssign(self, stmt):
        """``target op= value``. The target's container and indices are evaluated once,
        as Python does; on a name it updates in place (``t += u`` reaches the caller's
        tile from inside a @qnb.func, as it would on a NumPy array)."""
        lower = self.lower
        target = stmt.target
        if is_full_tile_target(target) and isinstance(target.value, ast.Name):
            target = target.value  # t[:] += u is t += u
        if isinstance(target, ast.Name):
            name = ast.copy_location(ast.Name(target.id, ast.Load()), target)
            current = lower.expr_Name(name)
            value = self.augmented(stmt, current, lower.lower_expr(stmt.value))
            lower.scopes.update_in_place(target, value, stmt)
            return
        target, _ = lower.order.evaluate_once(target)
        with lower.captured_block() as right_statements:
            right = lower.lower_expr(stmt.value)  # (what it emits: an inlined func's body)
        if right_statements:
            # The right side runs code: the indices and the current element are taken
            # before it, as Python takes them.
            target = lower.order.pin_indices(target)
            current = lower.lower_expr(target)
            if isinstance(current, ir.Expr):
                current = lower.order.materialise(current, "current", target)
        else:
            current = lower.lower_expr(target)
        lower.block.extend(right_statements)
        lower.indexing.assign_subscript(target, self.augmented(stmt, current, right), stmt)

    def augmented(self, stmt, current, value):
        lower = self.lower
        if isinstance(stmt.op, ast.MatMult):
            return lower.matmul(current, value, None, stmt)
        op = operators.BINOPS.get(type(stmt.op))
        if op is None:
            spelled = OPERATOR_SPELLING.get(type(stmt.op), type(stmt.op).__name__)
            raise lower.error(QnbSyntaxError, f"the operator {spelled}= is not supported", stmt)
        return lower.binary(op, current, value, stmt)

    def assign_target(self, target, value, stmt):
        """A plain assignment ``target = value`` (``value`` already lowered)."""
        lower = self.lower
        scopes = lower.scopes
        if isinstance(target, ast.Name):
            scopes.release_alias(target.id)
            scopes.assign_name(target, value, stmt)
        elif isinstance(target, ast.Tuple):
            items = lower.order.unpack(target, value, getattr(stmt, "value", None))
            # Python assigns the targets left to right once every value is computed.
            for index, element in enumerate(target.elts):
                if isinstance(element, ast.Name):
                    scopes.release_alias(element.id)
                    scopes.assign_name(element, items[index], stmt)
                    continue
                rest = [(item, element) for item in items[index:]]
                element, items[index:] = lower.order.evaluate_once(element, rest)
                lower.indexing.assign_subscript(element, items[index], stmt)
        elif isinstance(target, ast.Subscript):
            target, (value,) = lower.order.evaluate_once(target, [(value, stmt)])
            lower.indexing.assign_subscript(target, value, stmt)
        else:
            raise lower.error(QnbSyntaxError, "unsupported assignment target", target)

    # ------------------------------------------------------------------ runtime control flow

    def stmt_If(self, stmt):
        lower = self.lower
        scopes = lower.scopes
        cond = lower.lower_expr(stmt.test)
        if isinstance(cond, Py):
            lower.lower_body(stmt.body if lower.py_truth(cond, stmt.test) else stmt.orelse)
            return
        cond = lower.condition(cond, stmt.test)
        detached = scopes.enter_runtime_block([*stmt.body, *stmt.orelse], stmt)
        frame = scopes.frame
        entry = dict(frame.scope)
        entry_detached = dict(frame.detached)
        with lower.nested_block() as then_body:
            lower.lower_body(stmt.body)
        then_bound = scopes.rewind(entry)
        frame.detached = entry_detached
        with lower.nested_block() as else_body:
            lower.lower_body(stmt.orelse)
        else_bound = scopes.rewind(entry)
        scopes.merge_paths(entry, [then_bound, else_bound], detached, stmt)
        lower.emit(ir.If(lower.loc(stmt), cond, then_body, else_body))

    def stmt_While(self, stmt):
        # Lowering the condition may emit statements (an inlined @qnb.func's body): those
        # must run before every test, so the loop becomes `while True: <stmts>; if not
        # cond: break; <body>`. A plain condition stays the IR's own While condition.
        lower = self.lower
        scopes = lower.scopes
        detached = scopes.enter_runtime_block(stmt.body, stmt)
        watch = scopes.watch_loop()
        try:
            with lower.nested_block() as before_test:
                cond = lower.lower_expr(stmt.test)
                never = isinstance(cond, Py) and not lower.py_truth(cond, stmt.test)
                if isinstance(cond, Py):
                    cond = ir.Const(ir.scalar(bool_), lower.loc(stmt.test), True)
                cond = lower.condition(cond, stmt.test)
            body = [] if never else self.loop_body(stmt.body)
        finally:
            scopes.loop_watches.pop()
        scopes.leave_loop(watch, detached, stmt)
        if never:
            lower.block.extend(before_test)  # the test runs once
            return
        loc = lower.loc(stmt)
        if before_test:
            not_cond = ir.Unary(ir.scalar(bool_), cond.loc, "not", cond)
            stop = ir.If(loc, not_cond, [ir.Break(loc)], [])
            always = ir.Const(ir.scalar(bool_), loc, True)
            lower.emit(ir.While(loc, always, [*before_test, stop, *body]))
        else:
            lower.emit(ir.While(loc, cond, body))

    def loop_body(self, statements) -> list[ir.Stmt]:
        lower = self.lower
        with lower.nested_block() as body:
            lower.loop_depth += 1
            try:
                lower.lower_body(statements)
            finally:
                lower.loop_depth -= 1
        return body

    def stmt_For(self, stmt):
        lower = self.lower
        iterator = stmt.iter
        if lower.compile_time.is_static_call(iterator):
            if not self.static_list_loop(stmt):
                self.static_loop(stmt)
            return
        if not (
            isinstance(iterator, ast.Call) and lower.compile_time.callee_is(iterator.func, range)
        ):
            raise lower.error(
                QnbSyntaxError,
                "a kernel's for loop must iterate over range(...) or qnb.static(...)",
                iterator,
            )
        if iterator.keywords or not 1 <= len(iterator.args) <= 3:
            raise lower.error(QnbTypeError, "range() takes 1 to 3 positional arguments", iterator)
        bounds = lower.order.ordered(iterator.args)
        args = [lower.to_index(b, a, "range() bound") for b, a in zip(bounds, iterator.args)]
        if len(args) == 1:
            args.insert(0, ir.Const(ir.scalar(i32), lower.loc(iterator), 0))
        if len(args) == 2:
            args.append(ir.Const(ir.scalar(i32), lower.loc(iterator), 1))
        step = args[2]
        if isinstance(step, ir.Const) and step.value == 0:
            raise lower.error(QnbTypeError, "range() step must not be zero", iterator.args[2])
        scopes = lower.scopes
        detached = scopes.enter_runtime_block([stmt], stmt)
        scopes.release_alias(stmt.target.id)
        var = scopes.bind_local(stmt.target.id, ir.scalar(i32), stmt.target)
        watch = scopes.watch_loop()
        try:
            body = self.loop_body(stmt.body)
        finally:
            scopes.loop_watches.pop()
        scopes.leave_loop(watch, detached, stmt)
        lower.emit(ir.For(lower.loc(stmt), var.name, args[0], args[1], step, body))

    # ------------------------------------------------------------------ static loops

    def static_loop(self, stmt):
        """``for x in qnb.static(iterable)``: unrolled, ``x`` bound to each item."""
        lower = self.lower
        scopes = lower.scopes
        iterator = stmt.iter
        values = lower.compile_time.static_value(iterator)
        try:
            items = list(values.value)
        except TypeError:
            raise lower.error(
                QnbTypeError, "qnb.static(...) in a for loop must give an iterable", iterator
            ) from None
        name, frame = stmt.target.id, scopes.frame
        before = dict(frame.scope) if scopes.in_runtime_block() else None

        def bind_item(item):
            # As in Python, the loop variable keeps the last item after the loop.
            frame.scope[name] = Py(operators.plain_value(item))
            frame.bound_at[name] = stmt

        self.unroll(stmt, items, bind_item)
        if before is not None:
            scopes.note_static_numbers(before, stmt)

    def static_list_loop(self, stmt) -> bool:
        """``for x in qnb.static(xs)`` over a compile-time list: unrolled, ``x`` bound to
        each element variable in turn (``x += t`` updates the element, as it would update
        a NumPy array held in a Python list). False when the iterable is no list."""
        lower = self.lower
        scopes = lower.scopes
        iterator = stmt.iter
        if len(iterator.args) != 1 or iterator.keywords:
            return False
        source = iterator.args[0]
        if isinstance(source, ast.Name):
            found = scopes.frame.scope.get(source.id)
            if not isinstance(found, lists.StaticList):
                return False
            scopes.compile_time_read(source.id, found, source)
        elif isinstance(source, ast.List | ast.ListComp):
            found = lower.lower_expr(source)
        else:
            return False
        name, frame = stmt.target.id, scopes.frame

        def bind_item(element):
            how, item = element
            slot = frame.scope.get(item) if how == "slot" else None
            if isinstance(slot, Var):
                frame.scope[name] = slot  # the element itself
                frame.aliases.add(name)
                frame.bound_at[name] = stmt
            else:
                value = item if how == "value" else slot
                frame.scope.pop(name, None)
                target = ast.copy_location(ast.Name(name, ast.Store()), stmt)
                scopes.assign_name(target, value, stmt)

        self.unroll(stmt, lists.elements(lower, found, stmt), bind_item)
        return True

    def unroll(self, stmt, items, bind_item):
        """The body of a static loop lowered once per item, after ``bind_item(item)``."""
        lower = self.lower
        scopes = lower.scopes
        name, frame = stmt.target.id, scopes.frame
        lower.static_depth += 1
        scopes.static_blocks.append(scopes.block_depth)
        saved_loop, lower.loop_depth = lower.loop_depth, 0
        try:
            for item in items:
                scopes.release_alias(name)
                frame.known.pop(name, None)
                bind_item(item)
                lower.lower_body(stmt.body)
        finally:
            lower.static_depth -= 1
            scopes.static_blocks.pop()
            lower.loop_depth = saved_loop


def is_full_tile_target(target) -> bool:
    """``t[:]``."""
    return (
        isinstance(target, ast.Subscript)
        and isinstance(target.slice, ast.Slice)
        and target.slice.lower is None
        and target.slice.upper is None
    )
