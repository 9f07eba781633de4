"""What an executor tells the one watching it (the trace recorder, the hazard recorders)."""

from __future__ import annotations

import numpy as np

from qnb import ir


class Observer:
    """What the executor tells whoever watches it run: the statements that assign and
    store, and the memory each statement touches. Every method is a no-op here, so an
    unwatched run pays one call per event and computes nothing for it. The trace
    recorder (``qnb.backends.cpu.trace.Recorder``) is the observer that builds a
    ``qnb.Trace``.

    An observer reads the run through the executor it is given at ``start``: its
    ``kernel``, ``n`` (lanes), ``active_lanes()``, ``program(lane)``, ``variable(name)``
    and ``array(param)``. Memory is reported in the executor's own terms, per lane (arrays of
    one entry where every lane agrees): ``batch`` is the slab of the 3-D view, rows and
    columns index its last two axes, and ``write`` marks a store's own window."""

    # True: every value a statement produces is computed in full before the next one
    # runs (a launch-order tile load is not left deferred), so the observer sees it.
    sees_every_value = False

    def start(self, executor) -> None:  # (the interpreter's _Executor)
        """A run of programs begins: one per chunk of programs (:func:`run`); the trace
        runs all its programs in one."""

    def assign_begins(self, stmt: ir.Assign) -> None:
        """``stmt`` is about to evaluate its value (the variables hold what it reads)."""

    def assigned(self, stmt: ir.Assign, value: np.ndarray) -> None:
        """``stmt`` assigned ``value`` (per lane) to its variable."""

    def store_begins(self, stmt) -> None:
        """The store ``stmt`` (``StoreWindow``, ``VecStore``, ``ArrayStore``) begins."""

    def stored(self, stmt, value: np.ndarray) -> None:
        """The store ``stmt`` wrote ``value`` (per lane) to its array."""

    def window(self, param, batch, r0, c0, row_end, col_end, shape, write) -> None:
        """An M×N tile window of ``param``: rows ``r0 ..`` and columns ``c0 ..``, of which
        those below ``row_end``/``col_end`` exist (already clamped to the array)."""

    def line(self, param, batch, start, end, fixed, axis, size, write) -> None:
        """A vector of ``size`` elements from ``start``, of which those below ``end`` exist:
        along a 1-D array (``fixed`` None), a row (``axis`` 1: ``fixed`` is the row) or a
        column (``fixed`` is the column)."""

    def element(self, param, batch, row, col, write) -> None:
        """One element per lane (row 0 for a 1-D array)."""

    def atomic(self, stmt, param, batch, rows, cols, ok) -> None:
        """The atomic ``stmt`` updated the elements ``[batch, rows, cols]`` of ``param``
        where ``ok`` (each ``(lanes, *shape)``). Not a read nor a store: ``qnb.check``
        ignores it."""


# The observer of every run that nobody watches.
UNWATCHED = Observer()
