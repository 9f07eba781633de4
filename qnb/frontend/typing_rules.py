"""What type each operation gives: pure functions of IR types.

Nothing here sees the AST, the walker or a value: each function takes ``ir.Type``\\s
(and the compile-time facts an op has, such as an axis) and returns a type or a dtype,
or raises :class:`TypeRefusal` whose message is the error the user reads. The rules in
:mod:`qnb.frontend.semantics` ask these, then build the IR.

Promotion: bool < i32 < f16, bf16 < f32 < f64 (``qnb.dtypes.promote``). Bools compute
arithmetic, shifts, ordering and reductions as i32; ``/`` of integers computes in f32.
"""

from __future__ import annotations

from qnb import ir, ops
from qnb.dtypes import DType, bf16, bool_, f16, f32, i32, promote

COMPARISONS = ("lt", "le", "gt", "ge", "eq", "ne")
BITWISE = ("and", "or", "xor", "shl", "shr")
_BITWISE_SPELLING = {"and": "&", "or": "|", "xor": "^", "shl": "<<", "shr": ">>"}
I32_MIN, I32_MAX = -(2**31), 2**31 - 1


class TypeRefusal(Exception):
    """An operation its operands' types do not allow; ``str()`` is the user's message."""


# ---------------------------------------------------------------------------- literals


def constant_dtype(value, hint: DType | None = None) -> DType:
    """The dtype of a Python number in a kernel; ``hint`` is the weak-typing hint (the
    dtype of the typed operand it meets)."""
    if isinstance(value, bool):
        return hint if hint is not None else bool_
    if isinstance(value, int):
        chosen = hint if hint is not None and hint is not bool_ else i32
        if chosen is i32 and not I32_MIN <= value <= I32_MAX:
            raise TypeRefusal(f"the integer {value} does not fit in i32")
        return chosen
    return hint if hint is not None and hint.is_float else f32


def weak_dtype(value, other: DType) -> DType:
    """The dtype a Python literal takes next to an operand of dtype ``other``: that one,
    except that a float next to an integer or bool gives f32, and a number other than a
    bool next to a bool gives i32 (an int) or f32 (a float)."""
    if isinstance(value, float) and not other.is_float:
        return f32
    if isinstance(value, bool) and other is bool_:
        return bool_
    if other is bool_:
        return f32 if isinstance(value, float) else i32
    return other


# ---------------------------------------------------------------------------- elementwise


def broadcast(*types: ir.Type) -> tuple[int, ...]:
    """NumPy's broadcast of the types' shapes (a vec is a 1-D array, a scalar has no
    shape)."""
    shape: tuple[int, ...] = ()
    first = None
    for type_ in types:
        if type_.kind == "scalar":
            continue
        joined = ir.broadcast_shape(shape, type_.shape)
        if joined is None:
            raise TypeRefusal(
                f"a {first.shape_name} and a {type_.shape_name} do not broadcast "
                f"together (shapes {first.shape} and {type_.shape}, by NumPy's "
                "rules: v[:, None] is a column, v[None, :] a row, a side of 1 stretches)"
            )
        shape = joined
        first = type_ if first is None else first
    return shape


def binary_dtypes(op: str, dtype: DType) -> tuple[tuple[DType, ...], DType]:
    """For a binary ``op`` ("add", "lt", "shl" …) on operands of the common dtype
    ``dtype``: the dtypes both operands are converted through, in order (bool / bool
    goes through i32 to f32), and the result's dtype."""
    if op in COMPARISONS:
        through = (i32,) if dtype is bool_ and op not in ("eq", "ne") else ()
        return through, bool_
    if op in BITWISE:
        if dtype.is_float:
            operands = "i32 or bool" if op in ("and", "or", "xor") else "i32"
            raise TypeRefusal(
                f"the operator {_BITWISE_SPELLING[op]} needs {operands} operands, not {dtype} "
                f"(convert with .astype(qnb.i32) or qnb.i32(x) first)"
            )
        if dtype is bool_ and op in ("shl", "shr"):
            return (i32,), i32
        return (), dtype
    through: tuple[DType, ...] = ()
    if dtype is bool_:
        through, dtype = (i32,), i32
    if op == "div" and not dtype.is_float:
        through, dtype = (*through, f32), f32
    return through, dtype


