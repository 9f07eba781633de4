"""The typed tile IR: what the front end produces and every backend consumes.

A kernel becomes a :class:`KernelIR`: its runtime parameters (arrays and scalars;
``Template`` values and captured constants are already folded in) and a body of
structured statements. The IR is fully typed and specialised: every expression has
a :class:`Type`, every operand of a binary op already has the result's dtype (the
front end inserts :class:`Cast`), and compile-time branches are already pruned.

Meaning of the program model (the cpu backend is the executable definition):

- A kernel runs once per *program* of the launch grid. Scalars are uniform within
  a program. A ``tile`` is an M×N value and a ``vec`` an N-vector (the shape is part
  of the :class:`Type`: M, N powers of two, see :data:`MAX_TILE_SIDE`), both owned by
  the whole program. Element ``[i, j]`` of a tile is element ``i * N + j`` of its
  row-major flat order, which :class:`Reshape` keeps. Values are *values*: assignment copies, in-place user ops
  (``t.load_``, ``t.eye_()``, ``t += …``) are lowered to ``Assign(t, op(t, …))``.
- Arrays are runtime parameters. ``ArrayView(param, batch)`` names a whole array
  (``batch is None``) or the 2-D slab ``arr[batch]`` of a 3-D array; ``view_ndim``
  is the rank an op sees. Nothing outside an array is ever read or written:
  tile/vec loads read 0 there, stores skip it, and scalar ``ArrayLoad``/``ArrayStore``
  out of bounds raise ``QnbIndexError`` on cpu (GPU backends read 0 / skip).
- Windows: ``LoadWindow(base, view, r0, r1, c0, c1)`` sets ``t[i,j] = a[r0+i, c0+j]``
  where ``r0+i < min(r1, rows)`` and ``c0+j < min(c1, cols)`` (and the index is
  ≥ 0); other elements keep ``base``. The elements read are converted to the tile's
  dtype (``base``'s) as ``astype`` does. ``StoreWindow`` is the mirror image.
- Padded loads and stores: ``Tile[M, N].load(a, row, col, other=x, dtype=d)`` is a
  ``LoadWindow`` with ``base`` the tile full of ``x`` (of dtype ``d``, else the array's),
  r1 = row+M, c1 = col+N and ``padded=True``; ``t.store(a, row, col)`` is a
  ``padded`` ``StoreWindow``; ``Vec[N].load(a, start, other=x)`` a ``padded`` ``VecLoad``
  with ``other`` (and ``load_row``/``load_col`` one with ``axis``). A padded op's bounds may be negative: the elements before the array's
  first row or column do not exist (a load gives them ``base``/``other``, a store skips
  them), on every backend, with no error. An unpadded window (``t.load_``, the slice
  forms) with a negative bound is an error: ``QnbIndexError`` on cpu and in debug mode.

Every node carries ``loc``: where in the user's source it came from, as
(unit, line, col) with ``unit`` an index into ``KernelIR.units`` (0 is the kernel,
then each inlined ``@qnb.func``) and ``line`` relative to that unit's ``def`` line
(1-based), so the IR (and code rendered from it) does not depend on which file or
notebook cell the kernel lives in.
"""

from __future__ import annotations

import copy
import math
from dataclasses import MISSING, dataclass, field, fields
from operator import attrgetter

from qnb import ops
from qnb.dtypes import DType, as_dtype
from qnb.loc import Loc

TILE = 16  # the side of Tile16 (the quadrants-compatible forms)
MAX_TILE_SIDE = 128  # M and N of a tile: powers of two from 1 to this
MAX_TILE_ELEMENTS = 16384  # M * N of a tile, and N of a vec: at most this


def valid_side(n) -> bool:
    """Whether ``n`` is a power of two (1, 2, 4, ...)."""
    return isinstance(n, int) and not isinstance(n, bool) and n >= 1 and n & (n - 1) == 0


