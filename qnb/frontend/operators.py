"""The operators of the tile language and the helpers every typing rule shares: Python's
operators as IR ops (``BINOPS``, ``CMPOPS``) with their compile-time folds, constants and
their conversions, the binary/where/matmul/fill builders, and the argument checks.

Promotion: bool < i32 < f16, bf16 < f32 < f64 between typed operands (f16 with bf16
gives f32, which holds both). A Python literal is
*weak*: it takes the dtype of the typed operand it meets (``t * 2.0`` keeps an f16
tile f16; ``i + 1`` stays i32), except a float literal next to an integer gives f32.
``/`` is true division (integers become f32); ``//`` and ``%`` follow Python.
"""

from __future__ import annotations

import ast
import math
import operator

import numpy as np

from qnb import ir
from qnb.dtypes import DType, as_dtype, bool_, f64, i32, is_dtype_like, promote
from qnb.errors import QnbCaptureError, QnbTypeError
from qnb.frontend import typing_rules
from qnb.frontend.bindings import Py, is_number
from qnb.frontend.typing_rules import I32_MAX, I32_MIN

BINOPS = {
    ast.Add: "add",
    ast.Sub: "sub",
    ast.Mult: "mul",
    ast.Div: "div",
    ast.FloorDiv: "floordiv",
    ast.Mod: "mod",
    ast.Pow: "pow",
    ast.BitAnd: "and",
    ast.BitOr: "or",
    ast.BitXor: "xor",
    ast.LShift: "shl",
    ast.RShift: "shr",
}
CMPOPS = {ast.Lt: "lt", ast.LtE: "le", ast.Gt: "gt", ast.GtE: "ge", ast.Eq: "eq", ast.NotEq: "ne"}
_FOLD = {
    "add": operator.add,
    "sub": operator.sub,
    "mul": operator.mul,
    "div": operator.truediv,
    "floordiv": operator.floordiv,
    "mod": operator.mod,
    "pow": operator.pow,
    "and": operator.and_,
    "or": operator.or_,
    "xor": operator.xor,
    "shl": operator.lshift,
    "shr": operator.rshift,
    "lt": operator.lt,
    "le": operator.le,
    "gt": operator.gt,
    "ge": operator.ge,
    "eq": operator.eq,
    "ne": operator.ne,
    "max": max,
    "min": min,
}
_UNARY_FOLD = {
    ast.USub: operator.neg,
    ast.UAdd: operator.pos,
    ast.Not: operator.not_,
    ast.Invert: operator.invert,
}


def plain_value(value):
    """A NumPy scalar (``np.float32(0.5)``, ``np.int64(3)``, ``np.True_``) as the Python
    value it holds, also inside tuples; anything else unchanged. Captured names and
    Template values enter the kernel language through this."""
    if isinstance(value, np.bool_ | np.integer | np.floating):
        return value.item()
    if isinstance(value, tuple) and any(isinstance(v, np.generic | tuple) for v in value):
        return tuple(plain_value(v) for v in value)
    return value


def cast_constant(value, dtype: DType):
    """A Python number converted to ``dtype`` as the running kernel converts a value:
    a float rounds to the dtype's precision (past its range: ±inf); a float becomes i32
    by truncating toward zero and saturating, NaN → 0; anything → bool is ``!= 0``."""
    if dtype is bool_:
        return bool(value)
    if dtype is i32:
        if isinstance(value, float):
            if math.isnan(value):
                return 0
            return I32_MAX if value >= I32_MAX else I32_MIN if value <= I32_MIN else int(value)
        return int(value)
    if dtype is f64:
        return float(value)
    with np.errstate(over="ignore"):
        return float(dtype.numpy.type(value))


def fold_unary(op, value):
    return _UNARY_FOLD[type(op)](value)


def join_dtypes(a: DType, b: DType) -> DType:
    return promote(a, b)


def convert_value(value, dtype: DType):
    """The value of a typed constant (floats keep their spelling; backends round them)."""
    if dtype is bool_:
        return bool(value)
    if dtype is i32:
        return cast_constant(value, i32)
    return float(value)


def typed(builder, node, compute, *types):
    """``compute(*types)`` (a function of :mod:`typing_rules`), its refusal raised as the
    user's QnbTypeError at ``node``."""
    try:
        return compute(*types)
    except typing_rules.TypeRefusal as refusal:
        raise builder.error(QnbTypeError, str(refusal), node) from None


def cast_through(builder, through, *exprs) -> list:
    """``exprs`` with their elements converted through each dtype of ``through``."""
    exprs = list(exprs)
    for dtype in through:
        exprs = [builder.cast_elements(e, dtype) for e in exprs]
    return exprs


