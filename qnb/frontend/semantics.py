"""Typing rules of the tile language: what each operator, intrinsic and method accepts
and the IR it builds.

A rule receives a :class:`~qnb.frontend.builder.Builder` (never the walker), asks
:mod:`qnb.frontend.typing_rules` what type the operation gives, and builds the IR. Each
intrinsic's and method's rule is bound to the stub a user reads in :mod:`qnb.language`
(``@rule(language.exp)``); :mod:`qnb.frontend.bindings` checks the two signatures
against each other when this module is imported.

Promotion: bool < i32 < f16, bf16 < f32 < f64 between typed operands (f16 with bf16
gives f32, which holds both). A Python literal is
*weak*: it takes the dtype of the typed operand it meets (``t * 2.0`` keeps an f16
tile f16; ``i + 1`` stays i32), except a float literal next to an integer gives f32.
``/`` is true division (integers become f32); ``//`` and ``%`` follow Python.
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import math
import operator

import numpy as np

from qnb import ir, language
from qnb.dtypes import DType, as_dtype, bool_, f32, f64, i32, is_dtype_like, promote
from qnb.errors import QnbCaptureError, QnbTypeError, QnbZeroDivisionError
from qnb.frontend import atomics, lists, typing_rules
from qnb.frontend.bindings import Py, Rule, check_bindings, is_number, language_stubs, rule
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


def _typed(builder, node, compute, *types):
    """``compute(*types)`` (a function of :mod:`typing_rules`), its refusal raised as the
    user's QnbTypeError at ``node``."""
    try:
        return compute(*types)
    except typing_rules.TypeRefusal as refusal:
        raise builder.error(QnbTypeError, str(refusal), node) from None


def _cast_through(builder, through, *exprs) -> list:
    """``exprs`` with their elements converted through each dtype of ``through``."""
    exprs = list(exprs)
    for dtype in through:
        exprs = [builder.cast_elements(e, dtype) for e in exprs]
    return exprs


def const(builder, value, node, dtype: DType | None = None) -> ir.Const:
    """A typed constant for a Python number; ``dtype`` is the weak-typing hint."""
    try:  # (_typed, inline: constants are the commonest node)
        chosen = typing_rules.constant_dtype(value, dtype)
    except typing_rules.TypeRefusal as refusal:
        raise builder.error(QnbTypeError, str(refusal), node) from None
    return ir.Const(ir.scalar(chosen), builder.loc(node), convert_value(value, chosen))


def broadcast_operands(builder, node, *operands) -> tuple[tuple[int, ...], list]:
    """NumPy's broadcast of the operands' shapes (:func:`typing_rules.broadcast`), and
    the operands with every tile/vec stretched to it by :class:`ir.Broadcast` (so
    backends see only equal shapes or scalars)."""
    try:  # (_typed, inline: every elementwise op comes here)
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


def _typed_pair(builder, left, right, node):
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
        return _power(builder, left, right, node)
    left, right, dtype = _typed_pair(builder, left, right, node)
    shape, (left, right) = broadcast_operands(builder, node, left, right)
    try:  # (_typed, inline)
        through, result = typing_rules.binary_dtypes(op, dtype)
    except typing_rules.TypeRefusal as refusal:
        raise builder.error(QnbTypeError, str(refusal), node) from None
    if through:
        left, right = _cast_through(builder, through, left, right)
    return ir.Binary(ir.value_type(result, shape), builder.loc(node), op, left, right)


def invert(builder, operand, node):
    """``~x``: logical not on bools (as NumPy's ``~`` on a bool array), bitwise on i32."""
    op = _typed(builder, node, typing_rules.invert_op, operand.type)
    return ir.Unary(operand.type, builder.loc(node), op, operand)


def _power(builder, base, exponent, node):
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
    left, right, dtype = _typed_pair(builder, base, exponent, node)
    through = typing_rules.power_dtypes(dtype, constant)
    if through:
        left, right = _cast_through(builder, through, left, right)
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
    a, b, dtype = _typed_pair(builder, a, b, node)
    shape, (cond, a, b) = broadcast_operands(builder, node, cond, a, b)
    return ir.Select(ir.value_type(dtype, shape), builder.loc(node), cond, a, b)


def matmul(builder, a, b, acc, node):
    a = builder.require_value(a, node)
    b = builder.require_value(b, node)
    dtype, out = _typed(builder, node, typing_rules.matmul_type, a.type, b.type)
    a, b = builder.cast_elements(a, dtype), builder.cast_elements(b, dtype)
    if acc is not None:
        acc = builder.require_value(acc, node)
        _typed(builder, node, typing_rules.check_accumulator, acc.type, a.type, b.type, dtype, out)
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


def _dtype_arg(builder, value, node) -> DType:
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