@dataclass(frozen=True, slots=True)
class Type:
    """``kind`` is "scalar", "tile" (``shape == (M, N)``), "vec" (``shape == (N,)``) or
    "array" (with ``ndim``; its shape is a runtime value)."""

    kind: str
    dtype: DType
    ndim: int = 0
    shape: tuple[int, ...] = ()

    def __str__(self) -> str:
        if self.kind == "scalar":
            return self.dtype.name
        if self.kind == "array":
            return f"Array[{self.dtype.name}, {self.ndim}]"
        return f"{self.shape_name}[{self.dtype.name}]"

    @property
    def shape_name(self) -> str:
        """How the language spells a tile or vec type: ``Tile16``/``Tile32``/``Vec16``/
        ``Vec32`` for those shapes (the same objects as ``Tile[16, 16]`` …), else
        ``Tile[M, N]`` / ``Vec[N]``."""
        if self.kind == "tile":
            m, n = self.shape
            return f"Tile{m}" if m == n and m in (16, 32) else f"Tile[{m}, {n}]"
        return f"Vec{self.shape[0]}" if self.shape[0] in (16, 32) else f"Vec[{self.shape[0]}]"

    def with_dtype(self, dtype: DType) -> Type:
        return Type(self.kind, dtype, self.ndim, self.shape)

    @property
    def size(self) -> int:
        """The number of elements of a tile or vec (1 for a scalar)."""
        return math.prod(self.shape)


def scalar(dtype) -> Type:
    return Type("scalar", as_dtype(dtype))


def tile(dtype, shape: tuple[int, int] = (TILE, TILE)) -> Type:
    return Type("tile", as_dtype(dtype), 0, (int(shape[0]), int(shape[1])))


def vec(dtype, n: int = TILE) -> Type:
    return Type("vec", as_dtype(dtype), 0, (int(n),))


def broadcast_shape(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...] | None:
    """NumPy's broadcast of two shapes (a vec is a 1-D shape, a scalar ``()``), or None
    where they do not broadcast."""
    rank = max(len(a), len(b))
    a = (1,) * (rank - len(a)) + a
    b = (1,) * (rank - len(b)) + b
    if any(x != y and 1 not in (x, y) for x, y in zip(a, b)):
        return None
    return tuple(max(x, y) for x, y in zip(a, b))


def value_type(dtype, shape: tuple[int, ...]) -> Type:
    """The scalar, vec or tile type of ``shape`` (rank 0, 1 or 2)."""
    if len(shape) == 0:
        return scalar(dtype)
    if len(shape) == 1:
        return vec(dtype, shape[0])
    return tile(dtype, shape)


# --------------------------------------------------------------------------- expressions


@dataclass(slots=True, eq=False)
class Expr:
    type: Type
    loc: Loc | None


@dataclass(slots=True, eq=False)
class Const(Expr):
    """A scalar literal of ``type`` (bool, int or float Python value)."""

    value: object


@dataclass(slots=True, eq=False)
class Var(Expr):
    """A local variable or a scalar parameter."""

    name: str


@dataclass(slots=True, eq=False)
class ProgramId(Expr):
    """``program_id(axis)`` (``which == "id"``) or ``num_programs(axis)`` (``"count"``)."""

    which: str
    axis: int


# Unary ops: "neg", "not" (bool scalar/tile: ``not``, and ``~`` on bools), "invert"
# (i32: bitwise not, ``~x == -x - 1``), and the math functions of the op registry
# (qnb.ops.MATH: "abs", "exp", "exp2", "log", … "trunc"), each NumPy's ufunc of that name
# at the operand's dtype (f16 computes in f32 and rounds once). NaN and
# ±inf go through them as through NumPy's (``exp2(-inf) == 0``, ``tanh(±inf) == ±1``,
# ``log2(0) == -inf``, ``sin(inf)`` is NaN, ``floor``/``ceil`` keep ±inf and NaN).
UNARY_OPS = ("neg", "not", "invert", *ops.MATH)  # (the math functions: the op registry's)
MATH_OPS = ops.FLOAT_MATH