def const(builder, value, node, dtype: DType | None = None) -> ir.Const:
    """A typed constant for a Python number; ``dtype`` is the weak-typing hint."""
    try:  # (typed, inline: constants are the commonest node)
        chosen = typing_rules.constant_dtype(value, dtype)
    except typing_rules.TypeRefusal as refusal:
        raise builder.error(QnbTypeError, str(refusal), node) from None
    return ir.Const(ir.scalar(chosen), builder.loc(node), convert_value(value, chosen))


def broadcast_operands(builder, node, *operands) -> tuple[tuple[int, ...], list]:
    """NumPy's broadcast of the operands' shapes (:func:`typing_rules.broadcast`), and
    the operands with every tile/vec stretched to it by :class:`ir.Broadcast` (so
    backends see only equal shapes or scalars)."""
    try:  # (typed, inline: every elementwise op comes here)
        shape = typing_rules.broadcast(*[o.type for o in operands])
    except typing_rules.TypeRefusal as refusal:
        raise builder.error(QnbTypeError, str(refusal), node) from None
    stretched = [
        operand
        if operand.type.kind == "scalar" or operand.type.shape == shape
        else ir.Broadcast(ir.value_type(operand.type.dtype, shape), operand.loc, operand)
        for operand in operands
    ]
    return shape, stretched


def typed_pair(builder, left, right, node):
    """Both operands as IR with one common dtype (weak literals adopt the other's)."""
    if isinstance(left, Py) and not is_number(left.value):
        raise builder.error(
            QnbTypeError, f"cannot use {type(left.value).__name__} in arithmetic", node
        )
    if isinstance(right, Py) and not is_number(right.value):
        raise builder.error(
            QnbTypeError, f"cannot use {type(right.value).__name__} in arithmetic", node
        )
    if isinstance(left, Py):
        right = builder.require_value(right, node)
        left = const(
            builder, left.value, node, typing_rules.weak_dtype(left.value, right.type.dtype)
        )
    elif isinstance(right, Py):
        left = builder.require_value(left, node)
        right = const(
            builder, right.value, node, typing_rules.weak_dtype(right.value, left.type.dtype)
        )
    left = builder.require_value(left, node)
    right = builder.require_value(right, node)
    dtype = promote(left.type.dtype, right.type.dtype)
    return builder.cast_elements(left, dtype), builder.cast_elements(right, dtype), dtype


def binary(builder, op, left, right, node):
    if isinstance(left, Py) and isinstance(right, Py):
        try:
            return Py(_FOLD[op](left.value, right.value))
        except QnbCaptureError as err:  # a configuration object used as a value
            raise builder.error(QnbCaptureError, err.message, node) from None
        except Exception as exc:  # noqa: BLE001 - the user's compile-time arithmetic
            raise builder.error(
                QnbTypeError, f"cannot evaluate this at compile time: {exc}", node
            ) from None
    for side in (left, right):
        if isinstance(side, ir.ArrayView):
            raise builder.error(
                QnbTypeError,
                "arrays cannot be used in arithmetic; load a tile or index an element first",
                node,
            )
        if isinstance(side, tuple):
            raise builder.error(QnbTypeError, "tuples cannot be used in arithmetic", node)
    if op == "pow":
        return power(builder, left, right, node)
    left, right, dtype = typed_pair(builder, left, right, node)
    shape, (left, right) = broadcast_operands(builder, node, left, right)
    try:  # (typed, inline)
        through, result = typing_rules.binary_dtypes(op, dtype)
    except typing_rules.TypeRefusal as refusal:
        raise builder.error(QnbTypeError, str(refusal), node) from None
    if through:
        left, right = cast_through(builder, through, left, right)
    return ir.Binary(ir.value_type(result, shape), builder.loc(node), op, left, right)


def invert(builder, operand, node):
    """``~x``: logical not on bools (as NumPy's ``~`` on a bool array), bitwise on i32."""
    op = typed(builder, node, typing_rules.invert_op, operand.type)
    return ir.Unary(operand.type, builder.loc(node), op, operand)


def power(builder, base, exponent, node):
    """``**``: i32 ** i32 stays i32 (it wraps, as NumPy's does; a negative runtime
    exponent gives 0); a negative literal exponent on an integer gives f32, as Python
    gives a float."""
    constant = exponent.value if isinstance(exponent, Py) else None
    if isinstance(constant, int) and 0 <= constant <= 8:
        base = builder.require_value(base, node)
        if constant == 0:
            return binary(builder, "add", binary(builder, "mul", base, Py(0), node), Py(1), node)
        if base.type.dtype is bool_:
            base = builder.cast_elements(base, i32)
        result = base
        for _ in range(constant - 1):
            result = ir.Binary(base.type, builder.loc(node), "mul", result, base)
        return result
    left, right, dtype = typed_pair(builder, base, exponent, node)
    through = typing_rules.power_dtypes(dtype, constant)
    if through:
        left, right = cast_through(builder, through, left, right)
        dtype = through[-1]
    shape, (left, right) = broadcast_operands(builder, node, left, right)
    return ir.Binary(ir.value_type(dtype, shape), builder.loc(node), "pow", left, right)


