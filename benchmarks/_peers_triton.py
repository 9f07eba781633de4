"""Triton's interpreter (``TRITON_INTERPRET=1``) for ``benchmarks/bench_peers.py``, run on
NumPy arrays without PyTorch (imported only where triton is installed: the optional
``peers`` extra). Each kernel is the qnb kernel of the same workload written in Triton:
one 16×16 block per program, addressed by pointer arithmetic over ``tl.arange``.

The interpreter runs the kernel's Python body once per program, its ``tl`` ops as NumPy
calls on the block, reading and writing memory through the raw pointers its arguments
give (``data_ptr()``). Before the grid it copies every tensor argument to the host
through PyTorch's storage calls (``untyped_storage()``, ``.cpu()``, ``new_empty`` +
``set_``, and ``copy_`` back afterwards); :class:`HostTensor` answers those calls for an
array that already lives on the host, so nothing is copied and the kernel writes the
array itself. Triton issue #5493 shows a shim of ``data_ptr()`` and ``dtype`` alone
running NumPy arrays through triton-cpu's compiler, and asks the same of the
interpreter: with Triton 3.8 and 3.9 that shim stops at the host copy
(``AttributeError: ... no attribute 'untyped_storage'``), hence the rest."""

from __future__ import annotations

import os

import numpy as np

# The interpreter is chosen when a function is decorated (triton.jit reads this then),
# Triton's own library functions included, so this must come before triton's first import.
os.environ["TRITON_INTERPRET"] = "1"

import triton  # noqa: E402
import triton.language as tl  # noqa: E402
from triton.runtime.interpreter import InterpretedFunction  # noqa: E402

if not isinstance(tl.zeros, InterpretedFunction):
    # else a kernel fails in tl.zeros with "Cannot call @triton.jit'd outside of the
    # scope of a kernel"
    raise RuntimeError(
        "triton was imported before TRITON_INTERPRET=1 was set, so its library is built for "
        "the compiler: import benchmarks._peers_triton first, or set TRITON_INTERPRET=1"
    )

SIDE = 16  # of every block
BLOCK = tl.constexpr(SIDE)  # a global that a Triton kernel reads must be a constexpr


class _HostStorage:
    """The storage of a :class:`HostTensor`: already host memory, so ``cpu()`` is itself
    and the copy back after the grid has nothing to do."""

    def __init__(self, array):
        self.array = array

    def data_ptr(self):
        return self.array.ctypes.data

    def cpu(self):
        return self

    def copy_(self, source):
        assert source.array is self.array  # the interpreter wrote the array in place
        return self