@dataclass(slots=True, eq=False)
class Unary(Expr):
    op: str
    operand: Expr


# Binary ops on scalars, tiles and vecs, elementwise with scalar broadcast. Operands
# have the result dtype (for comparisons, a common dtype; the result is bool).
# "div" is true division (float only), "floordiv" and "mod" follow Python (floor)
# semantics, "and"/"or"/"xor" are elementwise bitwise (``& | ^``) on bool (tile masks)
# or i32 operands. "shl"/"shr" (``<< >>``, i32 only) are NumPy's shifts for every count:
# a count outside 0..31 (negative ones included, which NumPy reads as huge unsigned
# counts) gives 0 for ``<<`` and the sign (0 or -1) for ``>>``; ``>>`` is arithmetic.
ARITH_OPS = ("add", "sub", "mul", "div", "floordiv", "mod", "max", "min", "pow")
COMPARE_OPS = ("lt", "le", "gt", "ge", "eq", "ne")
BOOL_OPS = ("and", "or", "xor")
SHIFT_OPS = ("shl", "shr")


@dataclass(slots=True, eq=False)
class Binary(Expr):
    op: str
    left: Expr
    right: Expr


@dataclass(slots=True, eq=False)
class Logical(Expr):
    """Short-circuit ``and``/``or`` on bool scalars: ``right`` is evaluated only
    where ``left`` does not decide the result."""

    op: str
    left: Expr
    right: Expr


@dataclass(slots=True, eq=False)
class Select(Expr):
    """``where(cond, a, b)``; cond is bool (scalar, or the shape of the result)."""

    cond: Expr
    if_true: Expr
    if_false: Expr


@dataclass(slots=True, eq=False)
class Cast(Expr):
    """Convert to ``type.dtype`` (same kind). float→int truncates toward zero."""

    operand: Expr


@dataclass(slots=True, eq=False)
class ArrayView:
    """An array parameter, or the 2-D slab ``param[batch]`` of a 3-D array."""

    param: str
    type: Type  # the parameter's array type
    batch: Expr | None = None

    @property
    def view_ndim(self) -> int:
        return self.type.ndim - (1 if self.batch is not None else 0)


@dataclass(slots=True, eq=False)
class ArrayLoad(Expr):
    """Scalar element read ``view[indices]`` (len(indices) == view.view_ndim)."""

    view: ArrayView
    indices: list[Expr]


@dataclass(slots=True, eq=False)
class ArrayDim(Expr):
    """``param.shape[axis]`` of the whole array parameter (i32)."""

    param: str
    axis: int


@dataclass(slots=True, eq=False)
class TileFill(Expr):
    """A new tile or vec: kind "full" (all ``value``), "eye" (square tiles only; value
    unused) or "arange" (vecs only, ``v[i] = i`` in the vec's dtype; value unused).
    zeros/ones are "full" with 0/1."""

    kind: str
    value: Expr | None


@dataclass(slots=True, eq=False)
class LoadWindow(Expr):
    """Tile window load on a 2-D view (see module doc). ``base`` is the tile the
    elements outside the window keep; ``padded``: negative bounds allowed."""

    base: Expr
    view: ArrayView
    r0: Expr
    r1: Expr
    c0: Expr
    c1: Expr
    padded: bool = False


@dataclass(slots=True, eq=False)
class VecLoad(Expr):
    """Vec load. 2-D view, ``axis`` 0 (a column): ``v[i] = a[start+i, col]`` where
    ``start+i < min(stop, rows)``; ``axis`` 1 (a row, ``col`` is then the fixed *row*):
    ``v[j] = a[col, start+j]`` where ``start+j < min(stop, cols)``. 1-D view (``col is
    None``): ``v[i] = a[start+i]`` where ``start+i < min(stop, len)``. Elsewhere (and
    where the fixed index is outside the array) ``other`` (a scalar of the vec's dtype;
    None: 0). The elements read are converted to the vec's dtype. ``padded``: ``start``
    and the fixed index may be negative (see the module doc)."""

    view: ArrayView
    start: Expr
    stop: Expr
    col: Expr | None
    other: Expr | None = None
    padded: bool = False
    axis: int = 0


