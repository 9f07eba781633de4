"""Compile-time values in the walk: ``qnb.static(...)`` (Python run at compile time),
attribute reads of compile-time values (through the ``Recorder``, so they enter the key),
``Tile[M, N]`` with compile-time sizes, indexing a constant, and their truth."""

from __future__ import annotations

import ast
import builtins
import copy

from qnb import ir
from qnb.errors import QnbCaptureError, QnbError, QnbTypeError
from qnb.frontend import operators
from qnb.frontend.bindings import Py
from qnb.frontend.values import py_name


class CompileTime:
    def __init__(self, lower):
        self.lower = lower  # the walker

    def is_static_call(self, node) -> bool:
        return isinstance(node, ast.Call) and is_static(self.py_callee(node.func))

    def py_callee(self, func_node) -> Py | None:
        """The compile-time value a call's callee names (``range``, ``qnb.static``), if any.
        Only names and attribute chains are looked at: nothing is emitted."""
        root = func_node
        while isinstance(root, ast.Attribute):
            root = root.value
        if not isinstance(root, ast.Name):
            return None
        try:
            value = self.lower.lower_expr(func_node)
        except QnbError:
            return None
        return value if isinstance(value, Py) else None

    def callee_is(self, func_node, expected) -> bool:
        callee = self.py_callee(func_node)
        return callee is not None and callee.value is expected

    def py_truth(self, value: Py, node) -> bool:
        try:
            return bool(value.value)
        except QnbCaptureError as err:  # a configuration object has no truth of its own
            raise err.with_location(*self.lower.scopes.frame.parsed.position(node)) from None
        except Exception:  # noqa: BLE001
            raise self.lower.error(
                QnbTypeError, "this compile-time value has no truth value", node
            ) from None

    def static_value(self, node) -> Py:
        lower = self.lower
        if len(node.args) != 1 or node.keywords:
            raise lower.error(QnbTypeError, "qnb.static takes exactly one expression", node)
        frame = lower.scopes.frame
        expression = ast.Expression(node.args[0])
        ast.fix_missing_locations(expression)
        namespace = lower.scopes.static_namespace(node.args[0])
        runtime = [
            n.id
            for n in ast.walk(node.args[0])
            if isinstance(n, ast.Name) and n.id in frame.scope and n.id not in namespace
        ]
        if runtime:
            raise lower.error(
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
            raise lower.error(QnbTypeError, message, node) from None
        except Exception as exc:  # noqa: BLE001 - the user's own compile-time expression
            raise lower.error(
                QnbTypeError, f"qnb.static(...) failed: {type(exc).__name__}: {exc}", node
            ) from None
        return Py(operators.plain_value(value))

    def read_attribute(self, node):
        """``getattr`` for a ``qnb.static`` expression: the recorder's, with Python's own
        errors (a read qnb cannot key raises QnbCaptureError at the expression)."""
        reads = self.lower.reads

        def read(value, name):
            return reads.attr(value, name)

        return read

    def attribute(self, value, attr: str, node) -> Py:
        """``value.attr`` of a compile-time value (a module, a configuration object, an
        enum, a constant, a qnb intrinsic), read through the recorder, which keys it."""
        lower = self.lower
        if attr == "eye" and getattr(value, "_qnb_kind", None) == "tile":
            m, n = value._qnb_shape
            if m != n:
                raise lower.error(
                    QnbTypeError,
                    f"eye is the identity of a square tile type; {value._qnb_intrinsic} is {m}×{n}",
                    node,
                )
        try:
            return Py(operators.plain_value(lower.reads.attr(value, attr)))
        except QnbCaptureError as err:
            raise err.with_location(*lower.scopes.frame.parsed.position(node)) from None
        except AttributeError:
            raise lower.error(
                QnbTypeError, f"{py_name(value)} has no attribute {attr!r}", node
            ) from None

    def index(self, base: Py, node) -> Py:
        """``c[k]`` on a compile-time value: ``k`` must be one too."""
        lower = self.lower
        try:
            key = lower.lower_expr(node.slice)
            if isinstance(key, Py):
                return Py(base.value[key.value])
        except QnbError:
            raise
        except Exception as exc:  # noqa: BLE001 - indexing the user's own constant
            raise lower.error(QnbTypeError, f"cannot index this constant: {exc}", node) from None
        raise lower.error(QnbTypeError, "a constant can only be indexed by a constant", node)

    def shaped_type(self, family, node):
        """``Tile[M, N]`` / ``Vec[N]`` in a kernel: the sizes are compile-time values."""
        lower = self.lower
        known = lower.scopes.frame.known
        key = lower.lower_expr(node.slice)
        parts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        if isinstance(key, tuple):  # a size bound to a compile-time number (n = 32)
            key = tuple(
                Py(known[p.id])
                if isinstance(item, ir.Var) and isinstance(p, ast.Name) and p.id in known
                else item
                for item, p in zip(key, parts)
            )
            if all(isinstance(item, Py) for item in key):
                key = Py(tuple(item.value for item in key))
        elif (
            isinstance(key, ir.Var) and isinstance(node.slice, ast.Name) and node.slice.id in known
        ):
            key = Py(known[node.slice.id])
        if not isinstance(key, Py):
            raise lower.error(
                QnbTypeError,
                f"{family!r}[...] takes compile-time sizes (literals, captured constants, "
                "qnb.Template parameters or static loop values), not runtime values",
                node,
            )
        try:
            return Py(family.lookup(operators.plain_value(key.value)))
        except ValueError as exc:
            raise lower.error(QnbTypeError, str(exc), node) from None


def is_static(callee) -> bool:
    return isinstance(callee, Py) and getattr(callee.value, "_qnb_intrinsic", None) == "static"


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
