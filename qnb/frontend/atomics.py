"""The typing rules of ``qnb.atomic_add``, ``qnb.atomic_max`` and ``qnb.atomic_min``.

Each becomes one :class:`qnb.ir.Atomic` statement whose indices and value all have one
shape (scalars stay scalars; a vec or tile is stretched by NumPy's broadcast, a scalar
filled to the shape), so a backend sees one element per update. The scalar form returns
the element's old value through a fresh local. :mod:`qnb.frontend.semantics` adds
:data:`RULES` to its own before the binding check.
"""

from __future__ import annotations

from qnb import ir, language
from qnb.dtypes import f32, f64, i32
from qnb.errors import QnbTypeError
from qnb.frontend import typing_rules
from qnb.frontend.bindings import Py, Rule, rule

ATOMIC_DTYPES = (i32, f32, f64)
RULES: list[Rule] = []


def _atomic(op):
    name = f"qnb.atomic_{op}"

    def atomic(builder, node, target, arr, index, value):
        return lower_atomic(builder, node, op, name, arr, index, value)

    atomic.__qualname__ = f"_atomic({op!r})"
    bound = rule(getattr(language, f"atomic_{op}"), name=name)(atomic)
    RULES.append(bound)
    return bound


def lower_atomic(builder, node, op, name, arr, index, value):
    if not isinstance(arr, ir.ArrayView):
        raise builder.error(QnbTypeError, f"{name}'s first argument must be an array", node)
    dtype = arr.type.dtype
    if dtype not in ATOMIC_DTYPES:
        raise builder.error(
            QnbTypeError,
            f"{name} works on i32 and f32 arrays (and f64 on cpu and cuda), not on "
            f"{dtype.name} ({arr.param!r})",
            node,
        )
    indices = _indices(builder, node, name, arr, index)
    val = builder.require_value(value, node)
    if val.type.dtype.is_float and not dtype.is_float:
        raise builder.error(
            QnbTypeError,
            f"{name} into the {dtype.name} array {arr.param!r} needs an integer value, "
            f"not {val.type.dtype.name}",
            node,
        )
    try:
        shape = typing_rules.broadcast(*[i.type for i in indices], val.type)
    except typing_rules.TypeRefusal as refusal:
        raise builder.error(QnbTypeError, f"{name}: {refusal}", node) from None
    loc = builder.loc(node)
    indices = [_shaped(builder, i, shape, node) for i in indices]
    val = _shaped(builder, builder.cast_elements(val, dtype), shape, node)
    result = None
    if not shape:
        result = builder.temporary(f"old_{op}", f"{name}(…)", ir.scalar(dtype))
    builder.emit(ir.Atomic(loc, op, arr, indices, val, result))
    if result is None:
        return Py(None)
    return ir.Var(ir.scalar(dtype), loc, result)


def _indices(builder, node, name, arr, index) -> list[ir.Expr]:
    ndim = arr.view_ndim
    if isinstance(index, Py) and isinstance(index.value, tuple):
        index = tuple(Py(v) for v in index.value)
    if isinstance(index, tuple):
        if ndim != len(index):
            raise builder.error(
                QnbTypeError,
                f"{name} into the {ndim}-D array {arr.param!r} takes "
                + (
                    "one index (a scalar, vec or tile), not a tuple"
                    if ndim == 1
                    else f"a tuple of {ndim} indices, not {len(index)}"
                ),
                node,
            )
        parts = list(index)
    elif ndim != 1:
        raise builder.error(
            QnbTypeError,
            f"{name} into the {ndim}-D array {arr.param!r} takes a tuple (rows, cols) of indices",
            node,
        )
    else:
        parts = [index]
    out = []
    for part in parts:
        expr = builder.require_value(part, node)
        if expr.type.dtype is not i32:
            raise builder.error(
                QnbTypeError,
                f"{name}'s index must be i32 (a scalar, vec or tile of element indices), "
                f"not {expr.type.dtype.name}",
                node,
            )
        out.append(expr)
    return out


def _shaped(builder, expr, shape, node) -> ir.Expr:
    """``expr`` with the shape ``shape`` (a scalar filled, a vec or tile stretched)."""
    if not shape or expr.type.shape == shape:
        return expr
    type_ = ir.value_type(expr.type.dtype, shape)
    if expr.type.kind == "scalar":
        return ir.TileFill(type_, expr.loc, "full", expr)
    return ir.Broadcast(type_, expr.loc, expr)


ATOMIC_RULES = {op: _atomic(op) for op in ("add", "max", "min")}