@dataclass(slots=True, eq=False)
class TileGet(Expr):
    """``t[i, j]`` (tile) or ``v[i]`` (vec, ``j is None``) → scalar."""

    base: Expr
    i: Expr
    j: Expr | None


@dataclass(slots=True, eq=False)
class TileSet(Expr):
    """A copy of ``base`` with element ``[i, j]`` (or ``[i]``) set to ``value``."""

    base: Expr
    i: Expr
    j: Expr | None
    value: Expr


@dataclass(slots=True, eq=False)
class Transpose(Expr):
    """``t.T``: Tile[M, N] → Tile[N, M]."""

    operand: Expr


@dataclass(slots=True, eq=False)
class Reshape(Expr):
    """The operand's elements in the same row-major order, as ``type.shape`` (same
    size): ``v[:, None]`` (Vec[N] → Tile[N, 1]), ``v[None, :]`` (→ Tile[1, N]), a
    ``keepdims`` reduction's vec as Tile[M, 1] / Tile[1, N], and back."""

    operand: Expr


@dataclass(slots=True, eq=False)
class Broadcast(Expr):
    """The operand (a vec or tile) stretched to ``type.shape`` by NumPy's rules (a vec
    is a 1-D array: Vec[N] → Tile[M, N] repeats it as every row; a side of 1 repeats
    along that side). The front end makes every tile/vec operand of an elementwise op
    the result's shape with this node, so backends see only equal shapes or scalars."""

    operand: Expr


@dataclass(slots=True, eq=False)
class Reduce(Expr):
    """op in "sum", "max", "min". axis None → scalar; 0 → Vec[N] over rows
    (``v[j] = op_i t[i, j]``); 1 → Vec[M] over columns (``v[i] = op_j t[i, j]``).
    The operand may also be a vec (then axis is None: the scalar over its elements).
    ``keepdims`` is a :class:`Reshape` of the vec.
    Bool operands are cast to i32 by the front end."""

    op: str
    operand: Expr
    axis: int | None


@dataclass(slots=True, eq=False)
class Scan(Expr):
    """``cumsum`` (op "sum") or ``cumprod`` ("prod"): the inclusive running sum or product
    along ``axis`` (0: down each column, 1: along each row; None: along a vec), the
    operand's shape and dtype, combined in order from the line's start. f16 and bf16
    accumulate in f32 and round each element; i32 wraps. Bool operands are cast to i32
    by the front end."""

    op: str
    operand: Expr
    axis: int | None


@dataclass(slots=True, eq=False)
class IndexReduce(Expr):
    """``argmax``/``argmin`` (``op``) along ``axis`` as :class:`Reduce`'s axes: the first
    index of the extreme (a NaN counts as the extreme, as in NumPy; axis None → the flat
    C-order index), an i32. ``spelled`` is the same value built from the reductions
    every backend has (the extreme, the elements equal to it, the least index among
    them): a backend without an index reduction of its own evaluates that; the cpu
    runs NumPy's ``argmax``/``argmin`` on ``operand``. Bool operands are cast to i32
    by the front end."""

    op: str
    operand: Expr
    axis: int | None
    spelled: Expr


@dataclass(slots=True, eq=False)
class Matmul(Expr):
    """``acc + a @ b`` for Tile[M, K] @ Tile[K, N] → Tile[M, N] (``acc`` may be None). f16 inputs multiply exactly and
    accumulate in f32; the result (and ``acc``) is f32 then. f32→f32, f64→f64."""

    a: Expr
    b: Expr
    acc: Expr | None


@dataclass(slots=True, eq=False)
class Outer(Expr):
    """``t[i, j] = u[i] * v[j]``: Vec[M], Vec[N] → Tile[M, N]."""

    u: Expr
    v: Expr


