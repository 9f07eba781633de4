"""The tile language: the names a kernel uses.

These objects are what a user imports and reads the docstrings of; inside a kernel
they are never called as Python: the front end recognises each by its ``_qnb_intrinsic``
tag and lowers it to IR. Called outside a kernel, an intrinsic raises a clear error.
"""

from __future__ import annotations

import numpy as np

from qnb.dtypes import DType, as_dtype, f32
from qnb.errors import QnbOutsideKernelError, QnbTypeError, QnbZeroDivisionError, caller_position

TILE_SIZE = 16


def intrinsic(fn):
    """Tag ``fn`` as a language intrinsic, named by its qualified name (``exp``,
    ``Tile16.zeros``): the front end finds it by the tag, and its typing rule is bound to
    the function itself (``@rule(language.exp)`` in ``qnb.frontend.semantics``)."""
    fn._qnb_intrinsic = fn.__qualname__
    return fn


def _kernel_only(name) -> QnbOutsideKernelError:
    """The error of a language name called as plain Python, at the user's line (raised
    by the name itself, so the traceback holds no frame of qnb's but that one)."""
    tiles = name.startswith(("Tile", "Vec"))
    message = (
        f"{name} was called outside a kernel. "
        f"{'Tiles and vecs live' if tiles else f'{name} runs'} only inside kernels: use it "
        "in a @qnb.kernel or @qnb.func function (or a %%qkernel cell), which qnb compiles "
        "rather than running it as Python."
    )
    if tiles:
        message += (
            " To look at a kernel's tiles: trace = kernel.trace[grid](*args) records each"
            " op's tiles (qnb.viz.TraceView(trace) steps through them), and"
            " qnb.viz.TileView(array) shows an array as tiles."
        )
    filename, lineno = caller_position()
    return QnbOutsideKernelError(message, filename, lineno)


# --------------------------------------------------------------------- program coordinates


@intrinsic
def program_id(axis: int = 0):
    """This program's coordinate along ``axis`` (0, 1 or 2) of the launch grid."""
    raise _kernel_only("program_id")


@intrinsic
def num_programs(axis: int = 0):
    """The number of programs along ``axis`` of the launch grid."""
    raise _kernel_only("num_programs")


@intrinsic
def static(value):
    """Evaluate ``value`` at compile time.

    ``if qnb.static(flag):`` keeps only the branch taken; ``for i in
    qnb.static(range(4)):`` unrolls the loop. The expression may read captured names,
    ``Template`` parameters and static loop variables. Outside a kernel it returns
    ``value`` unchanged.
    """
    return value


