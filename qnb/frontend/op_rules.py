"""The typing rules the op registry (:mod:`qnb.ops`) drives: each math function
(``qnb.exp(x)``) and each reduction (``t.sum(axis, keepdims)``) with its running form
(``t.cumsum(axis)``), one rule per registry entry, plus the reductions built from them
(``mean``, ``argmax``/``argmin``). :mod:`qnb.frontend.semantics` adds :data:`RULES` to its
own before the binding check, and :data:`METHODS` to its table of tile methods.
"""

from __future__ import annotations

from qnb import ir, language, ops
from qnb.dtypes import bool_, f32, f64, i32
from qnb.errors import QnbTypeError
from qnb.frontend import typing_rules
from qnb.frontend.bindings import Py, Rule, is_number, rule
from qnb.frontend.operators import binary, fill, fold_or, typed, where

RULES: list[Rule] = []


def _bound(*stubs, **options):
    """@rule(*stubs, **options), the rule kept in RULES."""

    def keep(fn) -> Rule:
        bound = rule(*stubs, **options)(fn)
        RULES.append(bound)
        return bound

    return keep


# ---------------------------------------------------------------------------- math functions


def _math(op: ops.MathOp):
    """``qnb.<op>(x)``: a compile-time number folds (:meth:`qnb.ops.MathOp.folded`, NumPy's
    f64 ufunc, so a folded value is what the function gives on an f64 tile: ``qnb.exp2(3)``
    is 8.0, ``qnb.floor(2.5)`` 2.0); a value becomes an :class:`ir.Unary` in the dtype
    the op computes in."""

    def fold(x):
        if not is_number(x):
            raise TypeError(f"{op.name} needs a number, got {x!r}")
        return op.folded(x)

    def unary_math(builder, node, target, x):
        folded = fold_or(builder, node, [x], fold)
        if folded is not None:
            return folded
        expr = builder.require_value(x, node)
        dtype = typed(builder, node, typing_rules.math_dtype, op.name, expr.type.dtype)
        expr = builder.cast_elements(expr, dtype)
        return ir.Unary(expr.type, builder.loc(node), op.name, expr)

    unary_math.__qualname__ = f"_math({op.name!r})"
    return _bound(getattr(language, op.name))(unary_math)


MATH_RULES = {name: _math(op) for name, op in ops.MATH.items()}


# ---------------------------------------------------------------------------- reductions


def _reduction(builder, node, tile, op, axis, keepdims):
    """``tile.op(axis, keepdims)`` for ``op`` a reduction of the registry. ``axis`` is a
    compile-time None or int (``1.0`` and ``True`` are not axes: NumPy refuses them)."""
    if not isinstance(axis, Py) or not (
        axis.value is None or (type(axis.value) is int and axis.value in (0, 1, -1, -2))
    ):
        raise builder.error(QnbTypeError, "axis must be None, 0 or 1", node)
    if not isinstance(keepdims, Py) or not isinstance(keepdims.value, bool):
        raise builder.error(QnbTypeError, "keepdims must be a compile-time True or False", node)
    axis = typed(builder, node, typing_rules.reduce_axis, tile.type, axis.value)
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
    """``cum<op>`` (``cumsum``, ``cumprod``): an :class:`ir.Scan` of the tile or vec (bools
    as i32)."""

    def scan(builder, node, method, axis=None):
        tile = method.receiver
        if not isinstance(axis, Py) or type(axis.value) not in (int, type(None)):
            raise builder.error(QnbTypeError, "axis must be a compile-time 0 or 1", node)
        axis = typed(builder, node, typing_rules.scan_axis, tile.type, axis.value)
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


METHODS = {
    **{name: _m_reduce(name) for name in ops.REDUCTIONS},
    "mean": _m_mean,
    "argmax": _m_index("argmax"),
    "argmin": _m_index("argmin"),
    **{scan: _m_scan(name) for scan, name in ops.SCANS.items()},
}