@dataclass(slots=True, eq=False)
class RowCol(Expr):
    """``t.row(index)`` (which "row", → Vec[N]) or ``t.col(index)`` ("col", → Vec[M])."""

    which: str
    operand: Expr
    index: Expr


@dataclass(slots=True, eq=False)
class Cholesky(Expr):
    """(Square tiles.) Lower-triangular L with L Lᵀ = t (left-looking, column by column):
    ``L[j,j] = sqrt(max(t[j,j] - Σ_{k<j} L[j,k]², eps))``,
    ``L[i,j] = (t[i,j] - Σ_{k<j} L[i,k] L[j,k]) / L[j,j]`` for i > j,
    strict upper triangle 0."""

    operand: Expr
    eps: Expr


@dataclass(slots=True, eq=False)
class SolveTriangular(Expr):
    """X with ``X @ L.T == B`` (L: Tile[N, N], B and X: Tile[M, N]) for lower-triangular L (forward substitution by
    columns: ``X[:, k] = (B[:, k] - Σ_{m<k} X[:, m] L[k, m]) / L[k, k]``)."""

    lower: Expr
    rhs: Expr


# --------------------------------------------------------------------------- statements


@dataclass(slots=True, eq=False)
class Stmt:
    loc: Loc | None


@dataclass(slots=True, eq=False)
class Assign(Stmt):
    name: str
    value: Expr


@dataclass(slots=True, eq=False)
class StoreWindow(Stmt):
    """Store tile ``value`` into a 2-D view, window as in LoadWindow (``padded``:
    negative bounds allowed, the elements before the array's edge are not written)."""

    value: Expr
    view: ArrayView
    r0: Expr
    r1: Expr
    c0: Expr
    c1: Expr
    padded: bool = False


@dataclass(slots=True, eq=False)
class VecStore(Stmt):
    """Store a vec, the mirror image of :class:`VecLoad`: 1-D view (``col is None``):
    ``a[start+i] = v[i]`` where ``start+i < min(stop, len)``; 2-D view, ``axis`` 0:
    ``a[start+i, col] = v[i]``, ``axis`` 1: ``a[col, start+j] = v[j]``, where the element
    exists and is inside the window. Elements are converted to the array's dtype.
    ``padded``: ``start`` and the fixed index may be negative (not written there)."""

    value: Expr
    view: ArrayView
    start: Expr
    stop: Expr
    col: Expr | None = None
    padded: bool = False
    axis: int = 0


@dataclass(slots=True, eq=False)
class ArrayStore(Stmt):
    view: ArrayView
    indices: list[Expr]
    value: Expr


@dataclass(slots=True, eq=False)
class Atomic(Stmt):
    """``qnb.atomic_<op>(view, index, value)``, ``op`` "add", "max" or "min": for each
    element of the index, ``a[idx] = op(a[idx], value)`` as one indivisible update.
    ``indices`` holds one i32 index per array axis (1 or 2), each already broadcast with
    ``value`` to one shape (scalar, vec or tile); ``value`` has the array's dtype. An
    index outside the array is skipped. Repeated indices each apply. ``result`` (scalar
    form only, else None): the local that receives the element's value from just before
    this update (0 where the index was outside the array). The cpu runs programs in grid
    order and a vec or tile's elements in flat order."""

    op: str
    view: ArrayView
    indices: list[Expr]
    value: Expr
    result: str | None = None


@dataclass(slots=True, eq=False)
class If(Stmt):
    cond: Expr
    then_body: list[Stmt]
    else_body: list[Stmt]


@dataclass(slots=True, eq=False)
class For(Stmt):
    """``for var in range(start, stop, step)`` with Python semantics (i32)."""

    var: str
    start: Expr
    stop: Expr
    step: Expr
    body: list[Stmt]


@dataclass(slots=True, eq=False)
class While(Stmt):
    cond: Expr
    body: list[Stmt]


@dataclass(slots=True, eq=False)
class Break(Stmt):
    pass


