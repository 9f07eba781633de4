"""Typing rules of the tile language: what each operator, intrinsic and method accepts
and what it returns.

Promotion: bool < i32 < f16, bf16 < f32 < f64 between typed operands (f16 with bf16
gives f32, which holds both). A Python literal is
*weak*: it takes the dtype of the typed operand it meets (``t * 2.0`` keeps an f16
tile f16; ``i + 1`` stays i32), except a float literal next to an integer gives f32.
``/`` is true division (integers become f32); ``//`` and ``%`` follow Python.
"""

from __future__ import annotations

import ast
import contextlib
import math
import operator

import numpy as np

from qnb import ir, language
from qnb.dtypes import DType, as_dtype, bf16, bool_, f16, f32, f64, i32, is_dtype_like, promote
from qnb.errors import QnbTypeError


class Py:
    """A compile-time Python value (a captured constant, a Template value, a literal…)."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value

    def __repr__(self):
        return f"Py({self.value!r})"


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
I32_MIN, I32_MAX = -(2**31), 2**31 - 1


def is_number(value) -> bool:
    return isinstance(value, bool | int | float) and not isinstance(value, complex)


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


def const(lower, value, node, dtype: DType | None = None) -> ir.Const:
    """A typed constant for a Python number; ``dtype`` is the weak-typing hint."""
    if isinstance(value, bool):
        chosen = dtype if dtype is not None else bool_
    elif isinstance(value, int):
        chosen = dtype if dtype is not None and dtype is not bool_ else i32
        if chosen is i32 and not I32_MIN <= value <= I32_MAX:
            raise lower.error(QnbTypeError, f"the integer {value} does not fit in i32", node)
    else:
        chosen = dtype if dtype is not None and dtype.is_float else f32
    return ir.Const(ir.scalar(chosen), lower.loc(node), convert_value(value, chosen))


def broadcast_operands(lower, node, *operands) -> tuple[tuple[int, ...], list]:
    """NumPy's broadcast of the operands' shapes (a vec is a 1-D array, a scalar has no
    shape), and the operands with every tile/vec stretched to it by :class:`ir.Broadcast`
    (so backends see only equal shapes or scalars). Shapes that do not broadcast raise
    QnbTypeError naming both."""
    shape: tuple[int, ...] = ()
    first = None
    for operand in operands:
        if operand.type.kind == "scalar":
            continue
        joined = ir.broadcast_shape(shape, operand.type.shape)
        if joined is None:
            raise lower.error(
                QnbTypeError,
                f"a {first.type.shape_name} and a {operand.type.shape_name} do not broadcast "
                f"together (shapes {first.type.shape} and {operand.type.shape}, by NumPy's "
                "rules: v[:, None] is a column, v[None, :] a row, a side of 1 stretches)",
                node,
            )
        shape = joined
        first = operand if first is None else first
    stretched = [
        operand
        if operand.type.kind == "scalar" or operand.type.shape == shape
        else ir.Broadcast(ir.value_type(operand.type.dtype, shape), operand.loc, operand)
        for operand in operands
    ]
    return shape, stretched


def _weak_dtype(py_value, other: DType) -> DType:
    if isinstance(py_value, float) and not other.is_float:
        return f32
    if isinstance(py_value, bool) and other is bool_:
        return bool_
    if other is bool_:
        return f32 if isinstance(py_value, float) else i32
    return other


def _typed_pair(lower, left, right, node):
    """Both operands as IR with one common dtype (weak literals adopt the other's)."""
    if isinstance(left, Py) and not is_number(left.value):
        raise lower.error(
            QnbTypeError, f"cannot use {type(left.value).__name__} in arithmetic", node
        )
    if isinstance(right, Py) and not is_number(right.value):
        raise lower.error(
            QnbTypeError, f"cannot use {type(right.value).__name__} in arithmetic", node
        )
    if isinstance(left, Py):
        right = lower.require_value(right, node)
        left = const(lower, left.value, node, _weak_dtype(left.value, right.type.dtype))
    elif isinstance(right, Py):
        left = lower.require_value(left, node)
        right = const(lower, right.value, node, _weak_dtype(right.value, left.type.dtype))
    left = lower.require_value(left, node)
    right = lower.require_value(right, node)
    dtype = promote(left.type.dtype, right.type.dtype)
    return lower.cast_elements(left, dtype), lower.cast_elements(right, dtype), dtype


def binary(lower, op, left, right, node):
    if isinstance(left, Py) and isinstance(right, Py):
        try:
            return Py(_FOLD[op](left.value, right.value))
        except Exception as exc:  # noqa: BLE001 - the user's compile-time arithmetic
            raise lower.error(
                QnbTypeError, f"cannot evaluate this at compile time: {exc}", node
            ) from None
    for side in (left, right):
        if isinstance(side, ir.ArrayView):
            raise lower.error(
                QnbTypeError,
                "arrays cannot be used in arithmetic; load a tile or index an element first",
                node,
            )
        if isinstance(side, tuple):
            raise lower.error(QnbTypeError, "tuples cannot be used in arithmetic", node)
    if op == "pow":
        return _power(lower, left, right, node)
    left, right, dtype = _typed_pair(lower, left, right, node)
    shape, (left, right) = broadcast_operands(lower, node, left, right)
    loc = lower.loc(node)
    if op in ("lt", "le", "gt", "ge", "eq", "ne"):
        if dtype is bool_ and op not in ("eq", "ne"):
            left, right = lower.cast_elements(left, i32), lower.cast_elements(right, i32)
        return ir.Binary(ir.value_type(bool_, shape), loc, op, left, right)
    if op in ("and", "or", "xor", "shl", "shr"):
        return _bitwise(lower, op, left, right, dtype, shape, node)
    if dtype is bool_:
        left, right, dtype = lower.cast_elements(left, i32), lower.cast_elements(right, i32), i32
    if op == "div" and not dtype.is_float:
        left, right, dtype = lower.cast_elements(left, f32), lower.cast_elements(right, f32), f32
    return ir.Binary(ir.value_type(dtype, shape), loc, op, left, right)


_BITWISE_SPELLING = {"and": "&", "or": "|", "xor": "^", "shl": "<<", "shr": ">>"}


def _bitwise(lower, op, left, right, dtype, shape, node):
    """``& | ^`` on bool or i32 operands, ``<< >>`` on i32 (bools count as i32, as in
    arithmetic); floats are refused, as NumPy refuses them."""
    spelled = _BITWISE_SPELLING[op]
    if dtype.is_float:
        operands = "i32 or bool" if op in ("and", "or", "xor") else "i32"
        raise lower.error(
            QnbTypeError,
            f"the operator {spelled} needs {operands} operands, not {dtype} "
            f"(convert with .astype(qnb.i32) or qnb.i32(x) first)",
            node,
        )
    if dtype is bool_ and op in ("shl", "shr"):
        left, right, dtype = lower.cast_elements(left, i32), lower.cast_elements(right, i32), i32
    return ir.Binary(ir.value_type(dtype, shape), lower.loc(node), op, left, right)


def invert(lower, operand, node):
    """``~x``: logical not on bools (as NumPy's ``~`` on a bool array), bitwise on i32."""
    if operand.type.dtype is bool_:
        return ir.Unary(operand.type, lower.loc(node), "not", operand)
    if operand.type.dtype is not i32:
        raise lower.error(
            QnbTypeError, f"~ needs an i32 or bool operand, not {operand.type.dtype}", node
        )
    return ir.Unary(operand.type, lower.loc(node), "invert", operand)


def _power(lower, base, exponent, node):
    """``**``: i32 ** i32 stays i32 (it wraps, as NumPy's does; a negative runtime
    exponent gives 0); a negative literal exponent on an integer gives f32, as Python
    gives a float."""
    constant = exponent.value if isinstance(exponent, Py) else None
    if isinstance(constant, int) and 0 <= constant <= 8:
        base = lower.require_value(base, node)
        if constant == 0:
            return binary(lower, "add", binary(lower, "mul", base, Py(0), node), Py(1), node)
        if base.type.dtype is bool_:
            base = lower.cast_elements(base, i32)
        result = base
        for _ in range(constant - 1):
            result = ir.Binary(base.type, lower.loc(node), "mul", result, base)
        return result
    left, right, dtype = _typed_pair(lower, base, exponent, node)
    if dtype is bool_:
        left, right, dtype = lower.cast_elements(left, i32), lower.cast_elements(right, i32), i32
    if not dtype.is_float and isinstance(constant, int) and constant < 0:
        left, right, dtype = lower.cast_elements(left, f32), lower.cast_elements(right, f32), f32
    shape, (left, right) = broadcast_operands(lower, node, left, right)
    return ir.Binary(ir.value_type(dtype, shape), lower.loc(node), "pow", left, right)


def where(lower, cond, a, b, node):
    if isinstance(cond, Py):
        return a if lower.py_truth(cond, node) else b
    cond = lower.require_value(cond, node)
    if cond.type.dtype is not bool_:
        cond = (
            lower.condition(cond, node)
            if cond.type.kind == "scalar"
            else ir.Binary(
                cond.type.with_dtype(bool_),
                cond.loc,
                "ne",
                cond,
                ir.Const(ir.scalar(cond.type.dtype), cond.loc, 0),
            )
        )
    a, b, dtype = _typed_pair(lower, a, b, node)
    shape, (cond, a, b) = broadcast_operands(lower, node, cond, a, b)
    return ir.Select(ir.value_type(dtype, shape), lower.loc(node), cond, a, b)


def matmul(lower, a, b, acc, node):
    a = lower.require_value(a, node)
    b = lower.require_value(b, node)
    if a.type.kind != "tile" or b.type.kind != "tile":
        raise lower.error(
            QnbTypeError,
            f"@ multiplies two tiles (Tile[M, K] @ Tile[K, N]), got {a.type} @ {b.type}",
            node,
        )
    (m, k), (k2, n) = a.type.shape, b.type.shape
    if k != k2:
        raise lower.error(
            QnbTypeError,
            f"@ needs Tile[M, K] @ Tile[K, N]: a {a.type.shape_name} @ a {b.type.shape_name} has "
            f"{k} columns on the left and {k2} rows on the right",
            node,
        )
    dtype = promote(a.type.dtype, b.type.dtype)
    if dtype is bool_:
        raise lower.error(QnbTypeError, "@ is not defined for bool tiles", node)
    a, b = lower.cast_elements(a, dtype), lower.cast_elements(b, dtype)
    out = f32 if dtype in (f16, bf16) else dtype
    if acc is not None:
        acc = lower.require_value(acc, node)
        if acc.type.kind != "tile" or acc.type.shape != (m, n):
            raise lower.error(
                QnbTypeError,
                f"the accumulator of mma({a.type.shape_name}, {b.type.shape_name}) must be a "
                f"{ir.tile(out, (m, n)).shape_name}, got {acc.type}",
                node,
            )
        if acc.type.dtype is not out:
            if promote(acc.type.dtype, out) is not out:
                raise lower.error(
                    QnbTypeError,
                    f"mma of {dtype} tiles accumulates in {out}; the "
                    f"accumulator is {acc.type.dtype}",
                    node,
                )
            acc = lower.cast_elements(acc, out)
    return ir.Matmul(ir.tile(out, (m, n)), lower.loc(node), a, b, acc)


def fill(lower, kind, how, value, dtype, node, shape=None) -> ir.Expr:
    """A new tile or vec of ``shape`` (default: Tile16 / Vec16): "full" of ``value``,
    "eye" or "arange"."""
    if shape is None:
        shape = (ir.TILE, ir.TILE) if kind == "tile" else (ir.TILE,)
    type_ = ir.tile(dtype, shape) if kind == "tile" else ir.vec(dtype, shape[0])
    if how in ("eye", "arange"):
        return ir.TileFill(type_, lower.loc(node), how, None)
    return ir.TileFill(type_, lower.loc(node), "full", fill_value(lower, value, dtype, node))


def fill_value(lower, value, dtype, node) -> ir.Expr:
    """A fill's scalar (a number or a runtime scalar) as ``dtype``."""
    if not isinstance(value, int | float):
        return lower.coerce(value, ir.scalar(dtype), node)
    # a number is converted as the running kernel would (3.9e9 → i32 saturates)
    return const(lower, cast_constant(value, dtype), node, dtype)


# ---------------------------------------------------------------------------- argument helpers


def _args(lower, node, name, args, kwargs, names, defaults=None):
    """Bind positional and keyword arguments to ``names`` (Python-like arity errors)."""
    defaults = defaults or {}
    if len(args) > len(names):
        raise lower.error(
            QnbTypeError, f"{name}() takes at most {len(names)} arguments ({len(args)} given)", node
        )
    bound = dict(zip(names, args))
    for key, value in kwargs.items():
        if key not in names:
            raise lower.error(
                QnbTypeError, f"{name}() got an unexpected keyword argument {key!r}", node
            )
        if key in bound:
            raise lower.error(QnbTypeError, f"{name}() got multiple values for {key!r}", node)
        bound[key] = value
    for key in names:
        if key not in bound:
            if key not in defaults:
                raise lower.error(QnbTypeError, f"{name}() is missing the argument {key!r}", node)
            bound[key] = defaults[key]
    return [bound[n] for n in names]


def _dtype_arg(lower, value, node) -> DType:
    raw = value.value if isinstance(value, Py) else value
    if isinstance(raw, DType) or is_dtype_like(raw) or isinstance(raw, str):
        try:
            return as_dtype(raw)
        except TypeError as exc:
            raise lower.error(QnbTypeError, str(exc), node) from None
    if isinstance(raw, ir.ArrayView):
        got = "an array"
    elif isinstance(raw, ir.Expr):
        got = f"a {raw.type} value"
    else:
        got = repr(raw)
    raise lower.error(QnbTypeError, f"expected a dtype such as qnb.f32, got {got}", node)


def _int_arg(lower, value, node, what) -> int:
    if isinstance(value, Py) and isinstance(value.value, int) and not isinstance(value.value, bool):
        return value.value
    raise lower.error(QnbTypeError, f"{what} must be a constant integer", node)


def _array_arg(lower, value, node, what="the first argument") -> ir.ArrayView:
    if not isinstance(value, ir.ArrayView):
        raise lower.error(QnbTypeError, f"{what} must be an array parameter", node)
    return value


def _float_operand(lower, value, node, name):
    expr = lower.require_value(value, node)
    if expr.type.dtype is bool_:
        raise lower.error(QnbTypeError, f"{name} is not defined for bool values", node)
    if not expr.type.dtype.is_float:
        expr = lower.cast_elements(expr, f32)
    return expr


def _fold_or(lower, node, args, fn):
    if all(isinstance(a, Py) for a in args):
        try:
            return Py(fn(*[a.value for a in args]))
        except Exception as exc:  # noqa: BLE001
            raise lower.error(
                QnbTypeError, f"cannot evaluate this at compile time: {exc}", node
            ) from None
    return None


# ---------------------------------------------------------------------------- intrinsics


def _program(which):
    def handler(lower, node, target, args, kwargs):
        (axis,) = _args(
            lower,
            node,
            f"qnb.{'program_id' if which == 'id' else 'num_programs'}",
            args,
            kwargs,
            ["axis"],
            {"axis": Py(0)},
        )
        axis = _int_arg(lower, axis, node, "axis")
        if axis not in (0, 1, 2):
            raise lower.error(QnbTypeError, f"axis must be 0, 1 or 2, got {axis}", node)
        return ir.ProgramId(ir.scalar(i32), lower.loc(node), which, axis)

    return handler


# Compile-time values fold through NumPy's f64 ufuncs, so a folded value is what the same
# function gives on an f64 tile (``qnb.exp2(3)`` is 8.0, ``qnb.floor(2.5)`` 2.0).
def _numpy_fold(ufunc):
    def fold(x):
        if not is_number(x):
            raise TypeError(f"{ufunc.__name__} needs a number, got {x!r}")
        return float(ufunc(np.float64(x)))

    return fold


_MATH_FOLD = {
    "exp": math.exp,
    "log": math.log,
    "sqrt": math.sqrt,
    "abs": abs,
    **{op: _numpy_fold(getattr(np, op)) for op in ("exp2", "log2", "sin", "cos", "tanh")},
    **{op: _numpy_fold(getattr(np, op)) for op in ("floor", "ceil")},
}


def _math(op):
    def handler(lower, node, target, args, kwargs):
        (x,) = _args(lower, node, op, args, kwargs, ["x"])
        folded = _fold_or(lower, node, [x], _MATH_FOLD[op])
        if folded is not None:
            return folded
        if op == "abs":
            expr = lower.require_value(x, node)
            if expr.type.dtype is bool_:
                raise lower.error(QnbTypeError, "abs is not defined for bool values", node)
            return ir.Unary(expr.type, lower.loc(node), "abs", expr)
        expr = _float_operand(lower, x, node, op)
        return ir.Unary(expr.type, lower.loc(node), op, expr)

    return handler


def _minmax(op):
    def handler(lower, node, target, args, kwargs):
        a, b = _args(lower, node, op, args, kwargs, ["a", "b"])
        folded = _fold_or(lower, node, [a, b], max if op == "max" else min)
        if folded is not None:
            return folded
        return binary(lower, op, a, b, node)

    return handler


def _builtin_minmax(op):
    def handler(lower, node, target, args, kwargs):
        if kwargs or len(args) < 2:
            raise lower.error(QnbTypeError, f"{op}() in a kernel takes two or more values", node)
        result = args[0]
        for other in args[1:]:
            result = _minmax(op)(lower, node, target, [result, other], {})
        return result

    return handler


def _where(lower, node, target, args, kwargs):
    cond, a, b = _args(lower, node, "qnb.where", args, kwargs, ["mask", "a", "b"])
    return where(lower, cond, a, b, node)


def _mma(lower, node, target, args, kwargs):
    a, b, acc = _args(lower, node, "qnb.mma", args, kwargs, ["a", "b", "acc"])
    return matmul(lower, a, b, acc, node)


def _outer(lower, node, target, args, kwargs):
    u, v = _args(lower, node, "qnb.outer", args, kwargs, ["u", "v"])
    u, v = lower.require_value(u, node), lower.require_value(v, node)
    if u.type.kind != "vec" or v.type.kind != "vec":
        raise lower.error(
            QnbTypeError, f"qnb.outer takes two vecs, got {u.type} and {v.type}", node
        )
    shape = (u.type.shape[0], v.type.shape[0])
    if shape[0] * shape[1] > ir.MAX_TILE_ELEMENTS:
        raise lower.error(
            QnbTypeError,
            f"qnb.outer of a {u.type.shape_name} and a {v.type.shape_name} would be a "
            f"Tile[{shape[0]}, {shape[1]}], more than a tile's {ir.MAX_TILE_ELEMENTS} elements",
            node,
        )
    dtype = promote(u.type.dtype, v.type.dtype)
    if dtype is bool_:
        dtype = i32
    u, v = lower.cast_elements(u, dtype), lower.cast_elements(v, dtype)
    return ir.Outer(ir.tile(dtype, shape), lower.loc(node), u, v)


def _shape_of(target, kind) -> tuple[int, ...]:
    """The shape of the tile/vec class a constructor belongs to (``Tile[8, 32].zeros``)."""
    return getattr(target, "_qnb_shape", None) or (
        (ir.TILE, ir.TILE) if kind == "tile" else (ir.TILE,)
    )


def _type_name(kind, shape) -> str:
    return (ir.tile(f32, shape) if kind == "tile" else ir.vec(f32, shape[0])).shape_name


def _constructor(kind, how):
    def handler(lower, node, target, args, kwargs):
        shape = _shape_of(target, kind)
        name = f"{_type_name(kind, shape)}.{how}"
        if how == "full":
            value, dtype = _args(
                lower, node, name, args, kwargs, ["value", "dtype"], {"dtype": Py(f32)}
            )
        else:
            (dtype,) = _args(lower, node, name, args, kwargs, ["dtype"], {"dtype": Py(f32)})
            value = Py({"zeros": 0, "ones": 1}.get(how, 0))
        dtype = _dtype_arg(lower, dtype, node)
        if how == "eye":
            if shape[0] != shape[1]:
                raise lower.error(
                    QnbTypeError,
                    f"eye is the identity of a square tile type, not {name[:-4]}",
                    node,
                )
            return fill(lower, kind, "eye", None, dtype, node, shape)
        if isinstance(value, Py):
            if not is_number(value.value):
                raise lower.error(QnbTypeError, f"{name} needs a number, got {value.value!r}", node)
            return fill(lower, kind, "full", value.value, dtype, node, shape)
        return fill(lower, kind, "full", value, dtype, node, shape)

    return handler


def _tile_class(lower, node, target, args, kwargs):
    return _constructor("tile", "zeros")(lower, node, target, args, kwargs)


def _arange(lower, node, target, args, kwargs):
    n, dtype = _args(lower, node, "qnb.arange", args, kwargs, ["n", "dtype"], {"dtype": Py(i32)})
    if not isinstance(n, Py) or not isinstance(n.value, int) or isinstance(n.value, bool):
        raise lower.error(
            QnbTypeError,
            "qnb.arange(n) needs a compile-time n (a literal, a captured constant, a "
            "qnb.Template parameter or a static loop value)",
            node,
        )
    problem = language.vec_shape_problem(n.value)
    if problem is not None:
        raise lower.error(QnbTypeError, f"qnb.arange({n.value}) would be a {problem}", node)
    dtype = i32 if _is_none(dtype) else _dtype_arg(lower, dtype, node)
    return fill(lower, "vec", "arange", None, dtype, node, (n.value,))


def _keyword_only(lower, node, name, args, positional, keywords):
    """Refuse ``keywords`` (``other``, ``dtype``) passed by position, as Python would."""
    if len(args) > positional:
        raise lower.error(
            QnbTypeError,
            f"{name}() takes {positional} positional arguments ({len(args)} given); "
            f"{' and '.join(keywords)} are keyword arguments ({keywords[0]}=...)",
            node,
        )


def _other_arg(lower, other, dtype, node, name):
    """``other=``: the value of the elements a load finds outside its array, a number
    (NaN and ±inf included) or a runtime scalar, as ``dtype``."""
    raw = other.value if isinstance(other, Py) else other
    if isinstance(raw, Py | ir.ArrayView) or (
        isinstance(raw, ir.Expr) and raw.type.kind != "scalar"
    ):
        raise lower.error(QnbTypeError, f"{name}(other=...) takes a scalar", node)
    if not isinstance(raw, ir.Expr) and (not is_number(raw) or isinstance(raw, complex)):
        raise lower.error(QnbTypeError, f"{name}(other=...) takes a number, got {raw!r}", node)
    if isinstance(raw, bool):
        raw = int(raw)
    return fill_value(lower, raw, dtype, node)


def _tile_load(lower, node, target, args, kwargs):
    shape = _shape_of(target, "tile")
    name = f"{_type_name('tile', shape)}.load"
    _keyword_only(lower, node, name, args, 3, ["other", "dtype"])
    arr, row, col, other, dtype = _args(
        lower,
        node,
        name,
        args,
        kwargs,
        ["arr", "row", "col", "other", "dtype"],
        {"other": Py(0), "dtype": Py(None)},
    )
    view = _array_arg(lower, arr, node)
    if view.view_ndim != 2:
        raise lower.error(
            QnbTypeError,
            f"{name} needs a 2-D array (or a slab of a 3-D one), got a {view.view_ndim}-D array",
            node,
        )
    dtype = view.type.dtype if _is_none(dtype) else _dtype_arg(lower, dtype, node)
    row = lower.to_index(row, node, "row")
    col = lower.to_index(col, node, "col")
    loc = lower.loc(node)
    r1 = _plus(row, shape[0], loc)
    c1 = _plus(col, shape[1], loc)
    # elements outside the array are ``other``; those read convert to ``dtype`` (as astype)
    base = fill(
        lower, "tile", "full", _other_arg(lower, other, dtype, node, name), dtype, node, shape
    )
    return ir.LoadWindow(base.type, loc, base, view, row, r1, col, c1, padded=True)


def _plus(index: ir.Expr, count: int, loc) -> ir.Expr:
    """``index + count`` (i32), the stop of a padded window of ``count`` elements."""
    return ir.Binary(ir.scalar(i32), loc, "add", index, ir.Const(ir.scalar(i32), loc, count))


def _is_none(value) -> bool:
    return isinstance(value, Py) and value.value is None


def _vec_load(lower, node, target, args, kwargs):
    (n,) = _shape_of(target, "vec")
    name = f"{_type_name('vec', (n,))}.load"
    if set(kwargs) - {"other"}:
        raise lower.error(
            QnbTypeError,
            f"{name}() got an unexpected keyword argument {sorted(set(kwargs) - {'other'})[0]!r}",
            node,
        )
    if not args:
        raise lower.error(QnbTypeError, f"{name} needs an array", node)
    view = _array_arg(lower, args[0], node)
    loc = lower.loc(node)
    vec_type = ir.vec(view.type.dtype, n)
    if view.view_ndim == 1 and len(args) == 2:
        # Vec[N].load(arr, start, *, other=0): start may be negative
        start = lower.to_index(args[1], node, "start")
        other = _other_arg(lower, kwargs.get("other", Py(0)), view.type.dtype, node, name)
        return ir.VecLoad(vec_type, loc, view, start, _plus(start, n, loc), None, other, True)
    if kwargs:
        raise lower.error(
            QnbTypeError, f"other= is for {name}(arr, start, other=...) on a 1-D array", node
        )
    if view.view_ndim == 1:
        if len(args) != 3:
            raise lower.error(QnbTypeError, f"{name}(arr, start) on a 1-D array", node)
        start = lower.to_index(args[1], node, "start")
        stop = lower.to_index(args[2], node, "stop")
        return ir.VecLoad(vec_type, loc, view, start, stop, None)
    if view.view_ndim != 2 or len(args) != 4:
        raise lower.error(
            QnbTypeError,
            f"{name}(arr, r0, r1, col) on a 2-D array, or {name}(arr, start) on a 1-D array",
            node,
        )
    r0, r1, col = (lower.to_index(a, node) for a in args[1:])
    return ir.VecLoad(vec_type, loc, view, r0, r1, col)


def _vec_load_line(axis):
    """``Vec[N].load_col(arr, row, col, *, other=0)`` (axis 0, ``v[i] = arr[row + i, col]``)
    and ``load_row`` (axis 1, ``v[j] = arr[row, col + j]``): padded vec loads."""

    def handler(lower, node, target, args, kwargs):
        (n,) = _shape_of(target, "vec")
        name = f"{_type_name('vec', (n,))}.{'load_col' if axis == 0 else 'load_row'}"
        _keyword_only(lower, node, name, args, 3, ["other"])
        arr, row, col, other = _args(
            lower, node, name, args, kwargs, ["arr", "row", "col", "other"], {"other": Py(0)}
        )
        view = _array_arg(lower, arr, node)
        if view.view_ndim != 2:
            raise lower.error(
                QnbTypeError,
                f"{name} needs a 2-D array (or a slab of a 3-D one), got a {view.view_ndim}-D array",
                node,
            )
        row, col = lower.to_index(row, node, "row"), lower.to_index(col, node, "col")
        loc = lower.loc(node)
        other = _other_arg(lower, other, view.type.dtype, node, name)
        start, fixed = (row, col) if axis == 0 else (col, row)
        return ir.VecLoad(
            ir.vec(view.type.dtype, n),
            loc,
            view,
            start,
            _plus(start, n, loc),
            fixed,
            other,
            True,
            axis,
        )

    return handler


def _builtin_cast(dtype):
    def handler(lower, node, target, args, kwargs):
        if kwargs or len(args) != 1:
            raise lower.error(QnbTypeError, "a conversion takes one value", node)
        (value,) = args
        if isinstance(value, Py):
            raw = value.value
            if isinstance(raw, str) and dtype.is_float:
                with contextlib.suppress(ValueError):
                    raw = float(raw)  # float("inf"), float("-inf"), float("nan")
            if not is_number(raw):
                raise lower.error(QnbTypeError, f"cannot convert {raw!r} to {dtype}", node)
            try:
                return Py(cast_constant(raw, dtype))  # exactly what the runtime cast gives
            except OverflowError as exc:
                raise lower.error(QnbTypeError, f"cannot convert {raw!r}: {exc}", node) from None
        expr = lower.require_value(value, node)
        return lower.cast_elements(expr, dtype)

    return handler


def _dtype_call(lower, node, target, args, kwargs):
    return _builtin_cast(as_dtype(target))(lower, node, target, args, kwargs)


def _builtin_len(lower, node, target, args, kwargs):
    if len(args) != 1:
        raise lower.error(QnbTypeError, "len() takes one array", node)
    from qnb.frontend import lists  # (lists builds on this module)

    if isinstance(args[0], lists.StaticList | lists.ListDisplay):
        return Py(len(args[0]) if isinstance(args[0], lists.StaticList) else len(args[0].items))
    view = _array_arg(lower, args[0], node, "len()'s argument")
    axis = 1 if view.batch is not None else 0
    return ir.ArrayDim(ir.scalar(i32), lower.loc(node), view.param, axis)


def _builtin_range(lower, node, target, args, kwargs):
    raise lower.error(QnbTypeError, "range() is only allowed as a for loop's iterable", node)


def _static_misplaced(lower, node, target, args, kwargs):
    raise lower.error(QnbTypeError, "qnb.static is used as qnb.static(expr)", node)


SUPPORTED_CALLS = (
    "qnb.exp, exp2, log, log2, sqrt, sin, cos, tanh, floor, ceil, abs, maximum, minimum, "
    "where, outer and mma (or their math/NumPy "
    "twins), Tile[M, N]/Vec[N] constructors, qnb.arange, dtype conversions such as qnb.f32(x), @qnb.func "
    "helpers, and range, min, max, abs, float, int, bool, len"
)


def unsupported_call_message(what: str) -> str:
    """The message for a call a kernel cannot make (``math.sin``, ``print``, ``np.zeros``)."""
    return f"{what} is not supported in kernels; a kernel can call {SUPPORTED_CALLS}"


INTRINSICS = {
    "program_id": _program("id"),
    "num_programs": _program("count"),
    "where": _where,
    "exp": _math("exp"),
    "log": _math("log"),
    "sqrt": _math("sqrt"),
    "abs": _math("abs"),
    **{op: _math(op) for op in ("exp2", "log2", "sin", "cos", "tanh", "floor", "ceil")},
    "maximum": _minmax("max"),
    "minimum": _minmax("min"),
    "mma": _mma,
    "outer": _outer,
    "arange": _arange,
    "static": _static_misplaced,
    "builtin.abs": _math("abs"),
    "builtin.min": _builtin_minmax("min"),
    "builtin.max": _builtin_minmax("max"),
    "builtin.float": _builtin_cast(f32),
    "builtin.int": _builtin_cast(i32),
    "builtin.bool": _builtin_cast(bool_),
    "builtin.len": _builtin_len,
    "builtin.range": _builtin_range,
    "builtin.cast": _dtype_call,
}

# The constructors of every tile and vec class, by (kind, method): each reads its shape
# off the function it is called through (``Tile[8, 32].zeros._qnb_shape``).
SHAPED_INTRINSICS = {
    ("tile", "class"): _tile_class,
    ("tile", "zeros"): _constructor("tile", "zeros"),
    ("tile", "ones"): _constructor("tile", "ones"),
    ("tile", "full"): _constructor("tile", "full"),
    ("tile", "eye"): _constructor("tile", "eye"),
    ("tile", "load"): _tile_load,
    ("vec", "zeros"): _constructor("vec", "zeros"),
    ("vec", "ones"): _constructor("vec", "ones"),
    ("vec", "full"): _constructor("vec", "full"),
    ("vec", "load"): _vec_load,
    ("vec", "load_col"): _vec_load_line(0),
    ("vec", "load_row"): _vec_load_line(1),
}


def shaped_intrinsic(target):
    """The handler of a tile/vec class or constructor (None for anything else)."""
    kind = getattr(target, "_qnb_kind", None)
    if kind is None:
        return None
    return SHAPED_INTRINSICS.get((kind, target._qnb_method))


# ---------------------------------------------------------------------------- methods


def _receiver_var(lower, method, node):
    """The ast.Name of an in-place method's receiver (it must be a variable)."""
    target = method.node.value
    if not isinstance(target, ast.Name):
        raise lower.error(
            QnbTypeError,
            f".{method.name}() updates in place, so it needs a "
            f"variable (t.{method.name}(...), not an expression)",
            node,
        )
    return target


def _assign_in_place(lower, target_name: ast.Name, value, node):
    lower.update_in_place(target_name, value, node)
    return Py(None)


def _m_load_(lower, node, method, args, kwargs):
    tile = method.receiver
    if tile.type.kind != "tile":
        raise lower.error(QnbTypeError, f"load_ is a tile method, not one of a {tile.type}", node)
    arr, r0, r1, c0, c1 = _args(lower, node, "load_", args, kwargs, ["arr", "r0", "r1", "c0", "c1"])
    view = _array_arg(lower, arr, node)
    bounds = [lower.to_index(b, node, "window bound") for b in (r0, r1, c0, c1)]
    value = lower.load_window(tile, view, *bounds, node)
    return _assign_in_place(lower, _receiver_var(lower, method, node), value, node)


def _m_store(lower, node, method, args, kwargs):
    value = method.receiver
    if kwargs:
        raise lower.error(QnbTypeError, "store takes positional arguments", node)
    if not args:
        raise lower.error(QnbTypeError, "store needs an array", node)
    view = _array_arg(lower, args[0], node)
    rest = [lower.to_index(a, node, "store index") for a in args[1:]]
    loc = lower.loc(node)
    if value.type.kind == "vec":
        if view.view_ndim != 1 or len(rest) not in (1, 2):
            raise lower.error(QnbTypeError, "v.store(arr, start) stores into a 1-D array", node)
        start = rest[0]
        # v.store(arr, start) may start before the array (its elements there are skipped)
        stop = rest[1] if len(rest) == 2 else _plus(start, value.type.shape[0], loc)
        value = lower.cast_elements(value, view.type.dtype)
        lower.emit(ir.VecStore(loc, value, view, start, stop, None, len(rest) == 1))
        return Py(None)
    if view.view_ndim != 2:
        raise lower.error(
            QnbTypeError,
            f"a tile is stored into a 2-D array (or a slab of a 3-D "
            f"one), not a {view.view_ndim}-D array",
            node,
        )
    if len(rest) == 2:
        r0, c0 = rest
        m, n = value.type.shape
        window = (r0, _plus(r0, m, loc), c0, _plus(c0, n, loc))
    elif len(rest) == 4:
        window = tuple(rest)
    else:
        raise lower.error(
            QnbTypeError, "t.store(arr, row, col) or t.store(arr, r0, r1, c0, c1)", node
        )
    value = lower.cast_elements(value, view.type.dtype)
    # t.store(arr, row, col) may start before the array (its elements there are skipped)
    lower.emit(ir.StoreWindow(loc, value, view, *window, padded=len(rest) == 2))
    return Py(None)


def _m_store_line(axis):
    """``v.store_col(arr, row, col)`` (axis 0) / ``v.store_row(arr, row, col)`` (axis 1):
    the mirror images of ``load_col`` / ``load_row``; elements outside are not written."""
    name = "store_col" if axis == 0 else "store_row"

    def handler(lower, node, method, args, kwargs):
        value = method.receiver
        if value.type.kind != "vec":
            raise lower.error(
                QnbTypeError, f".{name}() is a vec method, not one of a {value.type}", node
            )
        arr, row, col = _args(lower, node, name, args, kwargs, ["arr", "row", "col"])
        view = _array_arg(lower, arr, node)
        if view.view_ndim != 2:
            raise lower.error(
                QnbTypeError,
                f"v.{name} stores into a 2-D array (or a slab of a 3-D one), not a "
                f"{view.view_ndim}-D array",
                node,
            )
        row, col = lower.to_index(row, node, "row"), lower.to_index(col, node, "col")
        loc = lower.loc(node)
        start, fixed = (row, col) if axis == 0 else (col, row)
        stop = _plus(start, value.type.shape[0], loc)
        value = lower.cast_elements(value, view.type.dtype)
        lower.emit(ir.VecStore(loc, value, view, start, stop, fixed, True, axis))
        return Py(None)

    return handler


def _m_astype(lower, node, method, args, kwargs):
    (dtype,) = _args(lower, node, "astype", args, kwargs, ["dtype"])
    return lower.cast_elements(method.receiver, _dtype_arg(lower, dtype, node))


def _m_reduce(op):
    def handler(lower, node, method, args, kwargs):
        axis, keepdims = _args(
            lower,
            node,
            op,
            args,
            kwargs,
            ["axis", "keepdims"],
            {"axis": Py(None), "keepdims": Py(False)},
        )
        tile = method.receiver
        if not isinstance(axis, Py) or axis.value not in (None, 0, 1, -1, -2):
            raise lower.error(QnbTypeError, "axis must be None, 0 or 1", node)
        if not isinstance(keepdims, Py) or not isinstance(keepdims.value, bool):
            raise lower.error(QnbTypeError, "keepdims must be a compile-time True or False", node)
        axis, keepdims = axis.value, keepdims.value
        if tile.type.kind == "vec":
            if axis not in (None, 0, -1):
                raise lower.error(
                    QnbTypeError, f"a {tile.type.shape_name} reduces over axis None or 0", node
                )
            axis = "vec"
        elif axis is not None and axis < 0:
            axis += 2
        if tile.type.dtype is bool_:
            tile = lower.cast_elements(tile, i32)
        dtype, loc = tile.type.dtype, lower.loc(node)
        if axis in (None, "vec"):
            # a vec reduces to a scalar too: Reduce(axis=None) on a vec operand
            total = ir.Reduce(ir.scalar(dtype), loc, op, tile, None)
            if not keepdims:
                return total
            ones = (1,) * len(tile.type.shape)
            return ir.TileFill(ir.value_type(dtype, ones), loc, "full", total)
        m, n = tile.type.shape
        vec = ir.Reduce(ir.vec(dtype, n if axis == 0 else m), loc, op, tile, axis)
        if not keepdims:
            return vec
        return ir.Reshape(ir.tile(dtype, (1, n) if axis == 0 else (m, 1)), loc, vec)

    return handler


def _m_rowcol(which):
    def handler(lower, node, method, args, kwargs):
        (index,) = _args(lower, node, which, args, kwargs, ["index"])
        tile = method.receiver
        if tile.type.kind != "tile":
            raise lower.error(
                QnbTypeError, f".{which}() is a tile method, not one of a {tile.type}", node
            )
        index = lower.to_index(index, node)
        m, n = tile.type.shape
        length = n if which == "row" else m
        return ir.RowCol(ir.vec(tile.type.dtype, length), lower.loc(node), which, tile, index)

    return handler


def _m_eye_(lower, node, method, args, kwargs):
    _args(lower, node, "eye_", args, kwargs, [])
    tile = method.receiver
    _require_square(lower, tile, "eye_", node)
    value = fill(lower, "tile", "eye", None, tile.type.dtype, node, tile.type.shape)
    return _assign_in_place(lower, _receiver_var(lower, method, node), value, node)


def _m_cholesky_(lower, node, method, args, kwargs):
    (eps,) = _args(lower, node, "cholesky_", args, kwargs, ["eps"], {"eps": Py(0.0)})
    tile = method.receiver
    if tile.type.kind != "tile" or not tile.type.dtype.is_float:
        name = "Tile16" if tile.type.kind != "tile" else tile.type.shape_name
        raise lower.error(QnbTypeError, f"cholesky_ needs a float {name}, got {tile.type}", node)
    _require_square(lower, tile, "cholesky_", node)
    eps = lower.coerce(eps, ir.scalar(tile.type.dtype), node)
    value = ir.Cholesky(tile.type, lower.loc(node), tile, eps)
    return _assign_in_place(lower, _receiver_var(lower, method, node), value, node)


def _m_solve_triangular_(lower, node, method, args, kwargs):
    rhs, lower_flag = _args(
        lower, node, "solve_triangular_", args, kwargs, ["B", "lower"], {"lower": Py(True)}
    )
    if not isinstance(lower_flag, Py) or lower_flag.value is not True:
        raise lower.error(QnbTypeError, "solve_triangular_ supports only lower=True", node)
    factor = method.receiver
    rhs_node = node.args[0] if node.args else next(k.value for k in node.keywords if k.arg == "B")
    if not isinstance(rhs_node, ast.Name):
        raise lower.error(
            QnbTypeError, "solve_triangular_ overwrites B, so B must be a variable", node
        )
    rhs = lower.require_value(rhs, node)
    if factor.type.kind != "tile" or rhs.type.kind != "tile":
        raise lower.error(QnbTypeError, "solve_triangular_ works on tiles", node)
    _require_square(lower, factor, "solve_triangular_", node)
    if rhs.type.shape[1] != factor.type.shape[0]:
        raise lower.error(
            QnbTypeError,
            f"L.solve_triangular_(B) needs L: Tile[N, N] and B: Tile[M, N]; L is a "
            f"{factor.type.shape_name} and B a {rhs.type.shape_name}",
            node,
        )
    dtype = promote(factor.type.dtype, rhs.type.dtype)
    if not dtype.is_float:
        raise lower.error(QnbTypeError, "solve_triangular_ needs float tiles", node)
    if rhs.type.dtype is not dtype:
        raise lower.error(QnbTypeError, f"B is {rhs.type.dtype} but L is {factor.type.dtype}", node)
    value = ir.SolveTriangular(rhs.type, lower.loc(node), lower.cast_elements(factor, dtype), rhs)
    lower.update_in_place(rhs_node, value, node)
    return Py(None)


def _require_square(lower, tile, name, node):
    if tile.type.kind != "tile":
        raise lower.error(
            QnbTypeError, f"{name} is a method of square tiles, not of a {tile.type}", node
        )
    m, n = tile.type.shape
    if m != n:
        raise lower.error(
            QnbTypeError, f"{name} needs a square tile; this one is a {tile.type.shape_name}", node
        )


TILE_METHODS = {
    "load_": _m_load_,
    "store": _m_store,
    "store_col": _m_store_line(0),
    "store_row": _m_store_line(1),
    "astype": _m_astype,
    "sum": _m_reduce("sum"),
    "max": _m_reduce("max"),
    "min": _m_reduce("min"),
    "row": _m_rowcol("row"),
    "col": _m_rowcol("col"),
    "eye_": _m_eye_,
    "cholesky_": _m_cholesky_,
    "solve_triangular_": _m_solve_triangular_,
}

__all__ = ["Py", "INTRINSICS", "TILE_METHODS"]
