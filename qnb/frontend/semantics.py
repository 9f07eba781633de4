"""Typing rules of the tile language: what each operator, intrinsic and method accepts
and the IR it builds.

A rule receives a :class:`~qnb.frontend.builder.Builder` (never the walker), asks
:mod:`qnb.frontend.typing_rules` what type the operation gives, and builds the IR. Each
intrinsic's and method's rule is bound to the stub a user reads in :mod:`qnb.language`
(``@rule(language.exp)``); :mod:`qnb.frontend.bindings` checks the two signatures
against each other when this module is imported.

The operators and the helpers every rule shares are in :mod:`qnb.frontend.operators`
(promotion and weak literals are described there); the rules the op registry drives
(math functions, reductions, scans) are in :mod:`qnb.frontend.op_rules`.
"""

from __future__ import annotations

import ast
import builtins
import contextlib

from qnb import ir, language, ops
from qnb.dtypes import as_dtype, bool_, f32, i32
from qnb.errors import QnbTypeError, QnbZeroDivisionError
from qnb.frontend import atomics, lists, op_rules, typing_rules
from qnb.frontend.bindings import Py, Rule, check_bindings, is_number, language_stubs, rule
from qnb.frontend.op_rules import MATH_RULES
from qnb.frontend.operators import (  # (re-exported: the walker's rooms read them as sem.*)
    array_arg,
    binary,
    cast_constant,
    dtype_arg,
    fill,
    fill_value,
    fold_or,
    int_arg,
    is_none,
    matmul,
    plus,
    typed,
    where,
)

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
    axis = int_arg(builder, axis, node, "axis")
    if axis not in (0, 1, 2):
        raise builder.error(QnbTypeError, f"axis must be 0, 1 or 2, got {axis}", node)
    return ir.ProgramId(ir.scalar(i32), builder.loc(node), which, axis)


def _minmax(builder, node, op, a, b):
    folded = fold_or(builder, node, [a, b], max if op == "max" else min)
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
    type_ = typed(builder, node, typing_rules.outer_type, u.type, v.type)
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
    dtype = i32 if is_none(dtype) else dtype_arg(builder, dtype, node)
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
    dtype = dtype_arg(builder, dtype, node)
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
    view = array_arg(builder, arr, node)
    if view.view_ndim != 2:
        raise builder.error(
            QnbTypeError,
            f"{name} needs a 2-D array (or a slab of a 3-D one), got a {view.view_ndim}-D array",
            node,
        )
    dtype = view.type.dtype if is_none(dtype) else dtype_arg(builder, dtype, node)
    row = builder.to_index(row, node, "row")
    col = builder.to_index(col, node, "col")
    loc = builder.loc(node)
    r1 = plus(row, shape[0], loc)
    c1 = plus(col, shape[1], loc)
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
    view = array_arg(builder, args[0], node)
    loc = builder.loc(node)
    vec_type = ir.vec(view.type.dtype, n)
    if view.view_ndim == 1 and len(args) == 2:
        # Vec[N].load(arr, start, *, other=0): start may be negative
        start = builder.to_index(args[1], node, "start")
        other = _other_arg(builder, kwargs.get("other", Py(0)), view.type.dtype, node, name)
        return ir.VecLoad(vec_type, loc, view, start, plus(start, n, loc), None, other, True)
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
        view = array_arg(builder, arr, node)
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
            plus(start, n, loc),
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
    view = array_arg(builder, args[0], node, "len()'s argument")
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
    f"qnb.{', '.join(ops.FLOAT_MATH)}, abs, maximum, minimum, "
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
    view = array_arg(builder, arr, node)
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
    view = array_arg(builder, args[0], node)
    rest = [builder.to_index(a, node, "store index") for a in args[1:]]
    loc = builder.loc(node)
    if value.type.kind == "vec":
        if view.view_ndim != 1 or len(rest) not in (1, 2):
            raise builder.error(QnbTypeError, "v.store(arr, start) stores into a 1-D array", node)
        start = rest[0]
        # v.store(arr, start) may start before the array (its elements there are skipped)
        stop = rest[1] if len(rest) == 2 else plus(start, value.type.shape[0], loc)
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
        window = (r0, plus(r0, m, loc), c0, plus(c0, n, loc))
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
        view = array_arg(builder, arr, node)
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
        stop = plus(start, value.type.shape[0], loc)
        value = builder.cast_elements(value, view.type.dtype)
        builder.emit(ir.VecStore(loc, value, view, start, stop, fixed, True, axis))
        return Py(None)

    store_line.__qualname__ = f"_m_store_line({axis})"
    return _bound(getattr(language.Vec16, name), before=vec_receiver)(store_line)


@_bound(language.Tile16.astype, language.Vec16.astype)
def _m_astype(builder, node, method, dtype):
    return builder.cast_elements(method.receiver, dtype_arg(builder, dtype, node))


def _m_line(which):
    def line(builder, node, method, index):
        tile = method.receiver
        type_ = typed(builder, node, typing_rules.line_type, tile.type, which)
        index = builder.to_index(index, node)
        return ir.RowCol(type_, builder.loc(node), which, tile, index)

    line.__qualname__ = f"_m_line({which!r})"
    return _bound(getattr(language.Tile16, which))(line)


@_bound(language.Tile16.eye_)
def _m_eye_(builder, node, method):
    tile = method.receiver
    typed(builder, node, typing_rules.check_square, tile.type, "eye_")
    value = fill(builder, "tile", "eye", None, tile.type.dtype, node, tile.type.shape)
    return _assign_in_place(builder, _receiver_var(builder, method, node), value, node)


@_bound(language.Tile16.cholesky_)
def _m_cholesky_(builder, node, method, eps=0.0):
    tile = method.receiver
    typed(builder, node, typing_rules.check_cholesky, tile.type)
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
    dtype = typed(builder, node, typing_rules.solve_triangular_dtype, factor.type, rhs.type)
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
    **op_rules.METHODS,
    "row": _m_line("row"),
    "col": _m_line("col"),
    "eye_": _m_eye_,
    "cholesky_": _m_cholesky_,
    "solve_triangular_": _m_solve_triangular_,
}

# ---------------------------------------------------------------------------- the binding check

RULES.extend(atomics.RULES)
RULES.extend(op_rules.RULES)
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
