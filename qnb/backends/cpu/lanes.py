"""The interpreter's values on program lanes: arrays, chunks of programs, grid tiles, lane-last moves."""

from __future__ import annotations

import numpy as np

from qnb import ir
from qnb.backends.base import DeviceArray
from qnb.backends.cpu import semantics
from qnb.backends.cpu.semantics import _cholesky, _solve_lower
from qnb.errors import BackendError

_ARANGE = np.arange(16, dtype=np.int64)


_EYE = {}


# Programs executed together at most (bounds the memory of one tile value: 64 MiB at f32);
# a kernel with larger tiles runs fewer at once (CHUNK_ELEMENTS elements per value).
CHUNK = 65536


CHUNK_ELEMENTS = CHUNK * 256


def _arange(n: int) -> np.ndarray:
    return _ARANGE if n == 16 else np.arange(n, dtype=np.int64)


# Programs a kernel of scalars alone runs at once: each value is one element a program,
# so 2²⁰ of them hold 8 MiB a value at most (a launch over 10⁸ programs runs in 96
# chunks, in bounded memory, and the 2²⁰ programs of a tile-free form in one).
SCALAR_CHUNK = 1 << 20


def chunk_programs(kernel: ir.KernelIR) -> int:
    """How many programs run together, the same for both executors (programs in one
    chunk run in lock step, chunk after chunk: where programs race, or an atomic's old
    value is read, the answer depends on it): SCALAR_CHUNK for a kernel of scalars
    alone, else CHUNK, fewer where a value is larger than 16×16."""
    largest = 256
    holds_tiles = False
    for t in kernel.locals.values():
        largest = max(largest, t.size)
        holds_tiles = holds_tiles or t.kind in ("tile", "vec")
    for node in ir.walk_body(kernel.body):
        typ = getattr(node, "type", None)
        if isinstance(typ, ir.Type) and typ.kind in ("tile", "vec"):
            largest = max(largest, typ.size)
            holds_tiles = True
    return chunk_of(largest, holds_tiles)


def chunk_of(largest: int, holds_tiles: bool) -> int:
    """:func:`chunk_programs` of a kernel whose largest value holds ``largest`` elements."""
    return chunk_for(largest) if holds_tiles else SCALAR_CHUNK


def out_of_memory(kernel_name: str, grid) -> BackendError:
    """The error for a launch whose values do not fit in host memory (NumPy's
    ``MemoryError``), naming the kernel and the grid."""
    programs = grid[0] * grid[1] * grid[2]
    return BackendError(
        f"the cpu ran out of host memory running kernel {kernel_name!r} over "
        f"{programs:,} programs (grid {tuple(grid)}): fewer programs per launch, or "
        "smaller tiles, fit"
    )


