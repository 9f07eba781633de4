"""Inlining of ``@qnb.func`` calls: the func's body lowered in a frame of its own, its
locals prefixed (``f.2.a``), a tile argument aliased so in-place ops reach the caller, and
the ``return`` that ends it giving the call's value."""

from __future__ import annotations

import ast

from qnb import ir
from qnb.errors import QnbSyntaxError, QnbTypeError
from qnb.frontend.order import reads_state
from qnb.frontend.parse import ParsedFunction
from qnb.frontend.scopes import Var
from qnb.frontend.semantics import Py
from qnb.frontend.values import plural


class Inliner:
    def __init__(self, lower):
        self.lower = lower  # the walker
        self.stack: list[str] = []  # the units being inlined (recursion is refused)

    def inline(self, target, node):
        lower = self.lower
        scopes = lower.scopes
        parsed: ParsedFunction = target.parsed
        unit_name, _ = lower.unit_of(parsed)
        if unit_name in self.stack:
            raise lower.error(
                QnbTypeError,
                f"{parsed.name!r} calls itself; recursion is not supported in kernels",
                node,
            )
        if node.keywords:
            raise lower.error(
                QnbTypeError, "call @qnb.func helpers with positional arguments", node
            )
        if len(node.args) != len(parsed.param_names):
            raise lower.error(
                QnbTypeError,
                f"{parsed.name}() takes {len(parsed.param_names)} "
                f"{plural(len(parsed.param_names), 'argument', 'arguments')} "
                f"but {len(node.args)} {'was' if len(node.args) == 1 else 'were'} given",
                node,
            )

        args = lower.order.ordered(node.args)
        frame = lower.new_frame(parsed, scopes.fresh(parsed.name) + ".")
        for name, arg_node, value in zip(parsed.param_names, node.args, args):
            if (
                isinstance(value, ir.Var)
                and value.type.kind in ("tile", "vec")
                and isinstance(arg_node, ast.Name)
            ):
                # The caller's tile: in-place ops on it reach the caller (release_alias).
                frame.scope[name] = scopes.frame.scope[arg_node.id]
                frame.aliases.add(name)
            elif (
                isinstance(value, ir.Var)
                and isinstance(arg_node, ast.Name)
                and arg_node.id in scopes.frame.known
            ):
                # A local holding a compile-time number (``B = qnb.static(BM // 2)``, ``B =
                # HALF``): the func receives the number, compile-time as a literal would be.
                frame.scope[name] = Py(scopes.frame.known[arg_node.id])
            elif isinstance(value, ir.Expr):
                frame.scope[name] = None
                var_name = frame.prefix + name
                scopes.joined[var_name] = value.type
                scopes.display[var_name] = name
                lower.emit(ir.Assign(lower.loc(node), var_name, value))
                frame.scope[name] = Var(var_name, value.type, scopes.block_path)
            else:
                frame.scope[name] = value
        result = Py(None)
        scopes.frames.append(frame)
        self.stack.append(unit_name)
        try:
            saved_depth = lower.loop_depth
            lower.loop_depth = 0
            try:
                tail = self.lower_func_body(without_docstring(parsed.tree.body))
                if isinstance(tail, ast.Return) and tail.value is not None:
                    result = lower.lower_expr(tail.value)
                    if isinstance(result, ir.Expr) and reads_state(result, frame.prefix):
                        # Python takes the value when the func returns: code the caller
                        # runs next (``f(c) + g(c)``, g storing to c) must not change it.
                        result = lower.order.materialise(result, "result", tail)
            finally:
                lower.loop_depth = saved_depth
        finally:
            scopes.frames.pop()
            self.stack.pop()
        return result

    def lower_func_body(self, body) -> ast.Return | None:
        """Lower a @qnb.func's statements up to the ``return`` that ends it, and return
        that ``return`` (None: it ends without one). An ``if`` decided at compile time
        (``if qnb.static(flag):``) is pruned as it is met, so a return that ends its
        taken branch ends the func: what follows is not lowered, as Python would not
        run it. A return anywhere else (under a runtime ``if``) is refused; parse.py
        has refused the rest at decoration."""
        lower = self.lower
        for stmt in body:
            if isinstance(stmt, ast.Return):
                return stmt
            if isinstance(stmt, ast.If) and holds_return(stmt):
                cond = lower.lower_expr(stmt.test)
                if not isinstance(cond, Py):
                    inner = next(n for n in ast.walk(stmt) if isinstance(n, ast.Return))
                    raise lower.error(
                        QnbSyntaxError,
                        "a kernel or func may return early only from an `if` decided at compile "
                        "time (`if qnb.static(...)`); this `if` is decided at run time",
                        inner,
                    )
                taken = stmt.body if lower.py_truth(cond, stmt.test) else stmt.orelse
                tail = self.lower_func_body(taken)
                if tail is not None:
                    return tail
                continue
            lower.lower_stmt(stmt)
        return None


def without_docstring(body: list) -> list:
    """A function's statements without the docstring that may open them."""
    if (
        body
        and isinstance(body[0], ast.Expr)
        and isinstance(body[0].value, ast.Constant)
        and isinstance(body[0].value.value, str)
    ):
        return body[1:]
    return body


def holds_return(stmt: ast.stmt) -> bool:
    """Whether a ``return`` stands anywhere inside ``stmt``."""
    return any(isinstance(node, ast.Return) for node in ast.walk(stmt))