def power_dtypes(dtype: DType, exponent) -> tuple[DType, ...]:
    """The dtypes both sides of ``**`` are converted through (the last is the result's):
    bools compute in i32; an integer to a negative literal ``exponent`` gives f32, as
    Python gives a float. ``exponent`` is the literal, or None for a runtime value."""
    through: tuple[DType, ...] = ()
    if dtype is bool_:
        through, dtype = (i32,), i32
    if not dtype.is_float and isinstance(exponent, int) and exponent < 0:
        through = (*through, f32)
    return through


def invert_op(type_: ir.Type) -> str:
    """The unary op of ``~x``: "not" on bools (as NumPy's ``~`` on a bool array),
    "invert" on i32."""
    if type_.dtype is bool_:
        return "not"
    if type_.dtype is not i32:
        raise TypeRefusal(f"~ needs an i32 or bool operand, not {type_.dtype}")
    return "invert"


def math_dtype(op: str, dtype: DType) -> DType:
    """The dtype ``op`` ("exp", "abs" …) computes in: floats keep theirs, integers
    compute in f32; an op typed "same" in the registry (``abs``) keeps any dtype but bool."""
    if dtype is bool_:
        raise TypeRefusal(f"{op} is not defined for bool values")
    if ops.MATH[op].typing == "same" or dtype.is_float:
        return dtype
    return f32


# ---------------------------------------------------------------------------- linear algebra


def matmul_type(a: ir.Type, b: ir.Type) -> tuple[DType, ir.Type]:
    """``a @ b``: the dtype both tiles are converted to, and the result's type (f16 and
    bf16 products accumulate in f32)."""
    if a.kind != "tile" or b.kind != "tile":
        raise TypeRefusal(f"@ multiplies two tiles (Tile[M, K] @ Tile[K, N]), got {a} @ {b}")
    (m, k), (k2, n) = a.shape, b.shape
    if k != k2:
        raise TypeRefusal(
            f"@ needs Tile[M, K] @ Tile[K, N]: a {a.shape_name} @ a {b.shape_name} has "
            f"{k} columns on the left and {k2} rows on the right"
        )
    dtype = promote(a.dtype, b.dtype)
    if dtype is bool_:
        raise TypeRefusal("@ is not defined for bool tiles")
    out = f32 if dtype in (f16, bf16) else dtype
    return dtype, ir.tile(out, (m, n))


def check_accumulator(acc: ir.Type, a: ir.Type, b: ir.Type, dtype: DType, out: ir.Type):
    """Refuse ``acc`` as the accumulator of ``mma(a, b, acc)`` (tiles of ``dtype``
    whose product is ``out``) unless it is an ``out``-shaped tile whose dtype ``out``'s
    holds."""
    if acc.kind != "tile" or acc.shape != out.shape:
        raise TypeRefusal(
            f"the accumulator of mma({a.shape_name}, {b.shape_name}) must be a "
            f"{out.shape_name}, got {acc}"
        )
    if acc.dtype is not out.dtype and promote(acc.dtype, out.dtype) is not out.dtype:
        raise TypeRefusal(
            f"mma of {dtype} tiles accumulates in {out.dtype}; the accumulator is {acc.dtype}"
        )


def outer_type(u: ir.Type, v: ir.Type) -> ir.Type:
    """``qnb.outer(u, v)``: a tile of ``len(u)`` × ``len(v)`` (bools multiply as i32)."""
    if u.kind != "vec" or v.kind != "vec":
        raise TypeRefusal(f"qnb.outer takes two vecs, got {u} and {v}")
    shape = (u.shape[0], v.shape[0])
    if shape[0] * shape[1] > ir.MAX_TILE_ELEMENTS:
        raise TypeRefusal(
            f"qnb.outer of a {u.shape_name} and a {v.shape_name} would be a "
            f"Tile[{shape[0]}, {shape[1]}], more than a tile's {ir.MAX_TILE_ELEMENTS} elements"
        )
    dtype = promote(u.dtype, v.dtype)
    return ir.tile(i32 if dtype is bool_ else dtype, shape)


def check_square(type_: ir.Type, name: str):
    """Refuse anything but a square tile for the method ``name``."""
    if type_.kind != "tile":
        raise TypeRefusal(f"{name} is a method of square tiles, not of a {type_}")
    m, n = type_.shape
    if m != n:
        raise TypeRefusal(f"{name} needs a square tile; this one is a {type_.shape_name}")


