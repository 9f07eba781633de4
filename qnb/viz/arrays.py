"""Arrays to widget state: NumPy conversion and the bytes/shape/dtype encoding."""

from __future__ import annotations

import numpy as np

from qnb.errors import QnbTypeError

# dtypes the front end decodes as they are; others are sent as float64.
_WIRE_DTYPES = {"float16", "float32", "float64", "int32", "bool"}
MAX_ELEMENTS = 1 << 22


def as_numpy(value) -> np.ndarray:
    """A NumPy array from a NumPy array, a ``qnb.DeviceArray`` or a CuPy array (copied
    back), or anything ``np.asarray`` takes as an array of numbers (lists, scalars, objects
    with ``__array__``). Only those known array types are asked to copy themselves back:
    ``.get()`` or ``.numpy()`` on another object could mean anything (``dict.get``,
    ``queue.Queue.get`` blocks)."""
    import qnb

    if isinstance(value, np.ndarray):
        return value
    if isinstance(value, qnb.DeviceArray):
        return np.asarray(value.numpy())
    if _is_cupy_array(value):
        return value.get()
    out = np.asarray(value)
    if out.dtype == object and not isinstance(value, list | tuple):
        kind = type(value)
        name = kind.__qualname__
        if kind.__module__ != "builtins":
            name = f"{kind.__module__}.{name}"
        raise QnbTypeError(
            f"can show an array (NumPy, CuPy, qnb.DeviceArray), a list of numbers or a "
            f"number, not {name}"
        )
    return out


def _is_cupy_array(value) -> bool:
    kind = type(value)
    return kind.__module__.split(".")[0] == "cupy" and kind.__name__ == "ndarray"


def encode(array) -> dict:
    """``{"data": bytes, "shape": [...], "dtype": str, "dtype_name": str, "vmin", "vmax"}``
    for an array of 0 to 3 dimensions (0-D becomes 1-D). Bytes are little-endian."""
    a = as_numpy(array)
    if a.ndim == 0:
        a = a.reshape(1)
    if a.ndim > 3:
        raise ValueError(f"can show arrays of 1 to 3 dimensions, not {a.ndim} (shape {a.shape})")
    if a.size > MAX_ELEMENTS:
        raise ValueError(f"array of {a.size} elements is too large to show; show a slice")
    dtype_name = str(a.dtype)
    if a.dtype.kind not in "biuf":  # complex, strings, objects: not numbers to draw
        raise QnbTypeError(f"can show arrays of numbers (bool, int, float), not {a.dtype}")
    if a.dtype.name not in _WIRE_DTYPES:
        a = a.astype(np.float64)
    wire = a.astype(a.dtype.newbyteorder("<"), copy=False) if a.dtype.byteorder == ">" else a
    vmin, vmax = value_range(a)
    return {
        "data": np.ascontiguousarray(wire).tobytes(),
        "shape": [int(n) for n in a.shape],
        "dtype": a.dtype.name,
        "dtype_name": dtype_name,
        "vmin": vmin,
        "vmax": vmax,
    }


def value_range(a: np.ndarray) -> tuple[float, float]:
    """Min and max of the finite values (0, 1 when there are none)."""
    finite = a[np.isfinite(a)] if a.dtype.kind == "f" else a
    if finite.size == 0:
        return 0.0, 1.0
    return float(finite.min()), float(finite.max())


def decode(state: dict) -> np.ndarray:
    """The inverse of :func:`encode` (tests and the static renderers use it)."""
    dtype = np.dtype(state["dtype"]).newbyteorder("<")
    return np.frombuffer(state["data"], dtype=dtype).reshape(state["shape"])


def downsampled(a: np.ndarray, limit: int | None = None) -> tuple[np.ndarray, list[int]]:
    """``a`` with every k-th row and column (k a power of two, so that a 16x16 tile stays
    16/k cells while k <= 16) until at most ``limit`` elements are left, and the step
    taken along each axis (all 1 where ``a`` fits). Slabs of a 3-D array are kept while
    the rows and columns can still shrink. A strided view: nothing is copied. ``limit``:
    :data:`MAX_ELEMENTS` by default."""
    limit = MAX_ELEMENTS if limit is None else limit
    steps = [1] * a.ndim
    drawn = [a.ndim - 1] if a.ndim == 1 else [a.ndim - 2, a.ndim - 1]

    def size():
        return int(np.prod([-(-n // k) for n, k in zip(a.shape, steps)]))

    while size() > limit:
        shrinking = [axis for axis in drawn if -(-a.shape[axis] // steps[axis]) > 1] or [0]
        for axis in shrinking:
            steps[axis] *= 2
    return a[tuple(slice(None, None, k) for k in steps)], steps


def format_value(v) -> str:
    """A short spelling of one value, as the front end writes it in a cell (qnbFormat in
    static/heatmap.js): integers up to 4 digits as they are, others in 3 significant
    digits, very small or large ones as ``1.2e5`` (no ``+``, no leading zeros)."""
    v = float(v)
    if np.isnan(v):
        return "nan"
    if np.isinf(v):
        return "inf" if v > 0 else "-inf"
    if v.is_integer() and abs(v) < 1e4:
        return str(int(v))
    text = f"{v:.1e}" if v != 0 and (abs(v) < 1e-2 or abs(v) >= 1e4) else f"{v:.3g}"
    if "e" not in text:  # (9999.5 rounds to 1e+04 in 3 digits)
        return text
    mantissa, exponent = text.split("e")
    return f"{mantissa.removesuffix('.0')}e{int(exponent)}"
