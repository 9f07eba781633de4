"""Arrays to widget state: NumPy conversion and the bytes/shape/dtype encoding."""

from __future__ import annotations

import numpy as np

# dtypes the front end decodes as they are; others are sent as float64.
_WIRE_DTYPES = {"float16", "float32", "float64", "int32", "bool"}
MAX_ELEMENTS = 1 << 22


def as_numpy(value) -> np.ndarray:
    """A NumPy array from a NumPy array, a host tile/vector, a ``qnb.DeviceArray`` or a
    CuPy array (copied back), or anything ``np.asarray`` accepts."""
    if isinstance(value, np.ndarray):
        return value
    for method in ("numpy", "get"):  # qnb.DeviceArray / host tiles, CuPy
        fn = getattr(value, method, None)
        if callable(fn):
            out = fn()
            if isinstance(out, np.ndarray):
                return out
    return np.asarray(value)


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
        raise TypeError(f"can show arrays of numbers (bool, int, float), not {a.dtype}")
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


def format_value(v) -> str:
    """A short spelling of one value, as the front end writes it in a cell."""
    v = float(v)
    if np.isnan(v):
        return "nan"
    if np.isinf(v):
        return "inf" if v > 0 else "-inf"
    if v.is_integer() and abs(v) < 1e5:
        return str(int(v))
    if v != 0 and (abs(v) < 1e-2 or abs(v) >= 1e4):
        return f"{v:.1e}"
    text = f"{v:.3g}"
    return text
