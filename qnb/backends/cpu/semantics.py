"""What a window, its mask, a masked store and a bounds error mean on NumPy lanes, written
once for the cpu backend's two executors: the interpreter (:mod:`qnb.backends.cpu.interpreter`) and
the prepared closures (:mod:`qnb.backends.cpu.prepared`), whose fast paths must give the
same bits (``tests/backends/test_cpu_paths.py`` holds them to it). A reduction's meaning
is :func:`reduce_values`, which both call; the op tables (``_BINARY``, ``_UNARY``,
``_REDUCE``) and the Cholesky and triangular-solve kernels are here too.

Values hold a leading lane axis (one entry per program, or 1 where every program agrees).
A window of ``shape`` (M×N) per lane starts at ``(r0, c0)``; its rows ``r0 ..
row_end - 1`` and columns ``c0 .. col_end - 1`` exist (the ends already clamped to the
array); the rest of the tile reads the load's fill and is not written by a store.
"""

from __future__ import annotations

import functools

import numpy as np

from qnb import ops
from qnb.dtypes import i32

_ARANGE16 = np.arange(16, dtype=np.int64)


def _arange(n: int) -> np.ndarray:
    return _ARANGE16 if n == 16 else np.arange(n, dtype=np.int64)


def window_masks(r0, c0, row_end, col_end, shape=(16, 16)):
    """Per-lane row and column indices of an M×N window, and which of its elements exist."""
    rows = r0[:, None] + _arange(shape[0])
    cols = c0[:, None] + _arange(shape[1])
    row_ok = (rows >= 0) & (rows < row_end[:, None])  # a padded window may start before 0
    col_ok = (cols >= 0) & (cols < col_end[:, None])
    return rows, cols, row_ok[:, :, None] & col_ok[:, None, :]


def gather_window(array, batch, rows, cols, valid, dtype, fill):
    """Every lane's tile of the 3-D ``array`` (slab ``batch``) at the window
    :func:`window_masks` gave: the array's element cast to ``dtype`` where it exists,
    ``fill`` (the load's base tile, per lane or broadcast) elsewhere."""
    r = np.minimum(np.maximum(rows, 0), array.shape[1] - 1)
    c = np.minimum(np.maximum(cols, 0), array.shape[2] - 1)
    flat = array.reshape(-1)
    index = (batch[:, None, None] * array.shape[1] + r[:, :, None]) * array.shape[2]
    index = index + c[:, None, :]
    return np.where(valid, flat[index].astype(dtype, copy=False), fill)


def mask_lanes(mask) -> int:
    """The lanes a masked store must cover (a store the same in every program still
    writes only where the branch mask holds); 1 where no branch masks."""
    return 1 if mask is None else mask.shape[0]


def scatter_window(array, batch, rows, cols, valid, value, mask):
    """Store every lane's tile ``value`` into the 3-D ``array`` at the window
    :func:`window_masks` gave, where the element exists and the lane's branch ``mask``
    (None: every lane) holds. Lanes run in program order: where two programs store one
    element (a race), the later program's value is the one left."""
    shape = valid.shape[1:]
    lanes = max(
        value.shape[0], rows.shape[0], cols.shape[0], valid.shape[0], batch.shape[0],
        mask_lanes(mask),
    )  # fmt: skip
    full = (lanes, *shape)
    valid = np.broadcast_to(valid, full)
    if mask is not None:
        valid = valid & mask[:, None, None]
    r = np.broadcast_to(rows[:, :, None], full)
    c = np.broadcast_to(cols[:, None, :], full)
    b = np.broadcast_to(batch[:, None, None], full)
    values = np.broadcast_to(value, full)
    array[b[valid], r[valid], c[valid]] = values[valid]


def batch_out_of_range(param: str, slabs: int) -> str:
    """The bounds error of a slab index (``x[b]`` of a 3-D array) outside the array."""
    return f"batch index out of range for {param!r} with {slabs} slabs"


def negative_bound(param: str) -> str:
    """The bounds error of an unpadded window with a bound below 0."""
    return f"negative window bound on {param!r}"