@dataclass(slots=True, eq=False)
class Continue(Stmt):
    pass


# --------------------------------------------------------------------------- kernel


@dataclass(slots=True, eq=False)
class Param:
    """A runtime parameter: an array (``type.kind == "array"``) or a scalar."""

    name: str
    type: Type


@dataclass(slots=True, eq=False)
class Unit:
    """A piece of user source that IR locations point into (the kernel or a func)."""

    qualname: str


@dataclass(slots=True, eq=False)
class KernelIR:
    name: str
    params: list[Param]
    body: list[Stmt]
    locals: dict[str, Type] = field(default_factory=dict)  # every local's type
    units: list[Unit] = field(default_factory=list)
    # IR local -> the name a trace shows (the user's own, or a temporary's description);
    # for the trace only: not part of the serialised IR, and not compared.
    display: dict[str, str] = field(default_factory=dict, compare=False)

    @property
    def arrays(self) -> list[Param]:
        return [p for p in self.params if p.type.kind == "array"]

    @property
    def scalars(self) -> list[Param]:
        return [p for p in self.params if p.type.kind == "scalar"]


# --------------------------------------------------------------------------- walking


def children(node) -> list:
    """The direct IR children of a node (expressions, statements, views) in field order."""
    found = _CHILDREN.get(type(node))
    if found is not None:
        return found(node)
    out = []
    for name, kind in _LAYOUTS[type(node).__name__]:
        if kind == "node":
            value = getattr(node, name)
            if value is not None:
                out.append(value)
        elif kind == "nodes":
            out.extend(getattr(node, name))
    return out


def with_children(node, fn):
    """A shallow copy of ``node`` whose direct children (as :func:`children` gives them)
    are each replaced by ``fn(child)``."""
    new = copy.copy(node)
    for name, kind in _LAYOUTS[type(node).__name__]:
        if kind == "node":
            value = getattr(node, name)
            if value is not None:
                setattr(new, name, fn(value))
        elif kind == "nodes":
            setattr(new, name, [fn(value) for value in getattr(node, name)])
    return new


def walk(node):
    """Yield ``node`` and every IR node below it, depth first."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(reversed(children(current)))


def walk_body(body: list[Stmt]):
    for stmt in body:
        yield from walk(stmt)


def holds_tiles(kernel: KernelIR) -> bool:
    """Whether any value of the kernel is a tile or a vec. A kernel that holds none (every
    value a scalar) has nothing for a program's threads to share: a GPU runs such a
    program on one thread."""
    if any(t.kind in ("tile", "vec") for t in kernel.locals.values()):
        return True
    for node in walk_body(kernel.body):
        typ = getattr(node, "type", None)
        if isinstance(typ, Type) and typ.kind in ("tile", "vec"):
            return True
    return False


def array_uses(kernel: KernelIR) -> tuple[set[str], set[str]]:
    """The array parameters the kernel's body loads from, and those it stores to."""
    loaded, stored = set(), set()
    for node in walk_body(kernel.body):
        if isinstance(node, ArrayLoad | LoadWindow | VecLoad):
            loaded.add(node.view.param)
        elif isinstance(node, ArrayStore | StoreWindow | VecStore):
            stored.add(node.view.param)
        elif isinstance(node, Atomic):  # an atomic reads and writes its element
            loaded.add(node.view.param)
            stored.add(node.view.param)
    return loaded, stored


# --------------------------------------------------------------------------- serialisation

_NODE_CLASSES = {
    cls.__name__: cls
    for cls in (
        Const,
        Var,
        ProgramId,
        Unary,
        Binary,
        Logical,
        Select,
        Cast,
        ArrayView,
        ArrayLoad,
        ArrayDim,
        TileFill,
        LoadWindow,
        VecLoad,
        TileGet,
        TileSet,
        Transpose,
        Reshape,
        Broadcast,
        Reduce,
        IndexReduce,
        Scan,
        Matmul,
        Outer,
        RowCol,
        Cholesky,
        SolveTriangular,
        Assign,
        StoreWindow,
        VecStore,
        ArrayStore,
        Atomic,
        If,
        For,
        While,
        Break,
        Continue,
    )
}


