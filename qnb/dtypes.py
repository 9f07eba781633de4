"""The element types of qnb: f16, bf16, f32, f64, i32 and bool_.

NumPy dtypes are accepted wherever a qnb dtype is; :func:`as_dtype` turns either
into the canonical :class:`DType`. NumPy accepts every qnb dtype wherever it takes a
dtype (it reads :attr:`DType.dtype`): ``np.zeros(4, qnb.bf16)`` is an
``ml_dtypes.bfloat16`` array.
"""

from __future__ import annotations

import numpy as np


class DType:
    """One element type. Compare with ``is`` or ``==``; ``str(d)`` is its name."""

    __slots__ = ("name", "numpy", "is_float", "itemsize")

    def __init__(self, name: str, numpy_dtype, is_float: bool):
        self.name = name
        self.numpy = np.dtype(numpy_dtype)
        self.is_float = is_float
        self.itemsize = self.numpy.itemsize

    @property
    def dtype(self) -> np.dtype:
        """The NumPy dtype. NumPy reads this attribute of any object it is given as a
        dtype, so NumPy takes every qnb dtype: ``np.dtype(qnb.f32) == np.float32``,
        ``np.zeros(4, qnb.bf16)``, ``x.astype(qnb.i32)``."""
        return self.numpy

    def __repr__(self) -> str:
        return f"qnb.{self.name}"

    def __str__(self) -> str:
        return self.name

    def __reduce__(self):
        return (as_dtype, (self.name,))


class _BFloat16(DType):
    """bf16: its host dtype is ``ml_dtypes.bfloat16``, imported on first use (the
    extension takes seconds to load on a busy machine; ``import qnb`` must stay fast).
    bf16 values compute in f32 and round to nearest even where made or stored."""

    __slots__ = ()

    def __init__(self):
        self.name = "bf16"
        self.is_float = True
        self.itemsize = 2

    @property
    def numpy(self):
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)


f16 = DType("f16", np.float16, True)
bf16 = _BFloat16()
f32 = DType("f32", np.float32, True)
f64 = DType("f64", np.float64, True)
i32 = DType("i32", np.int32, False)
bool_ = DType("bool", np.bool_, False)

ALL = (f16, bf16, f32, f64, i32, bool_)
_BY_NAME = {d.name: d for d in ALL}
_BY_NUMPY = {d.numpy: d for d in ALL if d is not bf16}
_ALIASES = {
    "float16": f16,
    "bfloat16": bf16,
    "float32": f32,
    "float64": f64,
    "int32": i32,
    "bool_": bool_,
    "half": f16,
    "float": f32,
    "double": f64,
    "int": i32,
}


def as_dtype(value) -> DType:
    """Return the qnb dtype for a qnb dtype, a NumPy dtype or scalar type, or a name.

    Raises ``TypeError`` for anything else (callers turn it into a located error).
    """
    if isinstance(value, DType):
        return value
    if isinstance(value, str):
        found = _BY_NAME.get(value) or _ALIASES.get(value)
        if found is None:
            raise TypeError(f"unknown dtype {value!r}")
        return found
    try:
        npd = np.dtype(value)
    except TypeError:
        raise TypeError(f"{value!r} is not a dtype") from None
    found = _BY_NUMPY.get(npd)
    if found is None and npd.name == "bfloat16":  # ml_dtypes is loaded: the caller has one
        found = bf16
    if found is None:
        supported = ", ".join(d.name for d in ALL)
        raise TypeError(f"dtype {npd} is not supported by qnb (use one of {supported})")
    return found


def is_dtype_like(value) -> bool:
    """True for values that name a dtype (qnb dtypes, NumPy dtypes and scalar types)."""
    if isinstance(value, DType | np.dtype):
        return True
    return isinstance(value, type) and (
        issubclass(value, np.generic) or value.__name__ == "bfloat16"
    )


def promote(a: DType, b: DType) -> DType:
    """The result dtype of a binary arithmetic op between two typed operands."""
    if a is b:
        return a
    order = (bool_, i32, f16, bf16, f32, f64)
    for half in (f16, bf16):  # an integer meets a half float: the half (as i32 + f16)
        if {a, b} == {half, i32}:
            return half
    if {a, b} == {f16, bf16}:  # neither holds the other: f32 holds both exactly
        return f32
    return max(a, b, key=order.index)