class HostTensor:
    """A contiguous NumPy array as Triton's interpreter takes a tensor argument: its
    address, its dtype (Triton maps the name, ``float32`` → ``fp32``), and the storage
    calls of the interpreter's host copy (see the module docstring)."""

    def __init__(self, array=None):
        if array is not None and not array.flags.c_contiguous:
            raise ValueError("HostTensor needs a C-contiguous array")
        self.array = array

    @property
    def dtype(self):
        return self.array.dtype

    def data_ptr(self):
        return self.array.ctypes.data

    def untyped_storage(self):
        return _HostStorage(self.array)

    def storage_offset(self):
        return 0

    def size(self):
        return self.array.shape

    def stride(self):
        return tuple(s // self.array.itemsize for s in self.array.strides)

    def new_empty(self, *shape, device=None):
        return HostTensor()

    def set_(self, storage, offset, size, stride):
        assert offset == 0 and tuple(size) == storage.array.shape
        self.array = storage.array
        return self


# Each kernel spells its block's offsets out (rows[:, None] * stride + cols[None, :]): a
# call of a @triton.jit helper costs the interpreter more than the block's arithmetic.


@triton.jit
def trivial(d, stride):
    at = tl.arange(0, BLOCK)[:, None] * stride + tl.arange(0, BLOCK)[None, :]
    tl.store(d + at, tl.full((BLOCK, BLOCK), 4.0, tl.float32))


@triton.jit
def affine_tiles(x, y, stride):
    rows = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    at = rows[:, None] * stride + cols[None, :]
    tl.store(y + at, tl.load(x + at) * 2.0 + 1.0)


@triton.jit
def affine_elements(x, y, n):
    i = tl.program_id(0)
    tl.store(y + i, 2.0 * tl.load(x + i, mask=i < n) + 1.0, mask=i < n)


@triton.jit
def matmul(a, b, c, depth, stride_a, stride_b, stride_c):
    rows = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    steps = tl.arange(0, BLOCK)
    at_a = a + rows[:, None] * stride_a + steps[None, :]  # block (i, 0) of a
    at_b = b + steps[:, None] * stride_b + cols[None, :]  # block (0, j) of b
    acc = tl.zeros((BLOCK, BLOCK), tl.float32)
    for _ in range(0, depth, BLOCK):
        acc = tl.dot(tl.load(at_a), tl.load(at_b), acc, input_precision="ieee")
        at_a += BLOCK
        at_b += BLOCK * stride_b
    tl.store(c + rows[:, None] * stride_c + cols[None, :], acc)


@triton.jit
def softmax(x, y, stride):
    rows = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    at = rows[:, None] * stride + tl.arange(0, BLOCK)[None, :]
    t = tl.load(x + at)
    e = tl.exp(t - tl.max(t, axis=1)[:, None])
    tl.store(y + at, e / tl.sum(e, axis=1)[:, None])


@triton.jit
def cholesky_solve(a, b, x):
    # Triton has no factorisation op: the Cholesky–Crout recurrence one column at a time
    # on the block, then y @ L.T == b one column of y at a time, each with masked sums.
    s = tl.program_id(0)
    index = tl.arange(0, BLOCK)
    rows = index[:, None]
    cols = index[None, :]
    at = s * BLOCK * BLOCK + rows * BLOCK + cols
    m = tl.load(a + at)
    lower = tl.zeros((BLOCK, BLOCK), tl.float64)
    for j in tl.static_range(BLOCK):
        row_j = tl.sum(tl.where(rows == j, lower, 0.0), axis=0)  # L[j, :j], zeros after
        col = tl.sum(tl.where(cols == j, m, 0.0), axis=1) - tl.sum(lower * row_j[None, :], axis=1)
        pivot = tl.sqrt(tl.sum(tl.where(index == j, col, 0.0), axis=0))
        col = tl.where(index >= j, col / pivot, 0.0)
        lower = tl.where(cols == j, col[:, None], lower)
    rhs = tl.load(b + at)
    y = tl.zeros((BLOCK, BLOCK), tl.float64)
    for j in tl.static_range(BLOCK):
        row_j = tl.sum(tl.where(rows == j, lower, 0.0), axis=0)  # L[j, :j + 1]
        pivot = tl.sum(tl.where(index == j, row_j, 0.0), axis=0)
        col = tl.sum(tl.where(cols == j, rhs, 0.0), axis=1) - tl.sum(y * row_j[None, :], axis=1)
        y = tl.where(cols == j, (col / pivot)[:, None], y)
    tl.store(x + at, y)


def _steps(workload, arrays):
    """How many block bodies the interpreter runs for ``workload``: programs times the
    steps of the kernel's loop (its cost grows with this, 0.1–2.5 ms a step here)."""
    if workload == "affine_tiles":
        return arrays["x"].size // SIDE**2
    if workload == "affine_elements":
        return arrays["x"].size
    if workload == "matmul":
        a, b = arrays["a"], arrays["b"]
        return (a.shape[0] // SIDE) * (b.shape[1] // SIDE) * (a.shape[1] // SIDE)
    if workload == "softmax":
        return arrays["x"].shape[0] // SIDE
    if workload == "cholesky":
        return arrays["a"].shape[0] * 2 * SIDE  # a column step of the factor, then of the solve
    return 1


def runner(workload, arrays, max_steps):
    """``setup() -> run() -> result`` for ``workload``, or None where Triton has no kernel
    for it or it would run more than ``max_steps`` block steps (see :func:`_steps`). Each
    output starts as NaN, so a block the kernel does not write fails the check."""
    if _steps(workload, arrays) > max_steps:
        return None

    def launch(kernel, grid, out, *args):
        def run():
            kernel[grid](*[HostTensor(a) if isinstance(a, np.ndarray) else a for a in args])
            return out

        return lambda: run

    def like(a, shape=None):
        return np.full(a.shape if shape is None else shape, np.nan, a.dtype)

    if workload == "trivial":
        d = np.full((SIDE, SIDE), np.nan, np.float32)
        return launch(trivial, (1,), d, d, d.shape[1])
    if workload == "affine_tiles":
        x = arrays["x"]
        y = like(x)
        return launch(affine_tiles, (x.shape[0] // SIDE, x.shape[1] // SIDE), y, x, y, x.shape[1])
    if workload == "affine_elements":
        x = arrays["x"]
        y = like(x)
        return launch(affine_elements, (x.shape[0],), y, x, y, x.shape[0])
    if workload == "matmul":
        a, b = arrays["a"], arrays["b"]
        c = like(a, (a.shape[0], b.shape[1]))
        grid = (a.shape[0] // SIDE, b.shape[1] // SIDE)
        return launch(matmul, grid, c, a, b, c, a.shape[1], a.shape[1], b.shape[1], c.shape[1])
    if workload == "softmax":
        x = arrays["x"]
        y = like(x)
        return launch(softmax, (x.shape[0] // SIDE,), y, x, y, x.shape[1])
    if workload == "cholesky":
        a, b = arrays["a"], arrays["b"]
        x = like(b)
        return launch(cholesky_solve, (a.shape[0],), x, a, b, x)
    return None
