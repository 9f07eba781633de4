"""The cpu backend's prepared path: the IR turned into closures once, when an artifact loads.

The interpreter (:class:`qnb.backends.cpu.interpreter._Executor`) walks the IR at every launch; this
module walks it once, in :func:`prepare`, and returns a launcher made of closures, one per
IR node, that compute exactly what the interpreter computes with the same op tables
(``_BINARY``, ``_UNARY``, ``_REDUCE``, ...). Values keep the interpreter's layout (a leading
program axis of length P, or 1 for a value that is the same in every program), and
what the walk learns once is not relearnt per launch:

- *uniformity*: which values are the same in every program (no ``program_id`` reaches
  them). Their control flow is plain Python, and their windows and indices are Python ints,
  so a launch of a trivial kernel is a few NumPy calls. Constant subexpressions are folded.
- *block grids*: an M×N tile loaded at ``(program_id(a) * M, program_id(b) * N)`` is, over
  all programs together, the array itself seen as a grid of M×N blocks (:class:`_Blocks`).
  Elementwise ops on such tiles are one array expression on the array, a store to the
  same grid is one assignment, and ``a @ b`` of a block row strip by a block column strip
  (the K loop of a tiled matmul) is one GEMM. Any other use gathers the programs' tiles.
- *program-indexed elements*: ``x[program_id(0)]`` over a 1-D grid is a slice of ``x``.
- *strided windows*: bounds ``program_id(a) * f + u`` (``u`` the same in every program)
  step by a fixed amount from lane to lane, so over a 1-D grid the tiles are one strided
  view of the array (loads copy it; stores assign it, or compose overlapping rows with
  the last lane's winning, as the interpreter's scatter), decided per launch from the
  grid and the shapes with Python ints (memoised where the bounds are constants). Over
  a 2-D grid (both program ids stepping) the tiles of the whole grid are one 4-D view
  where every tile lies in the array and stores do not overlap. Where
  tiles leave the array, a load reads a filled copy of the region they span; anything
  else (a mask, gaps, a bound check that could fail) takes the generic masked path.
- *windows stored back in place*: a kernel that ends in ``t = load(x, w)`` and an
  elementwise ``f(t).store(y, w)`` at the same window (programs a row apart, their
  windows overlapping) stores ``f`` of the region the windows cover, computed once
  (:mod:`qnb.backends.cpu.prepared_union`): where windows overlap, every program
  stores ``f`` of the same element, so the last program's value is that one.

A loop whose trip count differs between programs, or with a ``break``/``continue`` under
a per-program branch, runs in the interpreter's lock step, turn by turn over the lanes
still in it (:mod:`qnb.backends.cpu.prepared_lanes`). A loop of the same bounds in every
program whose turns do not depend on each other runs them all at once, as a second grid
axis (:mod:`qnb.backends.cpu.prepared_batched`). Every IR node has a closure here;
only a node this module does not know (none today) leaves a kernel to the interpreter:
:func:`prepare` returns None. Bounds
checks are exact and raise the interpreter's errors (same message, same program). The
trace always runs the interpreter (its recorder watches every step).
"""

from __future__ import annotations

import numpy as np

from qnb import ir
from qnb.backends.cpu.lanes import out_of_memory
from qnb.backends.cpu.prepared_base import (
    _IGNORE_ERRORS,
    _LEAVES,
    _NO_ALIASES,
    _ONE_PROGRAM,
    _binder,
    _Blocks,
    _Facts,
    _fresh_env,
    _OneProgram,
    _program_ids,
    _State,
    _Unsupported,
    _varying_names,
)
from qnb.backends.cpu.prepared_batched import BatchedLoops
from qnb.backends.cpu.prepared_blocks import BlockGridMixin
from qnb.backends.cpu.prepared_elements import ElementClosures
from qnb.backends.cpu.prepared_gemm import GemmMixin
from qnb.backends.cpu.prepared_linalg import LinalgClosures
from qnb.backends.cpu.prepared_loops import LoopClosures
from qnb.backends.cpu.prepared_scalars import ScalarClosures
from qnb.backends.cpu.prepared_statements import StatementClosures
from qnb.backends.cpu.prepared_strided import StridedWindowMixin
from qnb.backends.cpu.prepared_tiles import TileClosures
from qnb.backends.cpu.prepared_union import UnionWindows
from qnb.backends.cpu.prepared_windows import WindowClosures
from qnb.errors import QnbIndexError


