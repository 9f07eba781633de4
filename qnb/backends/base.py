"""What a backend is: a renderer plus a runtime.

A backend turns a :class:`~qnb.ir.KernelIR` into an :class:`Artifact` (the thing the
kernel cache stores: generated source, binding layout, a compiled binary) and turns
an artifact into a launcher. It also describes itself for the cache key.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from qnb.errors import QnbError, QnbTypeError
from qnb.ir import KernelIR

# Array types whose C-contiguous instances a launch may take on its fast path (NumPy's;
# a backend adds its own, e.g. ``cupy.ndarray``, when it loads). Each must have ``dtype``
# (a NumPy dtype), ``ndim`` and ``flags.c_contiguous``.
FAST_ARRAY_TYPES: set[type] = set()

# The grid of a plain call ``k(args)``: one object, so a launcher tells it by identity.
ONE_PROGRAM = (1, 1, 1)


def argument_error(cls: type[QnbError], param: str, message: str) -> QnbError:
    """A launcher's error about one argument: the kernel shows it at that parameter of
    its ``def`` line."""
    err = cls(message)
    err.param = param
    return err


def check_dims(name: str, shape) -> None:
    """Every dimension must be an i32: kernels index, and read ``x.shape``, in i32."""
    for n in shape:
        if n >= 2**31:
            raise argument_error(
                QnbTypeError,
                name,
                f"array {name!r} has a dimension of {n}; kernels index with i32, so each "
                "dimension must be below 2**31 (reshape it, e.g. to 2-D)",
            )


def require_writable(name: str, array) -> None:
    """Refuse, before anything runs, a read-only NumPy array that the kernel stores to
    (a broadcast view, an ``np.frombuffer`` of bytes, ``flags.writeable = False``)."""
    if not array.flags.writeable:
        raise argument_error(
            QnbTypeError,
            name,
            f"array {name!r} is read-only, but the kernel stores to it; "
            "pass a writable array (np.array(x) makes a copy)",
        )


@dataclass
class Artifact:
    """A compiled kernel as the cache stores it: JSON-safe text fields and an
    optional binary blob (a cubin). Nothing in it is ever executed on the host."""

    text: dict[str, Any] = field(default_factory=dict)
    binary: bytes | None = None


@dataclass(frozen=True)
class Options:
    """Compile options; they enter the ``options`` key component."""

    debug: bool = False
    fast_math: bool = False
    # A probe build (``qnb.compare``): one chosen program records the value of each step
    # into a hidden buffer (qnb/backends/probe.py). Its own artifact, never the normal one.
    probe: bool = False
    # Threads per program on the GPU backends (a power of two up to 256); None: chosen
    # from the kernel's tile shapes (see qnb.backends.gpu.choose_threads).
    threads: int | None = None

    def as_component(self) -> dict:
        component = {"debug": self.debug, "fast_math": self.fast_math}
        if self.threads is not None:  # (absent otherwise, as probe)
            component["threads"] = self.threads
        if self.probe:  # (absent otherwise: the keys of normal builds stay as they were)
            component["probe"] = True
        return component


@dataclass
class BackendInfo:
    """One record of ``qnb.backends()`` (contract)."""

    name: str
    available: bool
    device: str
    reason: str | None = None

    def __repr__(self) -> str:
        state = "available" if self.available else f"unavailable: {self.reason}"
        return f"<backend {self.name!r}: {self.device} ({state})>"


# A launcher runs a compiled kernel: launcher(grid, args) with ``grid`` a 3-tuple and
# ``args`` the runtime parameter values in ``KernelIR.params`` order (already
# checked against the signature: NumPy arrays, DeviceArrays or backend arrays, and
# Python scalars).
Launcher = Callable[[tuple[int, int, int], list], None]


class Backend:
    """Base class; subclasses set ``name`` and override the methods."""

    name = "?"
    # Which ``kernel.source(lang)`` language this backend renders, if any.
    language: str | None = None

    def info(self) -> BackendInfo:
        raise NotImplementedError

    def key_components(self) -> tuple[dict, dict]:
        """The ``backend`` and ``compiler`` components of the cache key."""
        raise NotImplementedError

    def compile(self, ir: KernelIR, options: Options) -> Artifact:
        raise NotImplementedError

    def load(self, artifact: Artifact) -> Launcher:
        """A launcher from an artifact alone (a warm start has no IR)."""
        raise NotImplementedError

    def to_device(self, array):
        raise NotImplementedError(f"backend {self.name!r} has no device arrays")

    def synchronize(self) -> None:
        """Wait until the work launched so far has finished on the device. A launch with
        NumPy arrays returns when its results are back; one with device arrays may
        return while its work is queued (``%qbench`` waits here after each run)."""


class DeviceArray:
    """An array that lives on a backend's device; launches use it without copies.

    Made by ``qnb.to_device(x)``. ``.numpy()`` copies it back to the host (contract).
    Subclasses (one per backend) hold the device buffer.
    """

    backend_name = "?"

    def __init__(self, shape: tuple[int, ...], dtype):
        import numpy as np

        self.shape = tuple(int(n) for n in shape)
        self.dtype = np.dtype(dtype)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    def numpy(self):
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<qnb.DeviceArray on {self.backend_name}: shape={self.shape}, dtype={self.dtype}>"


def to_host(value):
    """A NumPy copy of a device array (a ``qnb.DeviceArray`` or a CuPy array); any other
    value as it is."""
    if isinstance(value, DeviceArray):
        return value.numpy()
    if type(value).__module__.startswith("cupy"):
        return value.get()
    return value