_BINARY = {
    "add": np.add,
    "sub": np.subtract,
    "mul": np.multiply,
    "div": np.true_divide,
    "floordiv": np.floor_divide,
    "mod": np.mod,
    "max": np.maximum,
    "min": np.minimum,
    "pow": lambda a, b: _int_power(a, b) if a.dtype.kind in "iu" else np.power(a, b),
    "lt": np.less,
    "le": np.less_equal,
    "gt": np.greater,
    "ge": np.greater_equal,
    "eq": np.equal,
    "ne": np.not_equal,
    "and": np.bitwise_and,  # on bools, the logical and
    "or": np.bitwise_or,
    "xor": np.bitwise_xor,
    "shl": np.left_shift,  # NumPy's shifts define every count (see ir.SHIFT_OPS)
    "shr": np.right_shift,
}


def _int_power(a, b):
    """i32 ** i32, wrapping; a negative exponent gives the true power truncated toward zero
    (1 for a base of 1, ±1 for -1, else 0; 0 for a base of 0, as ``x // 0`` is)."""
    a, b = np.broadcast_arrays(a, b)
    with np.errstate(over="ignore"):
        result = np.power(a, np.maximum(b, 0))
    negative = b < 0
    if negative.any():
        unit = np.where(b % 2 == 1, a, 1)  # (-1) ** odd == -1
        result = np.where(negative, np.where(np.abs(a) == 1, unit, 0), result)
    return result


_UNARY = {
    "neg": np.negative,
    "not": np.logical_not,
    "invert": np.invert,
    **{name: op.numpy for name, op in ops.MATH.items()},  # (the registry's ufuncs)
}


_REDUCE = {name: op.ufunc.reduce for name, op in ops.REDUCTIONS.items()}


def is_narrow_float(dtype) -> bool:
    """f16 and bf16: sums and products accumulate in f32 and round once."""
    return dtype.itemsize == 2 and dtype.kind != "i"


def cast_values(value: np.ndarray, target) -> np.ndarray:
    """``Cast`` of ``value`` to the qnb dtype ``target``."""
    if target is i32 and (value.dtype.kind == "f" or value.dtype.name == "bfloat16"):
        # Toward zero, saturating, NaN → 0; clipped in f64, where 2**31 - 1 is exact.
        value = np.nan_to_num(value.astype(np.float64), nan=0.0)
        value = np.clip(np.trunc(value), -(2**31), 2**31 - 1)
    return value.astype(target.numpy)


def scan_values(op: str, value: np.ndarray, axis) -> np.ndarray:
    """``cumsum``/``cumprod`` of each program's value (``(n, *shape)``) along ``axis``
    (None: a vec's one axis), inclusive, in order from the line's start: NumPy's
    ``ufunc.accumulate``. f16 and bf16 accumulate in f32 and round each element; i32
    wraps."""
    axis = 1 if axis is None else axis + 1
    out = value.dtype
    if is_narrow_float(out):
        value = value.astype(np.float32)
    ufunc = ops.REDUCTIONS[op].ufunc
    with np.errstate(over="ignore", invalid="ignore"):
        return ufunc.accumulate(value, axis=axis).astype(out, copy=False)


def index_reduce_values(op: str, value: np.ndarray, axis) -> np.ndarray:
    """``argmax``/``argmin`` of each program's value (``(n, *shape)``) along ``axis``
    (None: the flat C-order index), as i32."""
    if axis is None:
        return index_reduce_along(op, value.reshape(value.shape[0], -1), 1)
    return index_reduce_along(op, value, axis + 1)


def index_reduce_along(op: str, value: np.ndarray, axis: int) -> np.ndarray:
    """NumPy's first index of the extreme along one axis of ``value``, a NaN counting as
    the extreme, as i32. f16 and bf16 compare as the f32 values they hold (exact)."""
    if is_narrow_float(value.dtype):
        value = value.astype(np.float32)
    fn = np.argmax if op == "argmax" else np.argmin
    return fn(value, axis=axis).astype(np.int32)


def reduce_values(op: str, value: np.ndarray, axes) -> np.ndarray:
    """``Reduce`` ``op`` of ``value`` over ``axes``: what a reduction means on the cpu,
    for both executors (the prepared path may hold a tile as a strided, overlapping or
    broadcast view where the interpreter holds a copy). NumPy's order of operands
    follows the memory layout (pairwise along a contiguous run, row after row across
    a strided one), so the values are reduced in C order: the same bits whatever
    layout they come in."""
    fn = _REDUCE[op]
    value = np.ascontiguousarray(value)
    if op in _SEGMENTED and value.dtype.kind in "fiu" and value.size >= SEGMENTED_MIN:
        found = _segmented_extreme(_SEGMENTED[op], value, axes)
        if found is not None:
            return found
    if ops.REDUCTIONS[op].arithmetic:
        if is_narrow_float(value.dtype):
            # accumulate in f32, round once (as NumPy does for contiguous f16 sums;
            # every backend does so for every axis)
            return fn(value, axis=axes, dtype=np.float32).astype(value.dtype)
        return fn(value, axis=axes, dtype=value.dtype)
    return fn(value, axis=axes)