def where(builder, cond, a, b, node):
    if isinstance(cond, Py):
        return a if builder.py_truth(cond, node) else b
    cond = builder.require_value(cond, node)
    if cond.type.dtype is not bool_:
        cond = (
            builder.condition(cond, node)
            if cond.type.kind == "scalar"
            else ir.Binary(
                cond.type.with_dtype(bool_),
                cond.loc,
                "ne",
                cond,
                ir.Const(ir.scalar(cond.type.dtype), cond.loc, 0),
            )
        )
    a, b, dtype = typed_pair(builder, a, b, node)
    shape, (cond, a, b) = broadcast_operands(builder, node, cond, a, b)
    return ir.Select(ir.value_type(dtype, shape), builder.loc(node), cond, a, b)


def matmul(builder, a, b, acc, node):
    a = builder.require_value(a, node)
    b = builder.require_value(b, node)
    dtype, out = typed(builder, node, typing_rules.matmul_type, a.type, b.type)
    a, b = builder.cast_elements(a, dtype), builder.cast_elements(b, dtype)
    if acc is not None:
        acc = builder.require_value(acc, node)
        typed(builder, node, typing_rules.check_accumulator, acc.type, a.type, b.type, dtype, out)
        acc = builder.cast_elements(acc, out.dtype)
    return ir.Matmul(out, builder.loc(node), a, b, acc)


def fill(builder, kind, how, value, dtype, node, shape=None) -> ir.Expr:
    """A new tile or vec of ``shape`` (default: Tile16 / Vec16): "full" of ``value``,
    "eye" or "arange"."""
    type_ = typing_rules.fill_type(kind, dtype, shape)
    if how in ("eye", "arange"):
        return ir.TileFill(type_, builder.loc(node), how, None)
    return ir.TileFill(type_, builder.loc(node), "full", fill_value(builder, value, dtype, node))


def fill_value(builder, value, dtype, node) -> ir.Expr:
    """A fill's scalar (a number or a runtime scalar) as ``dtype``."""
    if not isinstance(value, int | float):
        return builder.coerce(value, ir.scalar(dtype), node)
    # a number is converted as the running kernel would (3.9e9 → i32 saturates)
    return const(builder, cast_constant(value, dtype), node, dtype)


# ---------------------------------------------------------------------------- argument helpers


def dtype_arg(builder, value, node) -> DType:
    raw = value.value if isinstance(value, Py) else value
    if isinstance(raw, DType) or is_dtype_like(raw) or isinstance(raw, str):
        try:
            return as_dtype(raw)
        except TypeError as exc:
            raise builder.error(QnbTypeError, str(exc), node) from None
    if isinstance(raw, ir.ArrayView):
        got = "an array"
    elif isinstance(raw, ir.Expr):
        got = f"a {raw.type} value"
    else:
        got = repr(raw)
    raise builder.error(QnbTypeError, f"expected a dtype such as qnb.f32, got {got}", node)


def int_arg(builder, value, node, what) -> int:
    if isinstance(value, Py) and isinstance(value.value, int) and not isinstance(value.value, bool):
        return value.value
    raise builder.error(QnbTypeError, f"{what} must be a constant integer", node)


def array_arg(builder, value, node, what="the first argument") -> ir.ArrayView:
    if not isinstance(value, ir.ArrayView):
        raise builder.error(QnbTypeError, f"{what} must be an array parameter", node)
    return value


def fold_or(builder, node, args, fn):
    if all(isinstance(a, Py) for a in args):
        try:
            return Py(fn(*[a.value for a in args]))
        except QnbCaptureError as err:  # a configuration object used as a value
            raise builder.error(QnbCaptureError, err.message, node) from None
        except Exception as exc:  # noqa: BLE001
            raise builder.error(
                QnbTypeError, f"cannot evaluate this at compile time: {exc}", node
            ) from None
    return None


def is_none(value) -> bool:
    return isinstance(value, Py) and value.value is None


def plus(index: ir.Expr, count: int, loc) -> ir.Expr:
    """``index + count`` (i32), the stop of a padded window of ``count`` elements."""
    return ir.Binary(ir.scalar(i32), loc, "add", index, ir.Const(ir.scalar(i32), loc, count))