def _int_arg(builder, value, node, what) -> int:
    if isinstance(value, Py) and isinstance(value.value, int) and not isinstance(value.value, bool):
        return value.value
    raise builder.error(QnbTypeError, f"{what} must be a constant integer", node)


def _array_arg(builder, value, node, what="the first argument") -> ir.ArrayView:
    if not isinstance(value, ir.ArrayView):
        raise builder.error(QnbTypeError, f"{what} must be an array parameter", node)
    return value


def _fold_or(builder, node, args, fn):
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


def _is_none(value) -> bool:
    return isinstance(value, Py) and value.value is None


def _plus(index: ir.Expr, count: int, loc) -> ir.Expr:
    """``index + count`` (i32), the stop of a padded window of ``count`` elements."""
    return ir.Binary(ir.scalar(i32), loc, "add", index, ir.Const(ir.scalar(i32), loc, count))


# ---------------------------------------------------------------------------- intrinsics
# Each rule is ``fn(builder, node, target, <its stub's parameters>)``, bound by @rule to
# the stub (see qnb.frontend.bindings); the arguments arrive bound, defaults as Py.

RULES: list[Rule] = []


def _bound(*stubs, **options):
    """@rule(*stubs, **options), the rule kept in RULES."""

    def keep(fn) -> Rule:
        bound = rule(*stubs, **options)(fn)
        RULES.append(bound)
        return bound

    return keep


@_bound(language.program_id, name="qnb.program_id")
def _program_id(builder, node, target, axis=0):
    return _program(builder, node, "id", axis)


@_bound(language.num_programs, name="qnb.num_programs")
def _num_programs(builder, node, target, axis=0):
    return _program(builder, node, "count", axis)


def _program(builder, node, which, axis):
    axis = _int_arg(builder, axis, node, "axis")
    if axis not in (0, 1, 2):
        raise builder.error(QnbTypeError, f"axis must be 0, 1 or 2, got {axis}", node)
    return ir.ProgramId(ir.scalar(i32), builder.loc(node), which, axis)


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
    def unary_math(builder, node, target, x):
        folded = _fold_or(builder, node, [x], _MATH_FOLD[op])
        if folded is not None:
            return folded
        expr = builder.require_value(x, node)
        dtype = _typed(builder, node, typing_rules.math_dtype, op, expr.type.dtype)
        expr = builder.cast_elements(expr, dtype)
        return ir.Unary(expr.type, builder.loc(node), op, expr)

    unary_math.__qualname__ = f"_math({op!r})"
    return _bound(getattr(language, op))(unary_math)


MATH_RULES = {op: _math(op) for op in _MATH_FOLD}


def _minmax(builder, node, op, a, b):
    folded = _fold_or(builder, node, [a, b], max if op == "max" else min)
    if folded is not None:
        return folded
    return binary(builder, op, a, b, node)


@_bound(language.maximum, name="max")
def _maximum(builder, node, target, a, b):
    return _minmax(builder, node, "max", a, b)


@_bound(language.minimum, name="min")
def _minimum(builder, node, target, a, b):
    return _minmax(builder, node, "min", a, b)


@_bound(language.where, name="qnb.where")
def _where(builder, node, target, mask, a, b):
    return where(builder, mask, a, b, node)


@_bound(language.mma, name="qnb.mma")
def _mma(builder, node, target, a, b, acc):
    return matmul(builder, a, b, acc, node)


@_bound(language.outer, name="qnb.outer")
def _outer(builder, node, target, u, v):
    u, v = builder.require_value(u, node), builder.require_value(v, node)
    type_ = _typed(builder, node, typing_rules.outer_type, u.type, v.type)
    u, v = builder.cast_elements(u, type_.dtype), builder.cast_elements(v, type_.dtype)
    return ir.Outer(type_, builder.loc(node), u, v)


@_bound(language.arange, name="qnb.arange")
def _arange(builder, node, target, n, dtype=None):
    if not isinstance(n, Py) or not isinstance(n.value, int) or isinstance(n.value, bool):
        raise builder.error(
            QnbTypeError,
            "qnb.arange(n) needs a compile-time n (a literal, a captured constant, a "
            "qnb.Template parameter or a static loop value)",
            node,
        )
    problem = language.vec_shape_problem(n.value)
    if problem is not None:
        raise builder.error(QnbTypeError, f"qnb.arange({n.value}) would be a {problem}", node)
    dtype = i32 if _is_none(dtype) else _dtype_arg(builder, dtype, node)
    return fill(builder, "vec", "arange", None, dtype, node, (n.value,))