def check_cholesky(type_: ir.Type):
    """Refuse anything but a square float tile for ``t.cholesky_``."""
    if type_.kind != "tile" or not type_.dtype.is_float:
        name = "Tile16" if type_.kind != "tile" else type_.shape_name
        raise TypeRefusal(f"cholesky_ needs a float {name}, got {type_}")
    check_square(type_, "cholesky_")


def solve_triangular_dtype(factor: ir.Type, rhs: ir.Type) -> DType:
    """``L.solve_triangular_(B)``: the dtype L is converted to (B's: B is overwritten)."""
    if factor.kind != "tile" or rhs.kind != "tile":
        raise TypeRefusal("solve_triangular_ works on tiles")
    check_square(factor, "solve_triangular_")
    if rhs.shape[1] != factor.shape[0]:
        raise TypeRefusal(
            f"L.solve_triangular_(B) needs L: Tile[N, N] and B: Tile[M, N]; L is a "
            f"{factor.shape_name} and B a {rhs.shape_name}"
        )
    dtype = promote(factor.dtype, rhs.dtype)
    if not dtype.is_float:
        raise TypeRefusal("solve_triangular_ needs float tiles")
    if rhs.dtype is not dtype:
        raise TypeRefusal(f"B is {rhs.dtype} but L is {factor.dtype}")
    return dtype


# ---------------------------------------------------------------------------- reductions


def reduce_axis(type_: ir.Type, axis):
    """A reduction's axis (None, 0, 1, -1 or -2) as the IR counts it: None (all of a
    tile), 0 or 1 (a tile's), "vec" (all of a vec)."""
    if type_.kind == "vec":
        if axis not in (None, 0, -1):
            raise TypeRefusal(f"a {type_.shape_name} reduces over axis None or 0")
        return "vec"
    return axis + 2 if axis is not None and axis < 0 else axis


def reduce_dtype(dtype: DType) -> DType:
    """The dtype a reduction of ``dtype`` elements computes in (bools count as i32)."""
    return i32 if dtype is bool_ else dtype


def reduce_type(type_: ir.Type, axis) -> ir.Type:
    """The result of reducing ``type_`` over ``axis`` (as :func:`reduce_axis` gives it):
    a scalar for all of it, else the vec of the other axis."""
    dtype = reduce_dtype(type_.dtype)
    if axis in (None, "vec"):
        return ir.scalar(dtype)
    m, n = type_.shape
    return ir.vec(dtype, n if axis == 0 else m)


def scan_axis(type_: ir.Type, axis):
    """A scan's axis as the IR counts it: 0 or 1 for a tile (required: NumPy's None would
    flatten the tile), None for a vec (``axis`` None or 0)."""
    if type_.kind == "vec":
        if axis not in (None, 0, -1):
            raise TypeRefusal(f"a {type_.shape_name} scans over axis None or 0")
        return None
    if type(axis) is not int or axis not in (0, 1, -1, -2):
        raise TypeRefusal(
            f"a {type_.shape_name} scans along axis 0 or 1 (NumPy's axis None would flatten it)"
        )
    return axis + 2 if axis < 0 else axis


def keepdims_type(type_: ir.Type, axis) -> ir.Type:
    """The result of reducing ``type_`` over ``axis`` with ``keepdims=True``: the reduced
    sides become 1."""
    dtype = reduce_dtype(type_.dtype)
    if axis in (None, "vec"):
        return ir.value_type(dtype, (1,) * len(type_.shape))
    m, n = type_.shape
    return ir.tile(dtype, (1, n) if axis == 0 else (m, 1))


def line_type(type_: ir.Type, which: str) -> ir.Type:
    """``t.row(i)`` (``which`` "row") or ``t.col(j)``: a vec of the tile's width or
    height."""
    if type_.kind != "tile":
        raise TypeRefusal(f".{which}() is a tile method, not one of a {type_}")
    m, n = type_.shape
    return ir.vec(type_.dtype, n if which == "row" else m)


def fill_type(kind: str, dtype: DType, shape: tuple[int, ...] | None = None) -> ir.Type:
    """The type of a new tile or vec (``kind``) of ``shape`` (default: Tile16 / Vec16)."""
    if shape is None:
        shape = (ir.TILE, ir.TILE) if kind == "tile" else (ir.TILE,)
    return ir.tile(dtype, shape) if kind == "tile" else ir.vec(dtype, shape[0])