# max and min over trailing axes, each run of them one segment of ``reduceat``: NumPy's
# ``reduce`` pays ~95 ns a row in its iterator (a max of 4096×1024 f32 in rows of 128:
# 3.6 ms; as segments: 2.2 ms; rows of 16: 25 ms and 14 ms), sums far less (1.1 ms).
_SEGMENTED = {"max": np.maximum, "min": np.minimum}
SEGMENTED_MIN = 4096  # elements: below, the reduction's fixed cost is the most of it


def _segmented_extreme(fn, value: np.ndarray, axes) -> np.ndarray | None:
    """``fn.reduce`` (max or min) of the C-contiguous ``value`` over ``axes``, where they
    are its trailing axes, by segments; None where they are not. The bits are
    ``reduce``'s: an extreme that is neither a zero nor a NaN is an element every equal
    element shares the bits of, whatever the order; a row whose extreme is a zero (of
    which sign?) or a NaN (which payload?) is reduced again as ``reduce`` does it."""
    ndim = value.ndim
    if ndim == 0:
        return None
    if axes is None:
        axes = tuple(range(ndim))
    elif isinstance(axes, int | np.integer):
        axes = (int(axes) % ndim,)
    else:
        axes = tuple(int(a) % ndim for a in axes)
    if sorted(axes) != list(range(ndim - len(axes), ndim)):
        return None
    kept = value.shape[: ndim - len(axes)]
    rows = int(np.prod(kept, dtype=np.int64))  # (1 where every axis is reduced)
    n = value.size // rows if rows else 0
    if n < 2 or rows < 8:
        return None
    flat = value.reshape(-1)
    out = fn.reduceat(flat, _segment_starts(rows, n))
    if value.dtype.kind == "f":
        again = out == 0
        again |= np.isnan(out)
        if again.any():
            out[again] = fn.reduce(flat.reshape(rows, n)[again], axis=1)
    return out.reshape(kept)


@functools.lru_cache(maxsize=32)
def _segment_starts(rows: int, n: int) -> np.ndarray:
    starts = np.arange(0, rows * n, n, dtype=np.intp)
    starts.flags.writeable = False
    return starts


def _einsum(spec, a, b, out):
    """``np.einsum`` into ``out``; bf16 (which einsum does not take) accumulates in f32 and
    rounds once, as f16 does."""
    if a.dtype.kind != "f" and a.dtype.name == "bfloat16":  # (.name is slow: f32/f64 first)
        out[...] = np.einsum(spec, a.astype(np.float32), b.astype(np.float32))
        return out
    return np.einsum(spec, a, b, out=out)


def _cholesky(a, eps, lower):
    size = a.shape[0]
    for j in range(size):
        # Column j from the diagonal down: a[i, j] - L[i, :j] · L[j, :j]; the diagonal
        # becomes sqrt(max(that, eps)), the rows below divide by it.
        column = lower[j:, j]
        if j:
            lower[:j, j] = 0
            _einsum("ikn,kn->in", lower[j:, :j], lower[j, :j], column)
            np.subtract(a[j:, j], column, out=column)
        else:
            column[...] = a[j:, j]
        diagonal = column[0]
        np.maximum(diagonal, eps, out=diagonal)
        np.sqrt(diagonal, out=diagonal)
        np.divide(column[1:], diagonal, out=column[1:])
    return lower


def _solve_lower(factor, rhs, x):
    for k in range(rhs.shape[1]):
        # X[:, k] = (B[:, k] - sum_{m<k} X[:, m] L[k, m]) / L[k, k]
        column = x[:, k]
        if k:
            _einsum("imn,mn->in", x[:, :k], factor[k, :k], column)
            np.subtract(rhs[:, k], column, out=column)
            np.divide(column, factor[k, k], out=column)
        else:
            np.divide(rhs[:, k], factor[k, k], out=column)
    return x