@_bound(language.cdiv, name="qnb.cdiv")
def _cdiv(builder, node, target, a, b):
    """``-(-a // b)``: folded where both are compile-time ints, else a runtime i32."""
    for value in (a, b):
        raw = value.value if isinstance(value, Py) else value
        runtime = isinstance(raw, ir.Expr) and raw.type == ir.scalar(i32)
        if not runtime and (isinstance(raw, bool) or not isinstance(raw, int)):
            if isinstance(raw, ir.ArrayView):
                got = "an array"
            else:
                got = f"a {raw.type} value" if isinstance(raw, ir.Expr) else repr(raw)
            raise builder.error(QnbTypeError, f"qnb.cdiv takes ints, got {got}", node)
    if isinstance(b, Py) and b.value == 0:
        raise builder.error(QnbZeroDivisionError, "qnb.cdiv(a, b): the divisor is 0", node)
    if isinstance(a, Py) and isinstance(b, Py):
        return Py(-(-a.value // b.value))
    negated = Py(-a.value) if isinstance(a, Py) else ir.Unary(a.type, builder.loc(node), "neg", a)
    quotient = binary(builder, "floordiv", negated, b, node)
    return ir.Unary(quotient.type, builder.loc(node), "neg", quotient)


@_bound(language.static, accepts=lambda value: None)
def _static_misplaced(builder, node, target, args, kwargs):
    raise builder.error(QnbTypeError, "qnb.static is used as qnb.static(expr)", node)


# ---------------------------------------------------------------------------- constructors
# Bound to Tile16's and Vec16's; every shape's class shares them, and each reads its
# shape off the function it is called through (``Tile[8, 32].zeros._qnb_shape``).


def _shape_of(target, kind) -> tuple[int, ...]:
    """The shape of the tile/vec class a constructor belongs to (``Tile[8, 32].zeros``)."""
    return getattr(target, "_qnb_shape", None) or (
        (ir.TILE, ir.TILE) if kind == "tile" else (ir.TILE,)
    )


def _type_name(kind, shape) -> str:
    return (ir.tile(f32, shape) if kind == "tile" else ir.vec(f32, shape[0])).shape_name


def _called_name(kind, method, target) -> str:
    """The name of a shaped constructor call (``Tile[8, 32].zeros``), from its target."""
    return f"{_type_name(kind, _shape_of(target, kind))}.{method}"


def _called(kind, method):
    """:func:`_called_name` as a rule's ``name=`` (spelled only for a message)."""
    return lambda target: _called_name(kind, method, target)


def _new(builder, node, target, kind, how, value, dtype):
    shape = _shape_of(target, kind)
    dtype = _dtype_arg(builder, dtype, node)
    if how == "eye":
        if shape[0] != shape[1]:
            name = _called_name(kind, how, target)
            raise builder.error(
                QnbTypeError,
                f"eye is the identity of a square tile type, not {name[:-4]}",
                node,
            )
        return fill(builder, kind, "eye", None, dtype, node, shape)
    if isinstance(value, Py):
        if not is_number(value.value):
            name = _called_name(kind, how, target)
            raise builder.error(QnbTypeError, f"{name} needs a number, got {value.value!r}", node)
        return fill(builder, kind, "full", value.value, dtype, node, shape)
    return fill(builder, kind, "full", value, dtype, node, shape)


def _constant_constructor(kind, how):
    """``zeros``/``ones``/``eye`` of the tile or vec classes (``kind``)."""
    cls = language.Tile16 if kind == "tile" else language.Vec16

    def new(builder, node, target, dtype=f32):
        return _new(
            builder, node, target, kind, how, Py({"zeros": 0, "ones": 1}.get(how, 0)), dtype
        )

    new.__qualname__ = f"_constant_constructor({kind!r}, {how!r})"
    return _bound(getattr(cls, how), name=_called(kind, how))(new)


def _full_constructor(kind):
    cls = language.Tile16 if kind == "tile" else language.Vec16

    def full(builder, node, target, value, dtype=f32):
        return _new(builder, node, target, kind, "full", value, dtype)

    full.__qualname__ = f"_full_constructor({kind!r})"
    return _bound(cls.full, name=_called(kind, "full"))(full)


CONSTRUCTOR_RULES = {
    ("tile", "zeros"): _constant_constructor("tile", "zeros"),
    ("tile", "ones"): _constant_constructor("tile", "ones"),
    ("tile", "eye"): _constant_constructor("tile", "eye"),
    ("tile", "full"): _full_constructor("tile"),
    ("vec", "zeros"): _constant_constructor("vec", "zeros"),
    ("vec", "ones"): _constant_constructor("vec", "ones"),
    ("vec", "full"): _full_constructor("vec"),
}


@_bound(language.Tile16, name=_called("tile", "zeros"))
def _tile_class(builder, node, target, dtype=f32):
    """``Tile16(dtype)`` / ``Tile[M, N](dtype)``: a tile of zeros."""
    return _new(builder, node, target, "tile", "zeros", Py(0), dtype)


@_bound(language.Vec16, name=_called("vec", "zeros"))
def _vec_class(builder, node, target, dtype=f32):
    """``Vec16(dtype)`` / ``Vec[N](dtype)``: a vec of zeros."""
    return _new(builder, node, target, "vec", "zeros", Py(0), dtype)


def _other_arg(builder, other, dtype, node, name):
    """``other=``: the value of the elements a load finds outside its array, a number
    (NaN and ±inf included) or a runtime scalar, as ``dtype``."""
    raw = other.value if isinstance(other, Py) else other
    if isinstance(raw, Py | ir.ArrayView) or (
        isinstance(raw, ir.Expr) and raw.type.kind != "scalar"
    ):
        raise builder.error(QnbTypeError, f"{name}(other=...) takes a scalar", node)
    if not isinstance(raw, ir.Expr) and (not is_number(raw) or isinstance(raw, complex)):
        raise builder.error(QnbTypeError, f"{name}(other=...) takes a number, got {raw!r}", node)
    if isinstance(raw, bool):
        raw = int(raw)
    return fill_value(builder, raw, dtype, node)


@_bound(language.Tile16.load, name=_called("tile", "load"))
def _tile_load(builder, node, target, arr, row, col, *, other=0, dtype=None):
    shape = _shape_of(target, "tile")
    name = _called_name("tile", "load", target)
    view = _array_arg(builder, arr, node)
    if view.view_ndim != 2:
        raise builder.error(
            QnbTypeError,
            f"{name} needs a 2-D array (or a slab of a 3-D one), got a {view.view_ndim}-D array",
            node,
        )
    dtype = view.type.dtype if _is_none(dtype) else _dtype_arg(builder, dtype, node)
    row = builder.to_index(row, node, "row")
    col = builder.to_index(col, node, "col")
    loc = builder.loc(node)
    r1 = _plus(row, shape[0], loc)
    c1 = _plus(col, shape[1], loc)
    # elements outside the array are ``other``; those read convert to ``dtype`` (as astype)
    base = fill(
        builder, "tile", "full", _other_arg(builder, other, dtype, node, name), dtype, node, shape
    )
    return ir.LoadWindow(base.type, loc, base, view, row, r1, col, c1, padded=True)


@_bound(language.Vec16.load, accepts=lambda arr, *window, other=0: None)
def _vec_load(builder, node, target, args, kwargs):
    """Its forms (1-D with ``other``, 1-D start/stop, 2-D column window) each have their
    own message, so it reads its arguments itself."""
    (n,) = _shape_of(target, "vec")
    name = f"{_type_name('vec', (n,))}.load"
    if set(kwargs) - {"other"}:
        raise builder.error(
            QnbTypeError,
            f"{name}() got an unexpected keyword argument {sorted(set(kwargs) - {'other'})[0]!r}",
            node,
        )
    if not args:
        raise builder.error(QnbTypeError, f"{name} needs an array", node)
    view = _array_arg(builder, args[0], node)
    loc = builder.loc(node)
    vec_type = ir.vec(view.type.dtype, n)
    if view.view_ndim == 1 and len(args) == 2:
        # Vec[N].load(arr, start, *, other=0): start may be negative
        start = builder.to_index(args[1], node, "start")
        other = _other_arg(builder, kwargs.get("other", Py(0)), view.type.dtype, node, name)
        return ir.VecLoad(vec_type, loc, view, start, _plus(start, n, loc), None, other, True)
    if kwargs:
        raise builder.error(
            QnbTypeError, f"other= is for {name}(arr, start, other=...) on a 1-D array", node
        )
    if view.view_ndim == 1:
        if len(args) != 3:
            raise builder.error(QnbTypeError, f"{name}(arr, start) on a 1-D array", node)
        start = builder.to_index(args[1], node, "start")
        stop = builder.to_index(args[2], node, "stop")
        return ir.VecLoad(vec_type, loc, view, start, stop, None)
    if view.view_ndim != 2 or len(args) != 4:
        raise builder.error(
            QnbTypeError,
            f"{name}(arr, r0, r1, col) on a 2-D array, or {name}(arr, start) on a 1-D array",
            node,
        )
    r0, r1, col = (builder.to_index(a, node) for a in args[1:])
    return ir.VecLoad(vec_type, loc, view, r0, r1, col)


def _vec_load_line(axis):
    """``Vec[N].load_col(arr, row, col, *, other=0)`` (axis 0, ``v[i] = arr[row + i, col]``)
    and ``load_row`` (axis 1, ``v[j] = arr[row, col + j]``): padded vec loads."""
    method = "load_col" if axis == 0 else "load_row"

    def load_line(builder, node, target, arr, row, col, *, other=0):
        (n,) = _shape_of(target, "vec")
        name = _called_name("vec", method, target)
        view = _array_arg(builder, arr, node)
        if view.view_ndim != 2:
            raise builder.error(
                QnbTypeError,
                f"{name} needs a 2-D array (or a slab of a 3-D one), got a {view.view_ndim}-D array",
                node,
            )
        row, col = builder.to_index(row, node, "row"), builder.to_index(col, node, "col")
        loc = builder.loc(node)
        other = _other_arg(builder, other, view.type.dtype, node, name)
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

    load_line.__qualname__ = f"_vec_load_line({axis})"
    return _bound(getattr(language.Vec16, method), name=_called("vec", method))(load_line)


SHAPED_INTRINSICS = {
    **CONSTRUCTOR_RULES,
    ("tile", "class"): _tile_class,
    ("vec", "class"): _vec_class,
    ("tile", "load"): _tile_load,
    ("vec", "load"): _vec_load,
    ("vec", "load_col"): _vec_load_line(0),
    ("vec", "load_row"): _vec_load_line(1),
}


def shaped_intrinsic(target):
    """The rule of a tile/vec class or constructor (None for anything else)."""
    kind = getattr(target, "_qnb_kind", None)
    if kind is None:
        return None
    return SHAPED_INTRINSICS.get((kind, target._qnb_method))


# ---------------------------------------------------------------------------- Python's builtins
# Not language stubs: Python's own functions, as a kernel may call them
# (``(builder, node, target, args, kwargs)``, their arguments read here).


def _builtin_cast(dtype):
    def handler(builder, node, target, args, kwargs):
        if kwargs or len(args) != 1:
            raise builder.error(QnbTypeError, "a conversion takes one value", node)
        (value,) = args
        if isinstance(value, Py):
            raw = value.value
            if isinstance(raw, str) and dtype.is_float:
                with contextlib.suppress(ValueError):
                    raw = float(raw)  # float("inf"), float("-inf"), float("nan")
            if not is_number(raw):
                raise builder.error(QnbTypeError, f"cannot convert {raw!r} to {dtype}", node)
            try:
                return Py(cast_constant(raw, dtype))  # exactly what the runtime cast gives
            except OverflowError as exc:
                raise builder.error(QnbTypeError, f"cannot convert {raw!r}: {exc}", node) from None
        expr = builder.require_value(value, node)
        return builder.cast_elements(expr, dtype)

    return handler


def _dtype_call(builder, node, target, args, kwargs):
    return _builtin_cast(as_dtype(target))(builder, node, target, args, kwargs)


def _builtin_minmax(op):
    def handler(builder, node, target, args, kwargs):
        if kwargs or len(args) < 2:
            raise builder.error(QnbTypeError, f"{op}() in a kernel takes two or more values", node)
        result = args[0]
        for other in args[1:]:
            result = _minmax(builder, node, op, result, other)
        return result

    return handler


def _builtin_len(builder, node, target, args, kwargs):
    if len(args) != 1:
        raise builder.error(QnbTypeError, "len() takes one array", node)
    if isinstance(args[0], lists.StaticList | lists.ListDisplay):
        return Py(len(args[0]) if isinstance(args[0], lists.StaticList) else len(args[0].items))
    view = _array_arg(builder, args[0], node, "len()'s argument")
    axis = 1 if view.batch is not None else 0
    return ir.ArrayDim(ir.scalar(i32), builder.loc(node), view.param, axis)


def _builtin_range(builder, node, target, args, kwargs):
    raise builder.error(QnbTypeError, "range() is only allowed as a for loop's iterable", node)


BUILTIN_RULES = {
    builtins.abs: MATH_RULES["abs"],
    builtins.min: _builtin_minmax("min"),
    builtins.max: _builtin_minmax("max"),
    builtins.float: _builtin_cast(f32),
    builtins.int: _builtin_cast(i32),
    builtins.bool: _builtin_cast(bool_),
    builtins.len: _builtin_len,
    builtins.range: _builtin_range,
}


SUPPORTED_CALLS = (
    "qnb.exp, exp2, log, log2, sqrt, sin, cos, tanh, floor, ceil, abs, maximum, minimum, "
    "where, outer and mma (or their math/NumPy "
    "twins), Tile[M, N]/Vec[N] constructors, qnb.arange, dtype conversions such as qnb.f32(x), @qnb.func "
    "helpers, and range, min, max, abs, float, int, bool, len"
)


def unsupported_call_message(what: str) -> str:
    """The message for a call a kernel cannot make (``math.sin``, ``print``, ``np.zeros``)."""
    return f"{what} is not supported in kernels; a kernel can call {SUPPORTED_CALLS}"


# ---------------------------------------------------------------------------- methods
# Bound to the methods of Tile16 and Vec16 (``target`` is the walker's _Method: its
# receiver and node); a method is found by its name, whatever the receiver's kind.


def _receiver_var(builder, method, node):
    """The ast.Name of an in-place method's receiver (it must be a variable)."""
    target = method.node.value
    if not isinstance(target, ast.Name):
        raise builder.error(
            QnbTypeError,
            f".{method.name}() updates in place, so it needs a "
            f"variable (t.{method.name}(...), not an expression)",
            node,
        )
    return target


def _assign_in_place(builder, target_name: ast.Name, value, node):
    builder.update_in_place(target_name, value, node)
    return Py(None)


def _tile_receiver(builder, node, method):
    tile = method.receiver
    if tile.type.kind != "tile":
        raise builder.error(QnbTypeError, f"load_ is a tile method, not one of a {tile.type}", node)


@_bound(language.Tile16.load_, before=_tile_receiver)
def _m_load_(builder, node, method, arr, r0, r1, c0, c1):
    tile = method.receiver
    view = _array_arg(builder, arr, node)
    bounds = [builder.to_index(b, node, "window bound") for b in (r0, r1, c0, c1)]
    value = builder.load_window(tile, view, *bounds, node)
    return _assign_in_place(builder, _receiver_var(builder, method, node), value, node)


@_bound(
    language.Tile16.store,
    language.Vec16.store,
    accepts=lambda arr, *window: None,
)
def _m_store(builder, node, method, args, kwargs):
    """``t.store(arr, row, col)`` / ``(arr, r0, r1, c0, c1)``, ``v.store(arr, start)`` /
    ``(arr, start, stop)``: each form has its own message, so it reads its arguments."""
    value = method.receiver
    if kwargs:
        raise builder.error(QnbTypeError, "store takes positional arguments", node)
    if not args:
        raise builder.error(QnbTypeError, "store needs an array", node)
    view = _array_arg(builder, args[0], node)
    rest = [builder.to_index(a, node, "store index") for a in args[1:]]
    loc = builder.loc(node)
    if value.type.kind == "vec":
        if view.view_ndim != 1 or len(rest) not in (1, 2):
            raise builder.error(QnbTypeError, "v.store(arr, start) stores into a 1-D array", node)
        start = rest[0]
        # v.store(arr, start) may start before the array (its elements there are skipped)
        stop = rest[1] if len(rest) == 2 else _plus(start, value.type.shape[0], loc)
        value = builder.cast_elements(value, view.type.dtype)
        builder.emit(ir.VecStore(loc, value, view, start, stop, None, len(rest) == 1))
        return Py(None)
    if view.view_ndim != 2:
        raise builder.error(
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
        raise builder.error(
            QnbTypeError, "t.store(arr, row, col) or t.store(arr, r0, r1, c0, c1)", node
        )
    value = builder.cast_elements(value, view.type.dtype)
    # t.store(arr, row, col) may start before the array (its elements there are skipped)
    builder.emit(ir.StoreWindow(loc, value, view, *window, padded=len(rest) == 2))
    return Py(None)


def _m_store_line(axis):
    """``v.store_col(arr, row, col)`` (axis 0) / ``v.store_row(arr, row, col)`` (axis 1):
    the mirror images of ``load_col`` / ``load_row``; elements outside are not written."""
    name = "store_col" if axis == 0 else "store_row"

    def vec_receiver(builder, node, method):
        if method.receiver.type.kind != "vec":
            raise builder.error(
                QnbTypeError,
                f".{name}() is a vec method, not one of a {method.receiver.type}",
                node,
            )

    def store_line(builder, node, method, arr, row, col):
        value = method.receiver
        view = _array_arg(builder, arr, node)
        if view.view_ndim != 2:
            raise builder.error(
                QnbTypeError,
                f"v.{name} stores into a 2-D array (or a slab of a 3-D one), not a "
                f"{view.view_ndim}-D array",
                node,
            )
        row, col = builder.to_index(row, node, "row"), builder.to_index(col, node, "col")
        loc = builder.loc(node)
        start, fixed = (row, col) if axis == 0 else (col, row)
        stop = _plus(start, value.type.shape[0], loc)
        value = builder.cast_elements(value, view.type.dtype)
        builder.emit(ir.VecStore(loc, value, view, start, stop, fixed, True, axis))
        return Py(None)

    store_line.__qualname__ = f"_m_store_line({axis})"
    return _bound(getattr(language.Vec16, name), before=vec_receiver)(store_line)


@_bound(language.Tile16.astype, language.Vec16.astype)
def _m_astype(builder, node, method, dtype):
    return builder.cast_elements(method.receiver, _dtype_arg(builder, dtype, node))


def _reduction(builder, node, tile, op, axis, keepdims):
    """``tile.op(axis, keepdims)`` for ``op`` in sum, max, min, prod."""
    if not isinstance(axis, Py) or axis.value not in (None, 0, 1, -1, -2):
        raise builder.error(QnbTypeError, "axis must be None, 0 or 1", node)
    if not isinstance(keepdims, Py) or not isinstance(keepdims.value, bool):
        raise builder.error(QnbTypeError, "keepdims must be a compile-time True or False", node)
    axis = _typed(builder, node, typing_rules.reduce_axis, tile.type, axis.value)
    tile = builder.cast_elements(tile, typing_rules.reduce_dtype(tile.type.dtype))
    loc = builder.loc(node)
    # a vec reduces to a scalar too: Reduce(axis=None) on a vec operand
    reduced = ir.Reduce(
        typing_rules.reduce_type(tile.type, axis),
        loc,
        op,
        tile,
        None if axis == "vec" else axis,
    )
    if not keepdims.value:
        return reduced
    kept = typing_rules.keepdims_type(tile.type, axis)
    if axis in (None, "vec"):
        return ir.TileFill(kept, loc, "full", reduced)
    return ir.Reshape(kept, loc, reduced)


def _m_reduce(op):
    def reduce(builder, node, method, axis=None, keepdims=False):
        return _reduction(builder, node, method.receiver, op, axis, keepdims)

    reduce.__qualname__ = f"_m_reduce({op!r})"
    return _bound(getattr(language.Tile16, op), getattr(language.Vec16, op), name=op)(reduce)


@_bound(language.Tile16.mean, language.Vec16.mean, name="mean")
def _m_mean(builder, node, method, axis=None, keepdims=False):
    """``mean`` is the sum divided by the count, in the operand's float dtype (f32 for i32
    and bool): a narrow float is widened to f32 first (exactly), so its sum accumulates
    in f32 and the quotient rounds once, back to the operand's dtype."""
    tile = method.receiver
    dtype = tile.type.dtype
    work = dtype if dtype in (f32, f64) else f32
    total = _reduction(builder, node, builder.cast_elements(tile, work), "sum", axis, keepdims)
    count = tile.type.size
    if tile.type.kind == "tile" and axis.value is not None:
        count = tile.type.shape[1 if axis.value in (1, -1) else 0]
    quotient = binary(builder, "div", total, Py(float(count)), node)  # (a weak number)
    out = dtype if dtype.is_float else work
    return quotient if out is work else builder.cast_elements(quotient, out)


def _m_index(op):
    """``argmax``/``argmin``: an :class:`ir.IndexReduce` that carries its spelling in the
    reductions every backend has: the extreme along the axis, the elements equal to it
    (or, where the line holds a NaN, its NaNs: NumPy's rule), and the smallest index
    among them (the first one, C order for axis None)."""
    extreme = "max" if op == "argmax" else "min"

    def index_reduction(builder, node, method, axis=None):
        tile = method.receiver
        if tile.type.dtype is bool_:
            tile = builder.cast_elements(tile, i32)
        kept = Py(True)
        best = _reduction(builder, node, tile, extreme, axis, kept)
        hit = binary(builder, "eq", tile, best, node)
        if tile.type.dtype.is_float:  # NumPy: the first NaN wins
            nan = binary(builder, "ne", tile, tile, node)
            flags = builder.cast_elements(nan, i32)
            any_nan = binary(
                builder, "gt", _reduction(builder, node, flags, "max", axis, kept), Py(0), node
            )
            hit = where(builder, any_nan, nan, hit, node)
        index = _element_index(builder, node, tile.type, axis)
        candidates = where(builder, hit, index, Py(tile.type.size), node)
        spelled = _reduction(builder, node, candidates, "min", axis, Py(False))  # an ir.Reduce
        return ir.IndexReduce(spelled.type, spelled.loc, op, tile, spelled.axis, spelled)

    index_reduction.__qualname__ = f"_m_index({op!r})"
    return _bound(getattr(language.Tile16, op), getattr(language.Vec16, op), name=op)(
        index_reduction
    )


def _m_scan(op):
    """``cumsum``/``cumprod``: an :class:`ir.Scan` of the tile or vec (bools as i32)."""

    def scan(builder, node, method, axis=None):
        tile = method.receiver
        if not isinstance(axis, Py):
            raise builder.error(QnbTypeError, "axis must be a compile-time 0 or 1", node)
        axis = _typed(builder, node, typing_rules.scan_axis, tile.type, axis.value)
        tile = builder.cast_elements(tile, typing_rules.reduce_dtype(tile.type.dtype))
        return ir.Scan(tile.type, builder.loc(node), op, tile, axis)

    scan.__qualname__ = f"_m_scan({op!r})"
    name = "cum" + op
    return _bound(getattr(language.Tile16, name), getattr(language.Vec16, name), name=name)(scan)


def _element_index(builder, node, typ, axis):
    """An i32 value holding each element's index along ``axis`` (broadcast against the
    operand where it is used): the column (axis 1: a ``Tile[1, N]``), the row (axis 0:
    a ``Tile[M, 1]``), the flat C-order index (axis None), or for a vec its position."""
    if typ.kind == "vec":
        return fill(builder, "vec", "arange", None, i32, node, typ.shape)
    m, n = typ.shape
    loc = builder.loc(node)
    rows = fill(builder, "vec", "arange", None, i32, node, (m,))
    cols = fill(builder, "vec", "arange", None, i32, node, (n,))
    rows = ir.Reshape(ir.value_type(i32, (m, 1)), loc, rows)
    cols = ir.Reshape(ir.value_type(i32, (1, n)), loc, cols)
    axis = axis.value if isinstance(axis, Py) else axis
    if axis in (1, -1):
        return cols
    if axis in (0, -2):
        return rows
    return binary(builder, "add", binary(builder, "mul", rows, Py(n), node), cols, node)


def _m_line(which):
    def line(builder, node, method, index):
        tile = method.receiver
        type_ = _typed(builder, node, typing_rules.line_type, tile.type, which)
        index = builder.to_index(index, node)
        return ir.RowCol(type_, builder.loc(node), which, tile, index)

    line.__qualname__ = f"_m_line({which!r})"
    return _bound(getattr(language.Tile16, which))(line)


@_bound(language.Tile16.eye_)
def _m_eye_(builder, node, method):
    tile = method.receiver
    _typed(builder, node, typing_rules.check_square, tile.type, "eye_")
    value = fill(builder, "tile", "eye", None, tile.type.dtype, node, tile.type.shape)
    return _assign_in_place(builder, _receiver_var(builder, method, node), value, node)


@_bound(language.Tile16.cholesky_)
def _m_cholesky_(builder, node, method, eps=0.0):
    tile = method.receiver
    _typed(builder, node, typing_rules.check_cholesky, tile.type)
    eps = builder.coerce(eps, ir.scalar(tile.type.dtype), node)
    value = ir.Cholesky(tile.type, builder.loc(node), tile, eps)
    return _assign_in_place(builder, _receiver_var(builder, method, node), value, node)


@_bound(language.Tile16.solve_triangular_)
def _m_solve_triangular_(builder, node, method, B, lower=True):  # noqa: N803 - the stub's name
    if not isinstance(lower, Py) or lower.value is not True:
        raise builder.error(QnbTypeError, "solve_triangular_ supports only lower=True", node)
    factor = method.receiver
    rhs_node = node.args[0] if node.args else next(k.value for k in node.keywords if k.arg == "B")
    if not isinstance(rhs_node, ast.Name):
        raise builder.error(
            QnbTypeError, "solve_triangular_ overwrites B, so B must be a variable", node
        )
    rhs = builder.require_value(B, node)
    dtype = _typed(builder, node, typing_rules.solve_triangular_dtype, factor.type, rhs.type)
    value = ir.SolveTriangular(
        rhs.type, builder.loc(node), builder.cast_elements(factor, dtype), rhs
    )
    builder.update_in_place(rhs_node, value, node)
    return Py(None)


TILE_METHODS = {
    "load_": _m_load_,
    "store": _m_store,
    "store_col": _m_store_line(0),
    "store_row": _m_store_line(1),
    "astype": _m_astype,
    "sum": _m_reduce("sum"),
    "max": _m_reduce("max"),
    "min": _m_reduce("min"),
    "prod": _m_reduce("prod"),
    "mean": _m_mean,
    "argmax": _m_index("argmax"),
    "argmin": _m_index("argmin"),
    "cumsum": _m_scan("sum"),
    "cumprod": _m_scan("prod"),
    "row": _m_line("row"),
    "col": _m_line("col"),
    "eye_": _m_eye_,
    "cholesky_": _m_cholesky_,
    "solve_triangular_": _m_solve_triangular_,
}

# ---------------------------------------------------------------------------- the binding check

RULES.extend(atomics.RULES)
check_bindings(RULES, language_stubs(language))

# The walker finds an intrinsic by its tag (``qnb.exp._qnb_intrinsic``, which math/NumPy
# twins share) and a builtin as "builtin.<name>"; both tables come from the bindings.
INTRINSICS = {
    **{
        stub._qnb_intrinsic: bound
        for bound in RULES
        for stub in bound.stubs
        if getattr(stub, "_qnb_kind", None) is None and hasattr(stub, "_qnb_intrinsic")
    },
    **{f"builtin.{fn.__name__}": handler for fn, handler in BUILTIN_RULES.items()},
    "builtin.cast": _dtype_call,
}

__all__ = ["Py", "INTRINSICS", "TILE_METHODS"]