# The cpu backend's artifact is the IR as JSON. A node is a positional list,
# ``[class name, field, field, ...]`` in dataclass field order; each field is decoded by
# what its annotation says it holds, so no per-node dicts or tags are needed (a warm start
# parses and rebuilds these lists, so they are kept small and flat).

_TYPES: dict[tuple, Type] = {}


def _field_kind(annotation: str) -> str:
    if annotation == "Type":
        return "type"
    if annotation.startswith("Loc"):
        return "loc"
    if annotation.startswith("list["):
        return "nodes"
    if any(name in annotation for name in ("Expr", "Stmt", "ArrayView")):
        return "node"
    return "value"


_LAYOUTS = {
    name: [(f.name, _field_kind(str(f.type))) for f in fields(cls)]
    for name, cls in _NODE_CLASSES.items()
}


def _children_getter(layout):
    """``children`` for one node class, made once: the walks (``walk``, the backends'
    analyses) call it for every node, so the common layouts read their fields with one
    ``attrgetter`` instead of a loop over the layout."""
    names = [name for name, kind in layout if kind in ("node", "nodes")]
    if not names:
        return lambda node: []
    if any(kind == "nodes" for name, kind in layout):
        return None  # (a list field: the general loop)
    get = attrgetter(*names)
    if len(names) == 1:
        return lambda node: [] if (value := get(node)) is None else [value]
    return lambda node: [value for value in get(node) if value is not None]


_CHILDREN = {}
for _name, _cls in _NODE_CLASSES.items():
    _getter = _children_getter(_LAYOUTS[_name])
    if _getter is not None:
        _CHILDREN[_cls] = _getter


def _encode(node) -> list:
    out = [type(node).__name__]
    for name, kind in _LAYOUTS[out[0]]:
        value = getattr(node, name)
        if kind == "type":
            out.append(_type_json(value))
        elif kind == "loc":
            out.append(None if value is None else [value.unit, value.line, value.col])
        elif kind == "nodes":
            out.append([_encode(v) for v in value])
        elif kind == "node":
            out.append(None if value is None else _encode(value))
        else:
            out.append(value)  # str, int, bool, None, or a float (JSON keeps it exact)
    return out


def _type_json(t: Type) -> list:
    return [t.kind, t.dtype.name, t.ndim, *t.shape]


def _decode_type(value) -> Type:
    key = tuple(value)
    found = _TYPES.get(key)
    if found is None:
        found = _TYPES[key] = Type(key[0], as_dtype(key[1]), key[2], tuple(key[3:]))
    return found


def _decoding(layout) -> tuple:
    """Where a node class's fields need decoding, by what they hold: ``(types, locs,
    nodes, lists)``, each the field positions (made once per class, so decoding a node
    does not compare field kinds)."""
    return tuple(
        tuple(i for i, (_, kind) in enumerate(layout) if kind == wanted)
        for wanted in ("type", "loc", "node", "nodes")
    )


_DECODING = {name: (cls, *_decoding(_LAYOUTS[name])) for name, cls in _NODE_CLASSES.items()}


def _decode(data, locs: dict):
    """The node of ``data``; ``locs`` holds the kernel's locations made so far (equal
    locations share one frozen ``Loc``)."""
    cls, types, loc_fields, nodes, lists = _DECODING[data[0]]
    args = data[1:]
    for i in types:
        args[i] = _decode_type(args[i])
    for i in loc_fields:
        value = args[i]
        if value is not None:
            key = tuple(value)
            loc = locs.get(key)
            if loc is None:
                loc = locs[key] = Loc(*key)
            args[i] = loc
    for i in nodes:
        value = args[i]
        if value is not None:
            args[i] = _decode(value, locs)
    for i in lists:
        args[i] = [_decode(v, locs) for v in args[i]]
    return cls(*args)


