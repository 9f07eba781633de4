"""The "cpu" backend: NumPy executes the IR. It is the executable definition of every op.

Programs run *together*: every value carries a leading program axis (length P, or 1
for a value that is the same in every program), so one Python-level step of the
interpreter does the work of all P programs. Control flow that differs between
programs runs under a lane mask (like SIMD hardware): both sides of an ``if`` run,
each on its own lanes; a loop runs until no lane is left in it; ``break`` and
``continue`` retire lanes. Where every lane agrees (a loop bound from ``arr.shape``,
a static flag), the executor takes the plain path.

Bounds are checked: a scalar index outside an array, a tile index outside the tile's
shape or a negative window bound raises ``QnbIndexError`` at the kernel's own line.
"""

from __future__ import annotations

import numpy as np

from qnb import ir
from qnb.backends.base import argument_error, check_dims, require_writable
from qnb.backends.cpu.interpreter_expressions import ExpressionsMixin
from qnb.backends.cpu.interpreter_memory import MemoryMixin
from qnb.backends.cpu.interpreter_statements import StatementsMixin
from qnb.backends.cpu.lanes import (
    CpuArray,
    _as_3d,
    _Blocks,
    _expand,
    _gathered,
    _lanes,
    _Loop,
    chunk_programs,
    out_of_memory,
)
from qnb.backends.cpu.observer import UNWATCHED
from qnb.errors import QnbTypeError


def run(
    kernel: ir.KernelIR, grid, args, stored=None, chunk=None, observer=None, order=None
) -> None:
    """Execute ``kernel`` over ``grid`` with ``args`` (in ``kernel.params`` order),
    ``chunk`` programs at a time (default: :func:`chunk_programs`); ``observer`` (an
    :class:`Observer`) watches each chunk's run. ``order`` "forward" or "reverse": one
    program at a time, in grid order or its reverse (``qnb.check`` compares the two)."""
    if order not in (None, "forward", "reverse"):
        raise ValueError(f"order is None, 'forward' or 'reverse', not {order!r}")
    arrays, scalars = _bind(kernel, args, stored)
    total = grid[0] * grid[1] * grid[2]
    chunk = 1 if order else chunk or chunk_programs(kernel)
    observer = observer or UNWATCHED
    starts = range(0, total, chunk)
    try:
        for start in reversed(starts) if order == "reverse" else starts:
            count = min(chunk, total - start)
            _Executor(kernel, grid, arrays, scalars, start, count, observer).run()
    except MemoryError:
        raise out_of_memory(kernel.name, grid) from None


def _bind(kernel, args, stored=None):
    """The arrays (3-D views, with their own shapes) and scalars of a launch; refuses a
    read-only array among the ``stored`` ones (all the kernel stores to, by default)."""
    arrays, scalars = {}, {}
    for param, value in zip(kernel.params, args):
        if param.type.kind == "array":
            host = value.host if isinstance(value, CpuArray) else value
            if not isinstance(host, np.ndarray):
                raise argument_error(
                    QnbTypeError,
                    param.name,
                    f"the cpu backend takes NumPy arrays; {param.name!r} is a "
                    f"{type(value).__name__} (use .numpy() or qnb.to_device on cpu)",
                )
            check_dims(param.name, host.shape)
            if type(host) is not np.ndarray:  # np.matrix, a memmap...: the same memory
                host = host.view(np.ndarray)
            arrays[param.name] = (_as_3d(host), host.shape)
        else:
            scalars[param.name] = np.array([value], dtype=param.type.dtype.numpy)
    for name in ir.array_uses(kernel)[1] if stored is None else stored:
        require_writable(name, arrays[name][0])
    return arrays, scalars


class _Executor(StatementsMixin, MemoryMixin, ExpressionsMixin):
    """The interpreter's driver: lanes, masks, variables and the walk; its rooms are mixins."""

    def __init__(self, kernel, grid, arrays, scalars, start, count, observer=UNWATCHED):
        self.kernel = kernel
        self.arrays = arrays
        self.n = count
        self.mask = None  # None: every lane active
        self.loops: list[_Loop] = []
        self.observer = observer
        self.defer_loads = not observer.sees_every_value
        flat = np.arange(start, start + count, dtype=np.int64)
        gx, gy, _ = grid
        self.pid = [
            (flat % gx).astype(np.int32),
            ((flat // gx) % gy).astype(np.int32),
            (flat // (gx * gy)).astype(np.int32),
        ]
        self.grid = [np.array([g], np.int32) for g in grid]
        self.env = dict(scalars)
        # Variables whose value is a view of (or defers to) a kernel array: ``detach``
        # copies them before a store that could change what they hold (tiles are values).
        self.aliased: set[str] = set()
        self.array_list = [a for a, _ in arrays.values()]
        for name, t in kernel.locals.items():
            if name in scalars:  # a scalar parameter the body reassigns starts as passed
                self.env[name] = scalars[name].astype(t.dtype.numpy).reshape(1, *t.shape)
            else:
                self.env[name] = np.zeros((1, *t.shape), t.dtype.numpy)
        self.consts = {}

    def active_lanes(self) -> np.ndarray:
        """The lanes the current statement runs in."""
        return np.nonzero(_lanes(self.mask, self.n))[0]

    def program(self, lane) -> tuple[int, int, int]:
        """The program id of ``lane``."""
        return tuple(int(p[lane]) for p in self.pid)

    def variable(self, name: str) -> np.ndarray | None:
        """A copy of variable ``name`` as it is now (per lane); None for a name not bound."""
        value = self.env.get(name)
        return None if value is None else np.array(_gathered(value))

    def array(self, param: str) -> np.ndarray:
        """Array parameter ``param`` as the executor addresses it (a 3-D view)."""
        return self.arrays[param][0]

    def run(self):
        self.observer.start(self)
        with np.errstate(all="ignore"):
            self.block(self.kernel.body)

    def active(self) -> bool:
        return self.mask is None or bool(self.mask.any())

    def block(self, body):
        for stmt in body:
            if not self.active():
                return
            getattr(self, "s_" + type(stmt).__name__)(stmt)

    def assign(self, name, value, kind):
        if self.mask is None:
            self.env[name] = value
            if isinstance(value, _Blocks) or (
                value.base is not None
                and any(np.may_share_memory(value, a) for a in self.array_list)
            ):
                self.aliased.add(name)
            else:
                self.aliased.discard(name)
            return
        old = self.read(name)
        self.env[name] = np.where(_expand(self.mask, "scalar", kind), value, old)
        self.aliased.discard(name)

    def read(self, name):
        value = self.env[name]
        if isinstance(value, _Blocks):
            value = self.env[name] = value.tiles()
            self.aliased.discard(name)
        return value

    def detach(self, array):
        """Before a store to ``array``: copy the variables that are views of it."""
        for name in list(self.aliased):
            value = self.env[name]
            held = value.a4 if isinstance(value, _Blocks) else value
            if np.may_share_memory(held, array):
                self.env[name] = np.array(_gathered(value))
                self.aliased.discard(name)

    def value_of(self, e):
        """``ev(e)``, except that a launch-order tile load (or a variable holding one)
        may stay deferred (``_Blocks``): for an assignment, and for a store, which can move it
        block for block."""
        if self.defer_loads:
            if isinstance(e, ir.LoadWindow):
                return self.e_LoadWindow(e, defer=True)
            if isinstance(e, ir.Var):
                return self.env[e.name]
        return self.ev(e)

    def ev(self, e):
        return getattr(self, "e_" + type(e).__name__)(e)


__all__ = ["run"]