@intrinsic
def cdiv(a, b):
    """``-(-a // b)`` for ints: ``a`` divided by ``b``, rounded up (toward +inf), as the
    number of tiles of ``b`` elements that cover ``a`` elements (``k[qnb.cdiv(n, 16)]``).

    On the host it returns an int. In a kernel it is a compile-time value where both are
    (a literal, a captured constant, a ``qnb.Template`` …), else a runtime i32 (a runtime
    zero divisor gives what ``//`` gives). A float, a bool or a zero divisor that qnb can
    see raises ``QnbTypeError`` (for zero, ``QnbZeroDivisionError``, also a
    ``ZeroDivisionError``)."""
    for value in (a, b):
        if isinstance(value, bool) or not isinstance(value, int | np.integer):
            raise QnbTypeError(
                f"qnb.cdiv({a!r}, {b!r}) takes ints; got {_kind_of(value)}", *caller_position()
            )
    if b == 0:
        raise QnbZeroDivisionError(f"qnb.cdiv({a!r}, {b!r}): the divisor is 0", *caller_position())
    return -(-int(a) // int(b))


def _kind_of(value) -> str:
    if isinstance(value, bool):
        return f"the bool {value!r}"
    if isinstance(value, float):
        return f"the float {value!r} (write a // b or int(x) where you mean an int)"
    return f"a {type(value).__name__}"


# --------------------------------------------------------------------- elementwise math


@intrinsic
def where(mask, a, b):
    """Elementwise ``a`` where ``mask`` is true, else ``b`` (tiles, vecs or scalars).

    Both ``a`` and ``b`` are computed, as in NumPy. ``a if c else b`` with a scalar ``c``
    computes only the side it takes."""
    raise _kernel_only("where")


@intrinsic
def exp(x):
    """Elementwise eˣ."""
    raise _kernel_only("exp")


@intrinsic
def log(x):
    """Elementwise natural logarithm."""
    raise _kernel_only("log")


@intrinsic
def sqrt(x):
    """Elementwise square root."""
    raise _kernel_only("sqrt")


@intrinsic
def abs(x):  # noqa: A001 - the language's own abs
    """Elementwise absolute value."""
    raise _kernel_only("abs")


@intrinsic
def exp2(x):
    """Elementwise 2ˣ (``exp2(-inf) == 0``). Integers compute in f32."""
    raise _kernel_only("exp2")


@intrinsic
def log2(x):
    """Elementwise base-2 logarithm (``log2(0) == -inf``; NaN below 0)."""
    raise _kernel_only("log2")


@intrinsic
def sin(x):
    """Elementwise sine of ``x`` in radians (NaN for ±inf)."""
    raise _kernel_only("sin")


@intrinsic
def cos(x):
    """Elementwise cosine of ``x`` in radians (NaN for ±inf)."""
    raise _kernel_only("cos")


@intrinsic
def tanh(x):
    """Elementwise hyperbolic tangent (``tanh(±inf) == ±1``)."""
    raise _kernel_only("tanh")


@intrinsic
def floor(x):
    """Elementwise largest integer ≤ ``x``, as a float of ``x``'s dtype (NumPy's floor)."""
    raise _kernel_only("floor")


@intrinsic
def ceil(x):
    """Elementwise smallest integer ≥ ``x``, as a float of ``x``'s dtype (NumPy's ceil)."""
    raise _kernel_only("ceil")


@intrinsic
def trunc(x):
    """Elementwise ``x`` rounded toward zero, as a float of ``x``'s dtype (NumPy's trunc:
    ``trunc(-2.5) == -2.0``, ±0, ±inf and NaN kept)."""
    raise _kernel_only("trunc")


@intrinsic
def maximum(a, b):
    """Elementwise maximum."""
    raise _kernel_only("maximum")


@intrinsic
def minimum(a, b):
    """Elementwise minimum."""
    raise _kernel_only("minimum")


# --------------------------------------------------------------------- linear algebra


@intrinsic
def mma(a, b, acc):
    """``acc + a @ b`` for ``Tile[M, K]``, ``Tile[K, N]`` and an M×N ``acc``. f16 and bf16
    inputs accumulate in f32 (tensor cores on CUDA)."""
    raise _kernel_only("mma")


@intrinsic
def outer(u, v):
    """The tile ``[i, j] = u[i] * v[j]``: ``Tile[len(u), len(v)]`` of two vecs of any lengths.
    ``t -= qnb.outer(u, v)`` updates in place."""
    raise _kernel_only("outer")


@intrinsic
def arange(n, dtype=None):
    """``Vec[n]`` with ``v[i] = i`` (``n`` a compile-time power of two; i32 unless ``dtype``)."""
    raise _kernel_only("qnb.arange")


# --------------------------------------------------------------------- atomics


@intrinsic
def atomic_add(arr, index, value):
    """``arr[index] += value`` as one indivisible update, safe when several programs update
    one element. ``arr``: an i32 or f32 array (f64 on cpu and cuda); ``index``: an i32
    scalar, vec or tile of element indices into a 1-D array, or a tuple ``(rows, cols)``
    of them into a 2-D array; ``value`` is broadcast to the index's shape. Each index
    element adds once (repeated indices each count); indices outside ``arr`` are skipped.
    With a scalar index it returns the element's value from just before this update."""
    raise _kernel_only("atomic_add")


@intrinsic
def atomic_max(arr, index, value):
    """``arr[index] = max(arr[index], value)`` atomically; as :func:`atomic_add`."""
    raise _kernel_only("atomic_max")


@intrinsic
def atomic_min(arr, index, value):
    """``arr[index] = min(arr[index], value)`` atomically; as :func:`atomic_add`."""
    raise _kernel_only("atomic_min")


# --------------------------------------------------------------------- tiles


class Tile16:
    """A 16×16 matrix value owned by the whole program. Element ``[i, j]`` is row i, column j.

    Inside a kernel: ``Tile16.zeros(dtype)``, ``Tile16(dtype)`` (the same), ``Tile16.ones(dtype)``,
    ``Tile16.full(value, dtype)``, ``Tile16.eye(dtype)``, ``Tile16.load(arr, row, col, *,
    other=0, dtype=None)``;
    methods ``load_``, ``store``, ``astype``, ``sum``/``max``/``min``, ``row``, ``col``,
    ``eye_``, ``cholesky_``, ``solve_triangular_``; ``t.T``, ``t[i, j]``, ``a @ b`` and
    elementwise arithmetic. ``Tile16.SIZE == 16`` everywhere.
    """

    SIZE = TILE_SIZE
    _qnb_intrinsic = "Tile16"

    def __init__(self, dtype=f32):
        raise _kernel_only("Tile16(...)")

    @staticmethod
    @intrinsic
    def zeros(dtype=f32):
        """A tile of zeros."""
        raise _kernel_only("Tile16.zeros")

    @staticmethod
    @intrinsic
    def ones(dtype=f32):
        """A tile of ones."""
        raise _kernel_only("Tile16.ones")

    @staticmethod
    @intrinsic
    def full(value, dtype=f32):
        """A tile with every element ``value``."""
        raise _kernel_only("Tile16.full")

    @staticmethod
    @intrinsic
    def eye(dtype=f32):
        """The identity tile."""
        raise _kernel_only("Tile16.eye")

    @staticmethod
    @intrinsic
    def load(arr, row, col, *, other=0, dtype=None):
        """A new tile ``t[i, j] = arr[row + i, col + j]`` where that element exists
        (``0 <= row + i < rows`` and ``0 <= col + j < cols``), else ``other``.

        ``other`` is a number (NaN and ±inf too) or a runtime scalar: a row-wise max or
        softmax over a partial tile wants ``other=-math.inf``, so that the elements past
        the edge count for nothing. ``row`` and ``col`` may be negative (a zero-padded
        stencil is ``Tile16.load(img, r - 1, c - 1)``), on every backend, with no error.
        The tile has the array's dtype, or ``dtype`` (the elements converted as
        ``astype`` does, ``other`` converted to it)."""
        raise _kernel_only("Tile16.load")

    # The methods of a tile value, for help() and completion: a kernel's compiler knows
    # them by name; called from Python they say so.

    def load_(self, arr, r0, r1, c0, c1):
        """In place: ``t[i, j] = arr[r0 + i, c0 + j]`` where ``r0 + i < min(r1, rows)`` and
        ``c0 + j < min(c1, cols)``; other elements keep their value. Also ``t[:] =
        arr[r0:r1, c0:c1]``."""
        raise _kernel_only("t.load_")

    def store(self, arr, *window):
        """``t.store(arr, row, col)``: ``arr[row + i, col + j] = t[i, j]`` where that element
        exists (``row``/``col`` may be negative); ``t.store(arr, r0, r1, c0, c1)`` within the
        window (clamped to the array). Nothing outside the array is written. Also
        ``arr[r0:r1, c0:c1] = t``."""
        raise _kernel_only("t.store")

    def astype(self, dtype):
        """The tile converted to ``dtype`` (float to i32 truncates toward zero, saturates,
        and sends NaN to 0)."""
        raise _kernel_only("t.astype")

    def sum(self, axis=None, keepdims=False):
        """The sum of all elements (a scalar), or along ``axis`` 0 / 1 (a vec: ``axis=0``
        sums each column). ``keepdims=True`` keeps the reduced sides as 1 (a
        ``Tile[1, N]``, ``Tile[M, 1]`` or ``Tile[1, 1]``). f16 sums accumulate in f32;
        bools count as i32."""
        raise _kernel_only("t.sum")

    def max(self, axis=None, keepdims=False):
        """The largest element (a scalar), or along ``axis`` (a vec); NaN propagates.
        ``keepdims`` as for ``sum``."""
        raise _kernel_only("t.max")

    def min(self, axis=None, keepdims=False):
        """The smallest element (a scalar), or along ``axis`` (a vec); NaN propagates.
        ``keepdims`` as for ``sum``."""
        raise _kernel_only("t.min")

    def prod(self, axis=None, keepdims=False):
        """The product of all elements (a scalar), or along ``axis`` (a vec); ``keepdims``
        as for ``sum``. f16 and bf16 accumulate in f32 and round once; an i32 product wraps
        as i32 arithmetic does; bools count as i32."""
        raise _kernel_only("t.prod")

    def argmax(self, axis=None):
        """The index of the largest element, i32: the flat C-order index (a scalar), or
        along ``axis`` (a vec of row or column indices); the first one where several are
        equal, and a NaN counts as the largest, as NumPy's ``argmax``."""
        raise _kernel_only("t.argmax")

    def argmin(self, axis=None):
        """The index of the smallest element (as ``argmax``; a NaN counts as the smallest)."""
        raise _kernel_only("t.argmin")

    def cumsum(self, axis=None):
        """The inclusive running sum along ``axis`` (0: down each column, 1: along each
        row), the tile's shape, as NumPy's ``cumsum``; ``axis`` is required (NumPy's
        None would flatten). f16 and bf16 accumulate in f32 and round each element; an
        i32 sum wraps; bools count as i32. Float sums add in order along the axis."""
        raise _kernel_only("t.cumsum")

    def cumprod(self, axis=None):
        """The inclusive running product along ``axis`` (as ``cumsum``)."""
        raise _kernel_only("t.cumprod")

    def mean(self, axis=None, keepdims=False):
        """The mean of all elements (a scalar), or along ``axis`` (a vec): the sum divided
        by the count, in the tile's float dtype (f32 for an i32 or bool tile); f16 and
        bf16 accumulate in f32 and round once. ``keepdims`` as for ``sum``."""
        raise _kernel_only("t.mean")

    def row(self, index):
        """Row ``index`` (a runtime or compile-time integer) as a vec of the tile's width."""
        raise _kernel_only("t.row")

    def col(self, index):
        """Column ``index`` as a vec of the tile's height."""
        raise _kernel_only("t.col")

    def eye_(self):
        """In place: the tile becomes the identity."""
        raise _kernel_only("t.eye_")

    def cholesky_(self, eps=0.0):
        """In place: the lower-triangular L with ``L @ L.T == t``, diagonal
        ``sqrt(max(a_jj - s, eps))``; the strict upper triangle becomes 0. The tile is a
        square float tile (and a variable)."""
        raise _kernel_only("t.cholesky_")

    def solve_triangular_(self, B, lower=True):  # noqa: N803 - the B of X @ L.T == B
        """``L.solve_triangular_(B)``: B (a variable) is overwritten with X where
        ``X @ L.T == B`` (L = this lower-triangular N×N tile, B an M×N float tile; only
        ``lower=True``)."""
        raise _kernel_only("t.solve_triangular_")

    @property
    def T(self):
        """The transpose."""
        raise _kernel_only("t.T")


class Vec16:
    """A 16-vector value owned by the whole program.

    ``Vec16.zeros(dtype)``, ``Vec16(dtype)`` (the same), ``Vec16.full(value, dtype)``,
    ``Vec16.load(arr, r0, r1, col)`` (a column window of a 2-D array) or ``Vec16.load(arr,
    start, *, other=0)`` (1-D); ``v[i]``, ``v.store(arr, start)`` (1-D) and elementwise
    arithmetic.
    """

    SIZE = TILE_SIZE
    _qnb_intrinsic = "Vec16"

    def __init__(self, dtype=f32):
        raise _kernel_only("Vec16(...)")

    @staticmethod
    @intrinsic
    def zeros(dtype=f32):
        """A vector of zeros."""
        raise _kernel_only("Vec16.zeros")

    @staticmethod
    @intrinsic
    def ones(dtype=f32):
        """A vector of ones."""
        raise _kernel_only("Vec16.ones")

    @staticmethod
    @intrinsic
    def full(value, dtype=f32):
        """A vector with every element ``value``."""
        raise _kernel_only("Vec16.full")

    @staticmethod
    @intrinsic
    def load(arr, *window, other=0):
        """``v[i] = arr[start + i]`` (1-D: ``load(arr, start, *, other=0)``) where that
        element exists, else ``other`` (a number, NaN and ±inf too, or a runtime scalar);
        ``start`` may be negative. ``v[i] = arr[r0 + i, col]`` (2-D: ``load(arr, r0, r1,
        col)``) where ``r0 + i < min(r1, rows)``, else 0."""
        raise _kernel_only("Vec16.load")

    @staticmethod
    @intrinsic
    def load_col(arr, row, col, *, other=0):
        """``v[i] = arr[row + i, col]`` where that element exists, else ``other``
        (``row`` and ``col`` may be negative)."""
        raise _kernel_only("Vec16.load_col")

    @staticmethod
    @intrinsic
    def load_row(arr, row, col, *, other=0):
        """``v[j] = arr[row, col + j]`` where that element exists, else ``other``
        (``row`` and ``col`` may be negative)."""
        raise _kernel_only("Vec16.load_row")

    def store(self, arr, *window):
        """``v.store(arr, start)``: ``arr[start + i] = v[i]`` (1-D arrays) where that
        element exists (``start`` may be negative); ``v.store(arr, start, stop)``: only
        the elements ``start + i < min(stop, len(arr))``. Also ``arr[s0:s1] = v``."""
        raise _kernel_only("v.store")

    def store_col(self, arr, row, col):
        """``arr[row + i, col] = v[i]`` where that element exists."""
        raise _kernel_only("v.store_col")

    def store_row(self, arr, row, col):
        """``arr[row, col + j] = v[j]`` where that element exists."""
        raise _kernel_only("v.store_row")

    def astype(self, dtype):
        """The vector converted to ``dtype``."""
        raise _kernel_only("v.astype")

    def sum(self, axis=None, keepdims=False):
        """The sum of the elements, a scalar (``axis`` None or 0; ``keepdims=True``
        gives a ``Vec[1]``). f16 accumulates in f32."""
        raise _kernel_only("v.sum")

    def max(self, axis=None, keepdims=False):
        """The largest element; NaN propagates (``axis`` and ``keepdims`` as for ``sum``)."""
        raise _kernel_only("v.max")

    def min(self, axis=None, keepdims=False):
        """The smallest element; NaN propagates (``axis`` and ``keepdims`` as for ``sum``)."""
        raise _kernel_only("v.min")

    def prod(self, axis=None, keepdims=False):
        """The product of the elements (``axis`` and ``keepdims`` as for ``sum``); f16 and
        bf16 accumulate in f32; an i32 product wraps."""
        raise _kernel_only("v.prod")

    def argmax(self, axis=None):
        """The index (i32) of the largest element, the first of equal ones; NaN counts as
        the largest, as NumPy's ``argmax``."""
        raise _kernel_only("v.argmax")

    def argmin(self, axis=None):
        """The index (i32) of the smallest element (as ``argmax``)."""
        raise _kernel_only("v.argmin")

    def cumsum(self, axis=None):
        """The inclusive running sum, a vec of the same length, as NumPy's ``cumsum``
        (``axis`` None or 0). f16 and bf16 accumulate in f32 and round each element; an
        i32 sum wraps; bools count as i32."""
        raise _kernel_only("v.cumsum")

    def cumprod(self, axis=None):
        """The inclusive running product (as ``cumsum``)."""
        raise _kernel_only("v.cumprod")

    def mean(self, axis=None, keepdims=False):
        """The mean of the elements: their sum divided by N, in the vec's float dtype (f32
        for i32 or bool); ``axis`` and ``keepdims`` as for ``sum``."""
        raise _kernel_only("v.mean")


# --------------------------------------------------------------------- shapes

MAX_TILE_SIDE = 128  # (ir.MAX_TILE_SIDE: the language does not import the IR)
MAX_TILE_ELEMENTS = 16384


def _is_size(n) -> bool:
    return isinstance(n, int) and not isinstance(n, bool) and n >= 1 and n & (n - 1) == 0


def tile_shape_problem(shape) -> str | None:
    """Why ``Tile[shape]`` is not a tile type (None when it is one)."""
    if not isinstance(shape, tuple) or len(shape) != 2:
        return f"a tile type is Tile[M, N] with two sizes, got Tile[{_spelled(shape)}]"
    for side in shape:
        if not _is_size(side) or side > MAX_TILE_SIDE:
            return (
                f"Tile[{_spelled(shape)}]: the size {side!r} is not a power of two from 1 to "
                f"{MAX_TILE_SIDE}"
            )
    if shape[0] * shape[1] > MAX_TILE_ELEMENTS:
        return (
            f"Tile[{_spelled(shape)}] holds {shape[0] * shape[1]} elements; a tile holds at "
            f"most {MAX_TILE_ELEMENTS}"
        )
    return None


def vec_shape_problem(n) -> str | None:
    """Why ``Vec[n]`` is not a vec type (None when it is one)."""
    if not _is_size(n) or n > MAX_TILE_ELEMENTS:
        return f"Vec[{_spelled(n)}]: the size {n!r} is not a power of two from 1 to {MAX_TILE_ELEMENTS}"
    return None


def _plain_int(value):
    """A NumPy integer (``np.int64(32)``) as the int it holds; anything else unchanged."""
    if hasattr(value, "__index__") and not isinstance(value, bool | int) and hasattr(value, "item"):
        return value.item()
    return value


def _spelled(key) -> str:
    return ", ".join(repr(k) for k in key) if isinstance(key, tuple) else repr(key)


def shape_name(kind: str, shape: tuple) -> str:
    """``Tile16``, ``Tile32``, ``Vec16``, ``Vec32`` for those shapes, else ``Tile[M, N]`` /
    ``Vec[N]`` (as ``ir.Type.shape_name`` spells them)."""
    if kind == "tile":
        m, n = shape
        return f"Tile{m}" if m == n and m in (16, 32) else f"Tile[{m}, {n}]"
    return f"Vec{shape[0]}" if shape[0] in (16, 32) else f"Vec[{shape[0]}]"


def _tag(fn, kind, shape, method):
    """What the front end reads off a shaped class's constructor: its kind, shape and
    method (``_qnb_intrinsic`` also names the shape, so the cache key tells two apart)."""
    fn._qnb_intrinsic = f"{shape_name(kind, shape)}.{method}"
    fn._qnb_kind, fn._qnb_shape, fn._qnb_method = kind, shape, method
    return fn


def _stub(kind, shape, method, template):
    """A fresh constructor function for one shape, with ``template``'s docstring."""
    name = f"{shape_name(kind, shape)}.{method}"

    def stub(*args, **kwargs):
        raise _kernel_only(name)

    stub.__name__ = stub.__qualname__ = method
    stub.__doc__ = template.__doc__
    stub.__wrapped__ = template  # help() and inspect.signature show the template's parameters
    return _tag(stub, kind, shape, method)


_TILE_CONSTRUCTORS = ("zeros", "ones", "full", "eye", "load")
_VEC_CONSTRUCTORS = ("zeros", "ones", "full", "load", "load_col", "load_row")
_SHAPED: dict[tuple, type] = {}


def _shape_attributes(cls, kind, shape):
    cls.SHAPE = shape
    cls._qnb_kind, cls._qnb_shape, cls._qnb_method = kind, shape, "class"
    if kind == "vec" or shape[0] == shape[1]:
        cls.SIZE = shape[0]
    _SHAPED[(kind, shape)] = cls


def _make_class(kind, shape) -> type:
    model = Tile16 if kind == "tile" else Vec16
    name = shape_name(kind, shape)
    names = _TILE_CONSTRUCTORS if kind == "tile" else _VEC_CONSTRUCTORS
    if kind == "tile" and shape[0] != shape[1]:
        names = tuple(n for n in names if n != "eye")  # the identity is square only
    skipped = {*_TILE_CONSTRUCTORS, *_VEC_CONSTRUCTORS, "SIZE", "SHAPE", "__dict__", "__weakref__"}
    namespace = {
        key: value
        for key, value in vars(model).items()
        if key not in skipped and not key.startswith("_qnb")
    }
    for method in names:
        namespace[method] = staticmethod(_stub(kind, shape, method, getattr(model, method)))
    spelled = (
        f"A {shape[0]}×{shape[1]} matrix value" if kind == "tile" else f"A {shape[0]}-vector value"
    )
    namespace["__doc__"] = f"{spelled} ({name}); everything {model.__name__} has, at this shape."
    namespace["_qnb_intrinsic"] = name
    namespace["__qualname__"] = name
    namespace["__module__"] = __name__

    def __init__(self, dtype=f32):  # Tile[M, N](dtype) / Vec[N](dtype): zeros
        raise _kernel_only(f"{name}(...)")

    namespace["__init__"] = __init__
    cls = type(name, (), namespace)
    _shape_attributes(cls, kind, shape)
    return cls


class ShapeFamily:
    """``qnb.Tile`` / ``qnb.Vec``: ``Tile[M, N]`` and ``Vec[N]`` are the tile and vec types
    of that shape, one class object per shape (``qnb.Tile[16, 16] is qnb.Tile16``)."""

    def __init__(self, kind: str):
        self.kind = kind
        self._qnb_intrinsic = "Tile" if kind == "tile" else "Vec"

    def lookup(self, key) -> type:
        """The class of shape ``key``; ValueError (its message names the bad size) else."""
        key = tuple(_plain_int(k) for k in key) if isinstance(key, tuple) else _plain_int(key)
        if self.kind == "tile":
            problem = tile_shape_problem(key)
            shape = key
        else:
            if isinstance(key, tuple) and len(key) == 1:
                key = key[0]
            problem = vec_shape_problem(key)
            shape = (key,)
        if problem is not None:
            raise ValueError(problem)
        found = _SHAPED.get((self.kind, shape))
        if found is None:
            found = _make_class(self.kind, shape)
        return found

    def __getitem__(self, key) -> type:
        try:
            return self.lookup(key)
        except ValueError as exc:
            raise QnbTypeError(str(exc), *caller_position()) from None

    def __repr__(self) -> str:
        return "qnb.Tile" if self.kind == "tile" else "qnb.Vec"


for _method in _TILE_CONSTRUCTORS:
    _tag(getattr(Tile16, _method), "tile", (16, 16), _method)
    getattr(Tile16, _method)._qnb_intrinsic = f"Tile16.{_method}"
for _method in _VEC_CONSTRUCTORS:
    _tag(getattr(Vec16, _method), "vec", (16,), _method)
_shape_attributes(Tile16, "tile", (16, 16))
_shape_attributes(Vec16, "vec", (16,))

Tile = ShapeFamily("tile")
Vec = ShapeFamily("vec")
Tile32 = Tile[32, 32]
Vec32 = Vec[32]


# --------------------------------------------------------------------- parameter annotations


class _ArrayAnnotation:
    """``qnb.Array`` (any dtype and rank, specialised per call) or ``qnb.Array[dtype, ndim]``."""

    _qnb_annotation = True

    def __init__(self, dtype: DType | None = None, ndim: int | None = None):
        self.dtype = dtype
        self.ndim = ndim

    def __getitem__(self, item) -> _ArrayAnnotation:
        if not isinstance(item, tuple):
            item = (item,)
        if len(item) not in (1, 2):
            raise QnbTypeError("use qnb.Array[dtype] or qnb.Array[dtype, ndim]", *caller_position())
        try:
            dtype = None if item[0] is None else as_dtype(item[0])
        except TypeError as exc:
            raise QnbTypeError(f"qnb.Array[...]: {exc}", *caller_position()) from None
        ndim = item[1] if len(item) == 2 else None
        if ndim is not None and (isinstance(ndim, bool) or ndim not in (1, 2, 3)):
            raise QnbTypeError(
                f"qnb arrays have 1, 2 or 3 dimensions, not {ndim!r}", *caller_position()
            )
        return _ArrayAnnotation(dtype, ndim)

    def __repr__(self) -> str:
        if self.dtype is None and self.ndim is None:
            return "qnb.Array"
        parts = [str(self.dtype) if self.dtype else "None"]
        if self.ndim is not None:
            parts.append(str(self.ndim))
        return f"qnb.Array[{', '.join(parts)}]"


Array = _ArrayAnnotation()


class _TemplateAnnotation:
    """``qnb.Template``: a compile-time parameter (bool, int, float, str, None, a dtype,
    or a tuple of these). Each distinct value compiles its own kernel."""

    _qnb_annotation = True

    def __repr__(self) -> str:
        return "qnb.Template"


Template = _TemplateAnnotation()