def chunk_for(largest: int) -> int:
    """How many programs run together when the largest value holds ``largest`` elements
    (at least 256: a 16×16 tile)."""
    return max(1, min(CHUNK, CHUNK_ELEMENTS // largest))


class CpuArray(DeviceArray):
    """``qnb.to_device(x)`` on the cpu backend: a private host copy."""

    backend_name = "cpu"

    def __init__(self, array: np.ndarray):
        super().__init__(array.shape, array.dtype)
        self.host = np.ascontiguousarray(array).copy()

    def numpy(self) -> np.ndarray:
        return self.host.copy()


def _as_3d(array: np.ndarray) -> np.ndarray:
    if array.ndim == 3:
        return array
    if array.ndim == 2:
        return array[None]
    return array[None, None]


def _expand(value, kind, to_kind):
    """Give a per-program value the trailing axes of ``to_kind`` for broadcasting."""
    if kind == to_kind or kind != "scalar":
        return value
    return value[:, None, None] if to_kind == "tile" else value[:, None]


def _lanes(mask, n):
    return np.ones(n, bool) if mask is None else mask


def _move_blocks(dst: np.ndarray, src: np.ndarray) -> None:
    """``dst[...] = src`` for two 4-D block views whose N-element rows are contiguous:
    each row moves as one N-element unit, which is what makes a block gather or
    scatter cost about a memcpy rather than a strided element loop."""
    if dst.dtype == src.dtype and dst.strides[-1] == src.strides[-1] == dst.itemsize:
        row = np.dtype((np.void, dst.shape[-1] * dst.itemsize))
        np.copyto(dst.view(row), src.view(row))
    else:
        dst[...] = src


class _Blocks:
    """Tiles held deferred, the one form both executors use: every program's M×N tile at
    once as a 4-D array ``(RB, M, CB, N)`` whose block ``[r, :, c, :]`` is the tile of the
    program with ``program_id(ra) == r`` and ``program_id(ca) == c`` (``ra``, ``ca`` are
    the grid axes 0 and 1, either way round). ``RB`` or ``CB`` may be 1 (the prepared
    path's block grids): the tile is then the same along that grid axis. Often a view
    of the array the tiles were loaded from (the interpreter's launch-order loads, the
    prepared path's block-grid loads): a store with the same tiling moves them block
    for block, and any other use gathers them into the usual ``(programs, M, N)``."""

    __slots__ = ("a4", "ra")

    def __init__(self, a4, ra):
        self.a4 = a4
        self.ra = ra

    @classmethod
    def of_launch_order(cls, tiled: np.ndarray) -> _Blocks:
        """The tiles of a ``(gy, gx, M, N)`` array whose C-order blocks are the programs'
        (launch order, ``program_id(0)`` fastest)."""
        return cls(tiled.transpose(0, 2, 1, 3), 1)

    @property
    def dtype(self):
        return self.a4.dtype

    def full(self, grid):
        _, m, _, n = self.a4.shape
        return np.broadcast_to(self.a4, (grid[self.ra], m, grid[1 - self.ra], n))

    def launch_order(self, grid=None) -> np.ndarray:
        """The ``(gy, gx, M, N)`` view whose C-order blocks are the programs' tiles (grid
        None: ``a4`` holds every program's own block, no axis broadcast)."""
        a4 = self.a4 if grid is None else self.full(grid)
        return a4.transpose(2, 0, 1, 3) if self.ra == 0 else a4.transpose(0, 2, 1, 3)

    def tiles(self, grid=None) -> np.ndarray:
        """The ``(programs, M, N)`` value, gathered (``grid`` as :meth:`launch_order`)."""
        t = self.launch_order(grid)
        out = np.empty(t.shape, t.dtype)
        _move_blocks(out, t)
        return out.reshape(-1, t.shape[2], t.shape[3])


def _gathered(value):
    return value.tiles() if isinstance(value, _Blocks) else value


class _Loop:
    __slots__ = ("broken", "continued")

    def __init__(self, n):
        self.broken = np.zeros(n, bool)
        self.continued = np.zeros(n, bool)


# Programs per lanes-last pass: a pass's arrays (16×16×1024 f64 = 2 MiB each) stay in
# the last-level cache for its 16 steps, and each step is a few NumPy calls, whose fixed
# cost 1024 programs amortise better than 512 (measured: batched Cholesky 1.7× -> 1.4×
# NumPy's, 12% fewer instructions for Cholesky + solve).
LANE_CHUNK = 1024


# A move into a pass goes through blocks of this many programs: NumPy's strided copy
# is a cache and TLB miss per element when it transposes a whole pass of programs
# that lie apart, but a block of 16 programs is 32 KiB, so transposing block by block
# and then moving whole rows of blocks costs about two plain copies instead of four.
LANE_BLOCK = 16


def _lanes_last(fn, *operands, shape=(16, 16), dtype=None):
    """``fn(*parts, out)`` over chunks of programs: each operand (``(n, ...)`` or
    ``(1, ...)``) arrives as a ``(..., lanes)`` array, and ``fn`` writes ``out``
    (``(*shape, lanes)``, of ``dtype``, the first operand's where None). An operand that
    ``fn`` reads more than once arrives with its lane axis contiguous (moved there,
    unless it already is); one it reads once (``_READ_ONCE``) is read where it lies. The
    result is an ``(n, *shape)`` view of a lanes-last array (its program axis the
    contiguous one): a following lanes-last op takes it without moving it, and a store
    copies it straight into the array."""
    n = max(op.shape[0] for op in operands)
    dtype = operands[0].dtype if dtype is None else np.dtype(dtype)
    chunk = max(1, min(n, LANE_CHUNK))
    read_once = _READ_ONCE.get(fn, ())
    # Scratch reused by every chunk (fresh 1 MiB arrays per chunk cost page faults);
    # an operand already lanes last, or read once, needs none.
    moves = []
    for i, op in enumerate(operands):
        last = _as_lanes_last(op) if op.shape[0] > 1 else None
        if last is None and i in read_once and op.shape[0] > 1:
            last = np.moveaxis(op, 0, -1)
        moves.append(last if last is not None else _LaneMoves(op.shape[1:], op.dtype, chunk))
    result = _lanes_last_result(shape, dtype, n)
    for start in range(0, n, chunk):
        stop = min(n, start + chunk)
        parts = [
            _one_lane(op)
            if op.shape[0] == 1
            else move.to_lanes_last(op[start:stop])
            if isinstance(move, _LaneMoves)
            else move[..., start:stop]
            for move, op in zip(moves, operands)
        ]
        if stop - start == 1:  # einsum sums a lone program's dot products in another order
            two = np.empty((*shape, 2), dtype)
            fn(*[np.repeat(part, 2, axis=-1) for part in parts], two)
            result[..., start] = two[..., 0]
        else:
            fn(*parts, result[..., start:stop])
    return np.moveaxis(result, -1, 0)


def _lanes_last_result(shape, dtype, n):
    """An uninitialised ``(*shape, n)`` array whose rows are not a multiple of 1 KiB
    apart: a step reads a slice of many rows and writes another, and rows a power of two
    apart fall into the same cache sets, and alias (4 KiB apart) between the loads and
    the stores of one ufunc."""
    dtype = np.dtype(dtype)
    width = n
    if n > 1 and (n * dtype.itemsize) % 1024 == 0:
        width += max(1, 64 // dtype.itemsize)
    return np.empty((*shape, width), dtype)[..., :n]


def _as_lanes_last(programs):
    """``programs`` (``(n, *inner)``) as its ``(*inner, n)`` view when the program axis
    is the contiguous one (a lanes-last op's result); else None."""
    if programs.ndim == 0 or programs.strides[0] != programs.itemsize:
        return None
    return np.moveaxis(programs, 0, -1)


def _one_lane(operand):
    """A ``(1, ...)`` operand (the same in every program) as a contiguous ``(..., 1)``."""
    return np.ascontiguousarray(np.moveaxis(operand, 0, -1))


class _LaneMoves:
    """Moves chunks of programs between ``(lanes, *inner)`` and ``(*inner, lanes)``,
    through blocks of LANE_BLOCK programs (see there), with scratch sized for ``chunk``
    programs and reused for every chunk."""

    def __init__(self, inner, dtype, chunk):
        self.inner = tuple(inner)
        size = int(np.prod(self.inner, dtype=np.int64))
        self.size = size
        self.lanes_last = np.empty(size * chunk, dtype)
        self.by_block = np.empty(size * chunk, dtype)

    def _scratch(self, buffer, *shape):
        return buffer[: int(np.prod(shape, dtype=np.int64))].reshape(shape)

    def to_lanes_last(self, programs):
        """``programs`` as a contiguous ``(*inner, lanes)`` array (this scratch)."""
        lanes, inner = programs.shape[0], self.inner
        out = self._scratch(self.lanes_last, *inner, lanes)
        if lanes % LANE_BLOCK or lanes == LANE_BLOCK:
            np.copyto(out, np.moveaxis(programs, 0, -1))
            return out
        blocks = lanes // LANE_BLOCK
        by_block = self._scratch(self.by_block, blocks, *inner, LANE_BLOCK)
        np.copyto(by_block, np.moveaxis(programs.reshape(blocks, LANE_BLOCK, *inner), 1, -1))
        np.copyto(out.reshape(*inner, blocks, LANE_BLOCK), np.moveaxis(by_block, 0, -2))
        return out

    def from_lanes_last(self, result, out):
        """Writes ``result`` (``(*inner, lanes)``, its lane axis contiguous) into ``out``
        (``(lanes, *inner)``, any strides)."""
        lanes, inner = out.shape[0], self.inner
        if lanes % LANE_BLOCK or lanes == LANE_BLOCK:
            np.copyto(out, np.moveaxis(result, -1, 0))
            return
        blocks = lanes // LANE_BLOCK
        by_block = self._scratch(self.by_block, blocks, *inner, LANE_BLOCK)
        np.copyto(np.moveaxis(by_block, 0, -2), result.reshape(*inner, blocks, LANE_BLOCK))
        np.copyto(out.reshape(blocks, LANE_BLOCK, *inner), np.moveaxis(by_block, -1, 1))


# The operands each reads once, element by element (Cholesky's ``a``, the solve's right-hand
# side): read in place, where moving them lanes last first would cost more than it saves.
_READ_ONCE = {_cholesky: (0,), _solve_lower: (1,)}


_mask_lanes = semantics.mask_lanes