def kernel_to_json(kernel: KernelIR) -> dict:
    """A JSON-able form of the IR (the cpu backend's cached artifact: data, never code)."""
    return {
        "name": kernel.name,
        "params": [[p.name, _type_json(p.type)] for p in kernel.params],
        "body": [_encode(stmt) for stmt in kernel.body],
        "locals": {name: _type_json(t) for name, t in kernel.locals.items()},
        "units": [u.qualname for u in kernel.units],
    }


def kernel_from_json(data: dict) -> KernelIR:
    """Rebuild IR from :func:`kernel_to_json`; raises ValueError on malformed data."""
    locs: dict = {}
    try:
        return KernelIR(
            name=data["name"],
            params=[Param(name, _decode_type(t)) for name, t in data["params"]],
            body=[_decode(stmt, locs) for stmt in data["body"]],
            locals={name: _decode_type(t) for name, t in data["locals"].items()},
            units=[Unit(q) for q in data["units"]],
        )
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        raise ValueError(f"malformed kernel IR: {exc!r}") from None


# --------------------------------------------------------------------------- text form


def format_expr(e) -> str:
    """A compact, readable one-line form of an expression."""
    if isinstance(e, Const):
        return repr(e.value)
    if isinstance(e, Var):
        return e.name
    if isinstance(e, ProgramId):
        return f"{'program_id' if e.which == 'id' else 'num_programs'}({e.axis})"
    if isinstance(e, ArrayView):
        return e.param if e.batch is None else f"{e.param}[{format_expr(e.batch)}]"
    if e is None:
        return "None"
    name = type(e).__name__
    parts = []
    for f in fields(e):
        if f.name in ("type", "loc"):
            continue
        value = getattr(e, f.name)
        if f.default is not MISSING:  # an optional field shows only where it is set
            if value is not f.default:
                parts.append(
                    f"{f.name}={format_expr(value) if isinstance(value, Expr) else value!r}"
                )
            continue
        if isinstance(value, list):
            parts.append("[" + ", ".join(format_expr(v) for v in value) + "]")
        elif isinstance(value, Expr | ArrayView) or value is None:
            parts.append(format_expr(value))
        else:
            parts.append(repr(value))
    typed = f"<{e.type}>" if isinstance(e, Expr) else ""
    return f"{name}{typed}({', '.join(parts)})"


def _format_body(body, indent, out):
    pad = "    " * indent
    for s in body:
        line = f"  # line {s.loc.line}" if s.loc else ""
        if isinstance(s, Assign):
            out.append(f"{pad}{s.name} = {format_expr(s.value)}{line}")
        elif isinstance(s, If):
            out.append(f"{pad}if {format_expr(s.cond)}:{line}")
            _format_body(s.then_body or [], indent + 1, out)
            if s.else_body:
                out.append(f"{pad}else:")
                _format_body(s.else_body, indent + 1, out)
        elif isinstance(s, For):
            out.append(
                f"{pad}for {s.var} in range({format_expr(s.start)}, {format_expr(s.stop)}, "
                f"{format_expr(s.step)}):{line}"
            )
            _format_body(s.body, indent + 1, out)
        elif isinstance(s, While):
            out.append(f"{pad}while {format_expr(s.cond)}:{line}")
            _format_body(s.body, indent + 1, out)
        elif isinstance(s, Break | Continue):
            out.append(f"{pad}{type(s).__name__.lower()}{line}")
        else:
            out.append(f"{pad}{format_expr(s)}{line}")
    if not body:
        out.append(f"{pad}pass")


def format_kernel(kernel: KernelIR) -> str:
    """The IR as text (``kernel.source("ir")``)."""
    params = ", ".join(f"{p.name}: {p.type}" for p in kernel.params)
    out = [f"kernel {kernel.name}({params}):"]
    for name, t in kernel.locals.items():
        out.append(f"    local {name}: {t}")
    _format_body(kernel.body, 1, out)
    return "\n".join(out) + "\n"