def prepare(kernel: ir.KernelIR, stored=None):
    """A launcher ``launch(grid, args, stored)`` for ``kernel`` (``stored`` given here is
    its default; None: the arrays the kernel stores to), or None where the kernel needs
    the interpreter."""
    try:
        return _Compiler(kernel).launcher(stored)
    except _Unsupported:
        return None


class _Compiler(
    StatementClosures,
    LoopClosures,
    BatchedLoops,
    GemmMixin,
    BlockGridMixin,
    StridedWindowMixin,
    UnionWindows,
    WindowClosures,
    ElementClosures,
    ScalarClosures,
    TileClosures,
    LinalgClosures,
):
    """The prepared compiler's driver: the launcher, the walk and its checks; its rooms are mixins."""

    def __init__(self, kernel: ir.KernelIR, varying=()):
        self.kernel = kernel
        self.facts = facts = _Facts(kernel)
        self.varying = _varying_names(kernel, facts, varying)
        self.varying_mask = facts.mask(self.varying)
        # per node (the IR lives as long as this walk, so ids stay unique)
        self.built: dict[int, object] = {}  # node -> its closure (see expr)
        # the IR nodes this walk makes (a batched loop's statements, prepared_batched):
        # held as long as the walk, so that no id of theirs is another node's later
        self.made: list = []
        self.chains: dict[int, bool] = {}  # node -> whether it takes out= (writes_over)
        self.ints: dict[tuple, object] = {}  # (int, dtype) -> a Const's closure
        self.assign_count = facts.assign_count
        # top-level variables that hold program_id(a) (factor 1) or program_id(a) * factor
        self.pid_vars: dict[str, tuple[int, int]] = {}
        # top-level variables assigned once, a constant: name -> its value
        self.const_vars: dict[str, np.ndarray] = {}
        self.computes = False  # whether a launch does arithmetic (which may warn)
        self.masked = 0  # depth of per-program branches around the statement being built
        self.loops = 0
        self.exit_depths: list[int] = []  # self.masked at each loop around (see s_Break)
        self.lane_exit_depth = 0  # loops around with per-program exits (see loop_body)
        # a batched loop's kernel (prepared_batched): tiles it assigns that nothing reads
        # after it, and the buffers its assignments of them keep between launches
        self.spare_names: frozenset[str] = frozenset()
        self.spare_pools: list[tuple[str, list]] = []
        # spare name -> (the ids of its last reader's nodes, its reads there): overwritable
        self.last_reads: dict[str, tuple[frozenset, int]] = {}

    def launcher(self, default_stored=None):
        with np.errstate(all="ignore"):  # constants fold as a launch computes them
            body = self.block(self.kernel.body, top=True)
        kernel = self.kernel
        if default_stored is None:
            default_stored = self.facts.stored
        fresh = _fresh_env(kernel)
        if fresh is dict:  # no locals: the scalars bound anew at each launch are the variables
            fresh = None
        aliases = bool(self.assign_count)  # (only an assignment or a loop makes an alias)
        bind = _binder(kernel)
        chunk_size = self.facts.chunk  # (the interpreter's: the same lock step)
        quiet = not self.computes
        pids = {}  # (grid, start, count) -> program ids: a launch's ids are made once
        one = _ONE_PROGRAM

        def launch(grid, args, stored=default_stored):
            bound = bind(args, stored)
            if quiet and (grid is one or grid == one):  # one program, nothing that could warn
                arrays, shapes, scalars = bound
                env = scalars if fresh is None else fresh(scalars)
                body(_OneProgram(arrays, shapes, env, set() if aliases else _NO_ALIASES))
                return
            if not _IGNORE_ERRORS:
                with np.errstate(all="ignore"):
                    run_chunks(grid, bound)
                return
            errors, ignore = _IGNORE_ERRORS  # np.errstate(all="ignore"), without its cost
            token = errors.set(ignore)
            try:
                run_chunks(grid, bound)
            finally:
                errors.reset(token)

        def run_chunks(grid, bound):
            total = grid[0] * grid[1] * grid[2]
            chunk = min(total, chunk_size)
            try:
                for start in range(0, total, chunk or 1):
                    count = min(chunk, total - start)
                    key = (grid, start, count)
                    pid = pids.get(key)
                    if pid is None:
                        if len(pids) > 16:
                            pids.clear()
                        pid = pids[key] = _program_ids(grid, start, count)
                    body(_State(bound, grid, start, count, fresh, pid, aliases))
            except MemoryError:
                pids.clear()
                raise out_of_memory(kernel.name, grid) from None

        return launch

    def is_varying(self, e) -> bool:
        """Whether ``e`` may differ between programs (it reads ``program_id`` or a
        varying local)."""
        return bool(self.facts.reads[id(e)] & self.varying_mask)

    def error(self, message, node):
        err = QnbIndexError(message)
        err.ir_loc = node.loc
        if node.loc is not None and node.loc.unit < len(self.kernel.units):
            err.ir_unit = self.kernel.units[node.loc.unit].qualname
        return err

    def checker(self, message, node):
        """``check(st, bad)``: raise if an active lane is bad (the interpreter's check)."""
        compiler = self

        def check(st, bad, detail=message):
            if st.mask is None and not bad.any():
                return
            n = st.n
            bad = np.broadcast_to(bad, (n, *bad.shape[1:])) if bad.shape[:1] == (1,) else bad
            if bad.ndim > 1:
                bad = bad.reshape(bad.shape[0], -1).any(axis=1)
            if st.mask is not None:
                bad = bad & st.mask
            if bad.any():
                lane = int(np.argmax(bad))
                where = tuple(int(p[lane]) for p in st.pid)
                raise compiler.error(f"{detail} (in program {where})", node)

        return check

    def first_active(self, st):
        lane = 0 if st.mask is None else int(np.argmax(st.mask))
        return tuple(int(p[lane]) for p in st.pid)

    def block(self, body, top=False):
        steps = []
        for stmt in body:
            steps.append(self.stmt(stmt))
            if top and isinstance(stmt, ir.Assign):
                self.note_pid_var(stmt)
        union = self.union_pair(body) if top else None
        if union is not None:  # (prepared_union: the last two statements as one region)
            load_step, store_step = steps[-2:]

            def load_and_store(st):
                if not union(st):
                    load_step(st)
                    store_step(st)

            steps[-2:] = [load_and_store]
        steps = tuple(steps)
        if self.lane_exit_depth:  # (a per-program exit may leave no program running)

            def run_while_any(st):
                for step in steps:
                    mask = st.mask
                    if mask is not None and not mask.any():
                        return
                    step(st)

            return run_while_any
        if len(steps) == 1:
            return steps[0]

        def run(st):
            for step in steps:
                step(st)

        return run

    def stmt(self, s):
        method = getattr(self, "s_" + type(s).__name__, None)
        if method is None:
            raise _Unsupported(type(s).__name__)
        return method(s)

    def expr(self, e):
        """The closure of ``e``, built once: the analyses ask for the same bounds and
        operands again (a window's bounds, its blocks' spans, a strided form)."""
        fn = self.built.get(id(e))
        if fn is None:
            fn = self.built[id(e)] = self.build(e)
        return fn

    def build(self, e):
        method = getattr(self, "e_" + type(e).__name__, None)
        if method is None:
            raise _Unsupported(type(e).__name__)
        fn = method(e)
        if isinstance(e, _LEAVES):  # (nothing to fold, no arithmetic)
            return fn
        if not self.constant(e):
            self.computes = True
            return fn
        try:
            value = fn(None)  # under launcher()'s errstate
        except Exception:  # noqa: BLE001 - an error stays where it happens at launch
            return fn
        if not isinstance(value, _Blocks):
            value.flags.writeable = False
            return lambda st: value
        return fn
