"""What the lowering walk hands around besides IR and compile-time values (``Py``): a
method before its call (``_Method``), an expression already lowered (``_Known``), and how
error messages name values and expressions."""

from __future__ import annotations

import ast
import types
from dataclasses import dataclass

from qnb import ir
from qnb.dtypes import DType, is_dtype_like
from qnb.frontend.constants import EnumClass, EnumMember
from qnb.frontend.semantics import Py


@dataclass
class _Method:
    """``receiver.name`` before it is called (``t.load_``, ``arr.shape``…)."""

    name: str
    receiver: object
    node: ast.AST


class _Known(ast.expr):
    """An expression already lowered, standing in for its AST (evaluated once)."""

    _fields = ()

    def __init__(self, value, like: ast.AST):
        super().__init__()
        self.value = value
        self.source = getattr(like, "source", like)  # the user's expression (for messages)
        ast.copy_location(self, like)


def plural(count: int, one: str, many: str) -> str:
    return one if count == 1 else many


def py_name(value) -> str:
    """How a message names a compile-time value."""
    if isinstance(value, types.ModuleType):
        return f"module {value.__name__!r}"
    if isinstance(value, DType) or is_dtype_like(value):
        return f"the dtype {getattr(value, '__name__', value)}"
    if getattr(value, "_qnb_annotation", False):
        return repr(value)  # qnb.Template, qnb.Array[...]
    if isinstance(value, EnumMember):
        return repr(value)
    if isinstance(value, EnumClass):
        return f"the enum {value.__qualname__}"
    if hasattr(type(value), "_qnb_refuse"):  # a configuration object (reads.ObjectRef)
        return f"the configuration object {value._qnb_label!r}"
    name = getattr(value, "__qualname__", None) or getattr(value, "__name__", None)
    if name and isinstance(value, type):
        return name
    if name and callable(value):
        return f"{name}()"
    return f"a {type(value).__name__}"


def value_name(value) -> str:
    """How a message names a value that is not a number (an array, a tuple, a dtype…)."""
    if isinstance(value, ir.ArrayView):
        return "an array"
    if isinstance(value, tuple):
        return "a tuple"
    return py_name(value.value if isinstance(value, Py) else value)


def unparse(node) -> str:
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


def method_misuse(method: _Method) -> str:
    spelled = ast.unparse(method.node)
    if method.name == "shape":
        return f"{spelled} must be indexed: {spelled}[d]"
    return f"{spelled} is a method; call it: {spelled}(...)"


OPERATOR_SPELLING = {
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
COMPARISON_SPELLING = {ast.In: "in", ast.NotIn: "not in", ast.Is: "is", ast.IsNot: "is not"}
