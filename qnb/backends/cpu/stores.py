"""Which program first stores into marked elements: an observer of the cpu executor.

``qnb.compare`` asks it for the program to probe: the first program, in grid order,
that stored an element where a backend differs. It watches the stores only (the
executor reports each store's window per lane), so a run costs no more than an
unwatched interpreter run; nothing is recorded. Imported only by ``qnb.compare``.
"""

from __future__ import annotations

from contextlib import suppress

import numpy as np

from qnb import ir
from qnb.backends.cpu.interpreter import run
from qnb.backends.cpu.observer import Observer


def first_storing(kernel: ir.KernelIR, grid, args, masks) -> int | None:
    """The flat index (x fastest) of the first program of ``grid`` whose store reaches
    an element where ``masks[param]`` (the array's shape) is True; None if none does."""
    watcher = StoreWatcher(masks, grid)
    with suppress(Found):
        run(kernel, grid, args, observer=watcher)
    return watcher.found


def _as_3d(mask: np.ndarray) -> np.ndarray:
    return mask.reshape((1,) * (3 - mask.ndim) + mask.shape)


class Found(Exception):
    """The program watched for is found: the rest of the run cannot change it."""


class StoreWatcher(Observer):
    """Watches a cpu run for the first program (grid order) whose store reaches a marked
    element. Each mask is kept as a summed-area table, so a lane's window is tested in
    a few lookups whatever its size."""

    def __init__(self, masks, grid):
        self.tables = {}
        for name, mask in masks.items():
            counts = _as_3d(mask).astype(np.int64).cumsum(1).cumsum(2)
            self.tables[name] = np.pad(counts, ((0, 0), (1, 0), (1, 0)))
        self.grid = grid
        self.found = None  # the flat index of the first program found
        self.executor = None

    def start(self, executor) -> None:
        if self.found is not None:  # (a later chunk holds only later programs)
            raise Found
        self.executor = executor

    def window(self, param, batch, r0, c0, row_end, col_end, shape, write) -> None:
        if write:
            row_end = np.minimum(row_end, r0 + shape[0])
            col_end = np.minimum(col_end, c0 + shape[1])
            self.stored_in(param, batch, r0, row_end, c0, col_end)

    def line(self, param, batch, start, end, fixed, axis, size, write) -> None:
        if not write:
            return
        end = np.minimum(end, start + size)
        if fixed is None:
            self.stored_in(param, batch, 0, 1, start, end)
        elif axis == 1:
            self.stored_in(param, batch, fixed, fixed + 1, start, end)
        else:
            self.stored_in(param, batch, start, end, fixed, fixed + 1)

    def element(self, param, batch, row, col, write) -> None:
        if write:
            self.stored_in(param, batch, row, row + 1, col, col + 1)

    def stored_in(self, param, batch, r0, r1, c0, c1) -> None:
        table = self.tables.get(param)
        if table is None:
            return
        lanes = self.executor.active_lanes()
        n = self.executor.n
        slabs, rows, cols = table.shape[0], table.shape[1] - 1, table.shape[2] - 1
        b = np.clip(np.broadcast_to(batch, (n,))[lanes], 0, slabs - 1)
        r0, r1 = (np.clip(np.broadcast_to(x, (n,))[lanes], 0, rows) for x in (r0, r1))
        c0, c1 = (np.clip(np.broadcast_to(x, (n,))[lanes], 0, cols) for x in (c0, c1))
        r1, c1 = np.maximum(r0, r1), np.maximum(c0, c1)
        hits = table[b, r1, c1] - table[b, r0, c1] - table[b, r1, c0] + table[b, r0, c0]
        hit = lanes[hits > 0]
        if not hit.size:
            return
        first = int(hit.min())  # lanes run in grid order
        x, y, z = self.executor.program(first)
        flat = x + self.grid[0] * (y + self.grid[1] * z)
        self.found = flat if self.found is None else min(self.found, flat)
        if first == 0:
            raise Found  # the chunk's first program: no later store finds an earlier one


__all__ = ["Found", "StoreWatcher", "first_storing"]
