"""qnb: tile kernels in Python, compiled to CUDA C++ and WGSL, with a NumPy reference.

A kernel works on tiles of any power-of-two shape (``qnb.Tile[M, N]``, ``qnb.Vec[N]``;
``Tile16`` is ``Tile[16, 16]``), combined by NumPy broadcasting::

    import qnb
    from qnb import Tile16

    @qnb.kernel
    def scale(x: qnb.Array[qnb.f32, 2], out: qnb.Array[qnb.f32, 2], s: qnb.f32):
        i, j = qnb.program_id(0), qnb.program_id(1)
        t = Tile16.load(x, i * 16, j * 16)
        (t * s).store(out, i * 16, j * 16)

    scale[(4, 4)](x, out, 2.0)

Importing qnb imports no backend: each is loaded the first time it is used.
"""

from __future__ import annotations

from qnb._version import __version__
from qnb.backends import backend, backends, set_backend
from qnb.backends.base import DeviceArray
from qnb.compare import Comparison, compare  # (light: NumPy and dataclasses only)
from qnb.dtypes import bf16, bool_, f16, f32, f64, i32
from qnb.errors import (
    BackendError,
    CompileError,
    QnbCaptureError,
    QnbError,
    QnbIndexError,
    QnbOutsideKernelError,
    QnbSyntaxError,
    QnbTypeError,
    QnbZeroDivisionError,
    public,
)
from qnb.hazards import Hazards, check  # (light: NumPy and dataclasses only)
from qnb.kernel import Func, Kernel, Launch, Specialization, func, kernel
from qnb.language import (
    Array,
    Template,
    Tile,
    Tile16,
    Tile32,
    Vec,
    Vec16,
    Vec32,
    abs,  # noqa: A004 - the language's elementwise abs
    arange,
    atomic_add,
    atomic_max,
    atomic_min,
    cdiv,
    ceil,
    cos,
    exp,
    exp2,
    floor,
    log,
    log2,
    maximum,
    minimum,
    mma,
    num_programs,
    outer,
    program_id,
    sin,
    sqrt,
    static,
    tanh,
    trunc,
    where,
)
from qnb.trace import Region, Trace, TraceStep


@public
def to_device(array, backend: str | None = None) -> DeviceArray:
    """Copy a NumPy array to the device of ``backend`` (default: the current backend)."""
    import numpy as np

    from qnb.backends import registry as _backends
    from qnb.dtypes import as_dtype

    data = np.ascontiguousarray(array) if np.ndim(array) else np.asarray(array)
    try:
        as_dtype(data.dtype)
    except TypeError:
        raise QnbTypeError(
            f"qnb.to_device: dtype {data.dtype} is not one qnb supports "
            "(f16, bf16, f32, f64, int32, bool); convert it with .astype first"
        ) from None
    if not 1 <= data.ndim <= 3:
        raise QnbTypeError(
            f"qnb.to_device: qnb kernels take 1-D, 2-D or 3-D arrays, not {data.ndim}-D"
        )
    name = backend or _backends.current_name()
    return _backends.require(name).to_device(data)


def __getattr__(name):
    # qnb.cache, qnb.viz and qnb.puzzles load on first use, so `import qnb` stays light.
    if name in ("cache", "viz", "magics", "puzzles"):
        import importlib

        module = importlib.import_module(f"qnb.{name}")
        globals()[name] = module
        return module
    raise AttributeError(f"module 'qnb' has no attribute {name!r}")


def load_ipython_extension(ipython):
    """``%load_ext qnb``: registers %%qkernel, %qcache, %qbackend, %qbench, %qcompare
    and %qcheck."""
    from qnb.magics import load_ipython_extension as load

    load(ipython)


__all__ = [
    "__version__",
    "kernel",
    "func",
    "Kernel",
    "Func",
    "Launch",
    "Specialization",
    "Tile",
    "Vec",
    "Tile16",
    "Vec16",
    "Tile32",
    "Vec32",
    "arange",
    "atomic_add",
    "atomic_max",
    "atomic_min",
    "cdiv",
    "Array",
    "Template",
    "program_id",
    "num_programs",
    "static",
    "where",
    "exp",
    "exp2",
    "log",
    "log2",
    "sqrt",
    "sin",
    "cos",
    "tanh",
    "trunc",
    "floor",
    "ceil",
    "abs",
    "maximum",
    "minimum",
    "mma",
    "outer",
    "f16",
    "bf16",
    "f32",
    "f64",
    "i32",
    "bool_",
    "backends",
    "set_backend",
    "backend",
    "to_device",
    "DeviceArray",
    "Trace",
    "TraceStep",
    "compare",
    "Comparison",
    "check",
    "Hazards",
    "Region",
    "QnbError",
    "QnbSyntaxError",
    "QnbTypeError",
    "QnbCaptureError",
    "QnbIndexError",
    "QnbOutsideKernelError",
    "QnbZeroDivisionError",
    "BackendError",
    "CompileError",
]


# The subpackages a user reaches as ``qnb.NAME`` (imported on first use where not yet).
PUBLIC_MODULES = ("cache", "puzzles", "viz")


def __dir__() -> list[str]:
    """``dir(qnb)``: the public names (``__all__``) and subpackages, not the modules and
    helpers imported to build them (``annotations``, ``public``, ``frontend``…)."""
    return sorted({*__all__, *PUBLIC_MODULES})
