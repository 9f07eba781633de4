"""The one walker over the IR shared by the GPU renderers (WGSL and CUDA C++).

A GPU target is a subclass of :class:`GpuRenderer` that fills in a *table of
spellings* (type names, operator templates, math functions, the barrier) and
overrides a few hooks where the languages differ in shape rather than in words
(declarations, bindings, the entry point, the uniform broadcast).

Program model (see docs/ARCHITECTURE.md): one program is one workgroup/block of
256 threads, except in a kernel that holds no tile or vec ("solo" below). Thread ``(ti, tj) = (local_index // 16, local_index % 16)`` holds
element ``[ti, tj]`` of every tile and element ``[ti]`` of every vec (replicated
over ``tj``) in a private variable; scalars are held, equal, by every thread.
Elementwise ops need no exchange. Ops that need other threads' elements go
through a 256-element scratch array in workgroup/shared memory between barriers;
scalars read from memory or from tiles are written by one thread to a
broadcast slot and read back with :meth:`GpuRenderer.uniform_load`, so every
scalar a branch or loop tests is provably uniform (WGSL's uniformity analysis
then accepts the barriers inside).

A kernel whose every value is a scalar has nothing for 256 threads to share: it
is rendered *solo*, one thread per program and ``solo_programs`` programs per
workgroup/block (``Layout.programs_per_group``), with no barriers, no broadcast
and no ``q_lid``/``q_ti``/``q_tj``; a thread past the grid's last program returns.

Memory ordering: scalar array reads and writes are done by thread 0 only (so a
scalar read sees the program's own earlier scalar write). A program's accesses to
one array happen in program order, as on the cpu backend, although different
threads make them: a store is preceded by a storage barrier when anything else in
the kernel (or the store itself, in a loop) may touch the same memory, so every
thread's earlier loads and stores come first; and a store that a load of the same
memory may follow (later in the program, or in a loop) is followed by one, so that
load sees it. Memory is the same for two
array parameters of one dtype, since one array may be passed for both.

Generated names: ``v_*`` locals, ``a_*`` array bindings, ``p_*`` scalar
parameters, ``n_*`` array dims, ``q*`` renderer temporaries, ``qs_*`` scratch.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import ClassVar

from qnb import ir
from qnb.backends import probe
from qnb.dtypes import DType, bf16, bool_, f16, f32, f64, i32
from qnb.errors import BackendError

THREADS = ir.TILE * ir.TILE
_ARITH = {"add": "+", "sub": "-", "mul": "*"}


@dataclass
class Layout:
    """How a kernel's parameters reach the device (stored in the artifact).

    ``arrays``: one entry per array parameter, in parameter order:
    ``{"name", "dtype", "ndim", "binding", "stored": bool, "loaded": bool}``.
    ``scalars``: ``{"name", "dtype", "slot"}``; ``dims``: ``{"name", "axis", "slot"}``.
    Each slot is one 4-byte word of the parameter block (uniform buffer / kernel args).
    """

    arrays: list[dict] = field(default_factory=list)
    scalars: list[dict] = field(default_factory=list)
    dims: list[dict] = field(default_factory=list)
    uniform_binding: int = 0
    words: int = 0
    kinds: list[str] = field(default_factory=list)  # "array" / "scalar" per parameter, in order
    grid_slot: int = -1  # first of 3 words holding the launch grid, where the target needs it
    programs_per_group: int = 1  # programs one workgroup/block runs (more than 1: solo)
    threads: int = THREADS  # threads (invocations) per workgroup/block

    def as_json(self) -> dict:
        return {
            "arrays": self.arrays,
            "scalars": self.scalars,
            "dims": self.dims,
            "uniform_binding": self.uniform_binding,
            "words": self.words,
            "kinds": self.kinds,
            "grid_slot": self.grid_slot,
            "programs_per_group": self.programs_per_group,
            "threads": self.threads,
        }


@dataclass
class Rendered:
    """A rendered kernel: the source text, the line map and the binding layout."""

    source: str
    line_locs: list  # per generated line (0-based): (unit, line, col) or None
    layout: Layout
    uses_f16: bool
    entry: str = "main"


_LOADS = (ir.ArrayLoad, ir.LoadWindow, ir.VecLoad)
_STORES = (ir.ArrayStore, ir.StoreWindow, ir.VecStore)


def _post_order(node):
    """``node``'s IR below it, then ``node``: a store comes after the loads of its value."""
    for child in ir.children(node):
        yield from _post_order(child)
    yield node


def _store_barriers(kernel: ir.KernelIR) -> dict[int, tuple[bool, bool]]:
    """Per store (by ``id``): whether a load or store of memory it may touch comes before
    it, and whether a load comes after it, in program order. Two array parameters of one
    dtype may be one array, so memory is told apart by dtype alone."""
    order = [
        n for stmt in kernel.body for n in _post_order(stmt) if isinstance(n, _LOADS + _STORES)
    ]
    loads_after: dict[DType, int] = {}
    for node in order:
        if isinstance(node, _LOADS):
            loads_after[node.view.type.dtype] = loads_after.get(node.view.type.dtype, 0) + 1
    touched: set[DType] = set()
    barriers = {}
    for node in order:
        dtype = node.view.type.dtype
        if isinstance(node, _LOADS):
            loads_after[dtype] -= 1
        else:
            barriers[id(node)] = (dtype in touched, loads_after.get(dtype, 0) > 0)
        touched.add(dtype)
    return barriers


def _node_dtypes(node):
    t = getattr(node, "type", None)
    if isinstance(t, ir.Type):
        yield t.dtype
    if isinstance(node, ir.ArrayView):
        yield node.type.dtype


class GpuRenderer:
    """Render a :class:`~qnb.ir.KernelIR` to GPU source. Subclasses are spelling tables."""

    language = "?"
    entry = "main"
    # ---- the table of spellings (subclasses fill these in)
    type_names: ClassVar[dict] = {}  # DType -> type spelling
    binary_templates: ClassVar[dict] = {
        "add": "({a} + {b})",
        "sub": "({a} - {b})",
        "mul": "({a} * {b})",
        "div": "({a} / {b})",
        "lt": "({a} < {b})",
        "le": "({a} <= {b})",
        "gt": "({a} > {b})",
        "ge": "({a} >= {b})",
        "eq": "({a} == {b})",
        "ne": "({a} != {b})",
        "and": "({a} & {b})",
        "or": "({a} | {b})",
        "xor": "({a} != {b})",
    }
    logical_templates: ClassVar[dict] = {"and": "({a} && {b})", "or": "({a} || {b})"}
    unary_templates: ClassVar[dict] = {"neg": "(-{a})", "not": "(!{a})", "invert": "(~{a})"}
    math_functions: ClassVar[dict] = {
        "abs": "abs",
        "exp": "exp",
        "exp2": "exp2",
        "log": "log",
        "log2": "log2",
        "sqrt": "sqrt",
        "sin": "sin",
        "cos": "cos",
        "tanh": "tanh",
        "ceil": "ceil",
        "max": "max",
        "min": "min",
        "floor": "floor",
        "pow": "pow",
    }
    barrier = "workgroupBarrier();"
    storage_barrier = "storageBarrier();"
    indent_unit = "  "
    solo_programs = 64  # programs per workgroup/block for a kernel that holds no tile

    # ------------------------------------------------------------------ hooks a target overrides

    def type_name(self, dtype: DType) -> str:
        if dtype is f64 and f64 not in self.type_names:
            raise BackendError(f"{self.language} has no f64")
        return self.type_names[dtype]

    def literal(self, value, dtype: DType) -> str:
        raise NotImplementedError

    def cast(self, text: str, source: DType, target: DType) -> str:
        return f"{self.type_name(target)}({text})"

    def select(self, cond: str, if_true: str, if_false: str) -> str:
        return f"select({if_false}, {if_true}, {cond})"

    def declare_var(self, name: str, dtype: DType, init: str | None = None) -> str:
        raise NotImplementedError

    def declare_let(self, name: str, dtype: DType, value: str) -> str:
        raise NotImplementedError

    def declare_scratch(self, name: str, dtype: DType, size: int) -> str:
        raise NotImplementedError

    def scratch_dtype(self, dtype: DType) -> DType:
        """The element type a value of ``dtype`` is exchanged through."""
        return dtype

    def scalar_param(self, name: str) -> str:
        """Reads scalar parameter ``name`` (already sanitised, e.g. ``p_x``)."""
        raise NotImplementedError

    def array_dim(self, field_name: str) -> str:
        raise NotImplementedError

    def array_element(self, binding: str, index: str) -> str:
        return f"{binding}[{index}]"

    def wide(self, value: str) -> str:
        """An i32 index term as the type flat array offsets are computed in. WGSL keeps
        i32 (a storage binding is far below 2**31 elements); CUDA widens to 64 bits, since
        an array on a large GPU may hold more than 2**31 elements."""
        return value

    def array_read(self, binding: str, index: str, dtype: DType) -> str:
        """An array element as a value of ``dtype`` (bool arrays may be stored as words)."""
        return self.array_element(binding, index)

    def array_write(self, binding: str, index: str, value: str, dtype: DType) -> str:
        return f"{self.array_element(binding, index)} = {value};"

    def program_id(self, which: str, axis: int) -> str:
        raise NotImplementedError

    def uniform_load(self, slot: str, target: str) -> list[str]:
        """Statements that wait for the whole program, then set ``target`` to ``slot``
        (written by one thread) in a way the compiler knows is uniform."""
        return [self.barrier, f"{target} = {slot};"]

    def open_loop(self, increment: str | None) -> None:
        """Emit the head of an endless loop whose ``continue`` runs the statement
        ``increment`` (if any) first; :meth:`close_loop` ends it."""
        raise NotImplementedError

    def close_loop(self, increment: str | None) -> None:
        raise NotImplementedError

    def function_open(self, name: str, params: list[tuple[str, DType]], result: DType) -> str:
        raise NotImplementedError

    def prelude(self, kernel: ir.KernelIR, layout: Layout, uses_f16: bool) -> list[str]:
        """Everything before the helpers: extensions, bindings, the parameter block."""
        raise NotImplementedError

    def entry_open(self, kernel: ir.KernelIR, layout: Layout) -> list[str]:
        """The entry point's signature; must define u32 ``q_lid`` and i32 ``q_ti``/``q_tj``."""
        raise NotImplementedError

    def entry_close(self) -> list[str]:
        return ["}"]

    # ------------------------------------------------------------------ driver

    def render(self, kernel: ir.KernelIR) -> Rendered:
        self.kernel = kernel
        self._lines: list[str] = []
        self._locs: list = []
        self._depth = 0
        self._loc: ir.Loc | None = None
        self._temp = 0
        self._names: dict[str, str] = {}
        self._taken: set[str] = set()
        self._scratch: dict[str, DType] = {}
        self._helpers: dict[str, list[str]] = {}
        self._check_dtypes(kernel)
        self.loaded, self.stored = ir.array_uses(kernel)
        self.probe = probe.is_probe(kernel)
        if self.probe:  # the walker writes the probe buffer itself: the launcher copies it back
            self.stored = self.stored | {probe.PROBE_PARAM}
        self.store_barriers = _store_barriers(kernel)
        self._loops = 0
        self.solo = not ir.holds_tiles(kernel)
        self.layout = self._layout(kernel)
        if self.solo:
            self.layout.programs_per_group = self.layout.threads = self.solo_programs
        self.uses_f16 = (
            any(d is f16 for node in ir.walk_body(kernel.body) for d in _node_dtypes(node))
            or any(p.type.dtype is f16 for p in kernel.params)
            or any(t.dtype is f16 for t in kernel.locals.values())
        )

        # The body first (it decides which scratch arrays and helpers exist).
        self._depth = 1
        for name, typ in kernel.locals.items():
            self.emit(self.declare_var(self.local(name), typ.dtype))
        for param in kernel.scalars:  # a scalar parameter the body reassigns is a local too
            if param.name in kernel.locals:
                self.emit(f"{self.local(param.name)} = {self.param_value(param)};")
        if self.probe:
            self.probe_open()
        self.block(kernel.body)
        body_lines, body_locs = self._lines, self._locs

        self._lines, self._locs, self._depth = [], [], 0
        for line in self.prelude(kernel, self.layout, self.uses_f16):
            self.emit(line)
        for name, dtype in self._scratch.items():
            self.emit(self.declare_scratch(name, dtype, THREADS if name.startswith("qs_") else 0))
        for lines in self._helpers.values():
            for line in lines:
                self._lines.append(line)
                self._locs.append(None)
        for line in self.entry_open(kernel, self.layout):
            self.emit(line)
        self._lines += body_lines
        self._locs += body_locs
        for line in self.entry_close():
            self.emit(line)
        source = "\n".join(self._lines) + "\n"
        locs = [None if loc is None else (loc.unit, loc.line, loc.col) for loc in self._locs]
        return Rendered(source, locs, self.layout, self.uses_f16, self.entry)

    def _check_dtypes(self, kernel: ir.KernelIR) -> None:
        """Every dtype must have a spelling; the error names the first line that uses it."""
        for param in kernel.params:
            self._spellable(param.type.dtype, ir.Loc(0, 1, 0), first_use=True)
        for typ in kernel.locals.values():
            self._spellable(typ.dtype, ir.Loc(0, 1, 0), first_use=True)
        for node in ir.walk_body(kernel.body):
            for dtype in _node_dtypes(node):
                self._spellable(dtype, getattr(node, "loc", None))

    def _spellable(self, dtype, loc, first_use=False):
        try:
            self.type_name(dtype)
        except BackendError as exc:
            if first_use:  # point at the first use in the body if there is one
                for node in ir.walk_body(self.kernel.body):
                    if dtype in tuple(_node_dtypes(node)) and getattr(node, "loc", None):
                        loc = node.loc
                        break
            exc.ir_loc = loc
            raise

    def _layout(self, kernel: ir.KernelIR) -> Layout:
        layout = Layout(kinds=[p.type.kind for p in kernel.params])
        for param in kernel.arrays:
            layout.arrays.append(
                {
                    "name": param.name,
                    "dtype": param.type.dtype.name,
                    "ndim": param.type.ndim,
                    "binding": len(layout.arrays),
                    "stored": param.name in self.stored,
                    "loaded": param.name in self.loaded,
                }
            )
        layout.uniform_binding = len(layout.arrays)
        slot = 0
        for param in kernel.scalars:
            layout.scalars.append(
                {"name": param.name, "dtype": param.type.dtype.name, "slot": slot}
            )
            slot += 1
        for param in kernel.arrays:
            for axis in range(param.type.ndim):
                layout.dims.append({"name": param.name, "axis": axis, "slot": slot})
                slot += 1
        layout.words = slot
        return layout

    # ------------------------------------------------------------------ names and lines

    def _unique(self, prefix: str, name: str) -> str:
        key = prefix + name
        if key not in self._names:
            base = prefix + re.sub(r"\W", "_", name)
            candidate, n = base, 1
            while candidate in self._taken:
                candidate, n = f"{base}_{n}", n + 1
            self._taken.add(candidate)
            self._names[key] = candidate
        return self._names[key]

    def local(self, name: str) -> str:
        return self._unique("v_", name)

    def binding(self, name: str) -> str:
        return self._unique("a_", name)

    def param_field(self, name: str) -> str:
        return self._unique("p_", name)

    def dim_field(self, name: str, axis: int) -> str:
        return self._unique("n_", f"{name}_{axis}")

    def temp(self) -> str:
        self._temp += 1
        return f"q{self._temp}"

    def emit(self, line: str) -> None:
        self._lines.append(self.indent_unit * self._depth + line)
        self._locs.append(self._loc)

    def let(self, dtype: DType, value: str) -> str:
        name = self.temp()
        self.emit(self.declare_let(name, dtype, value))
        return name

    def var(self, dtype: DType, init: str | None = None) -> str:
        name = self.temp()
        self.emit(self.declare_var(name, dtype, init))
        return name

    def open(self, header: str) -> None:
        self.emit(header)
        self._depth += 1

    def close(self, footer: str = "}") -> None:
        self._depth -= 1
        self.emit(footer)

    def scratch(self, dtype: DType, index: int = 0) -> str:
        name = f"qs_{dtype.name}_{index}"
        self._scratch[name] = dtype
        return name

    def broadcast_slot(self, dtype: DType) -> str:
        name = f"qu_{dtype.name}"
        self._scratch[name] = dtype
        return name

    def helper(self, key: str, build) -> str:
        """A helper function, rendered once per kernel; returns its name."""
        if key not in self._helpers:
            saved = self._lines, self._locs, self._depth, self._loc
            self._lines, self._locs, self._depth, self._loc = [], [], 0, None
            build()
            self._helpers[key] = self._lines
            self._lines, self._locs, self._depth, self._loc = saved
        return key

    # ------------------------------------------------------------------ statements

    def block(self, body: list[ir.Stmt]) -> None:
        for stmt in body:
            saved = self._loc
            self._loc = stmt.loc or saved
            getattr(self, "stmt_" + type(stmt).__name__)(stmt)
            self._loc = saved

    def stmt_Assign(self, stmt: ir.Assign) -> None:
        value = self.expr(stmt.value)
        self.emit(f"{self.local(stmt.name)} = {value};")
        if self.probe:
            typ = self.kernel.locals.get(stmt.name, stmt.value.type)
            self.probe_step(typ.kind, typ.dtype, self.local(stmt.name))

    def stmt_If(self, stmt: ir.If) -> None:
        cond = self.expr(stmt.cond)
        self.open(f"if ({cond}) {{")
        self.block(stmt.then_body)
        if stmt.else_body:
            self._depth -= 1
            self.emit("} else {")
            self._depth += 1
            self.block(stmt.else_body)
        self.close()

    def loop_body(self, body: list[ir.Stmt]) -> None:
        self._loops += 1
        self.block(body)
        self._loops -= 1

    def stmt_While(self, stmt: ir.While) -> None:
        self.open_loop(None)
        cond = self.expr(stmt.cond)
        self.emit(f"if (!{cond}) {{ break; }}")
        self.loop_body(stmt.body)
        self.close_loop(None)

    def stmt_For(self, stmt: ir.For) -> None:
        start, stop, step = (
            self.let(i32, self.expr(e)) for e in (stmt.start, stmt.stop, stmt.step)
        )
        counter = self.var(i32, start)
        # A step past the i32 range ends the loop (Python's range has no overflow): the
        # counter then becomes ``stop``, which the test below ends the loop at.
        past = (
            f"({step} > 0 && {counter} > {self.literal(2**31 - 1, i32)} - {step}) || "
            f"({step} < 0 && {counter} < {self.literal(-(2**31), i32)} - {step})"
        )
        increment = f"{counter} = {self.select(past, stop, self.arith('add', counter, step, i32))};"
        self.open_loop(increment)
        self.emit(
            f"if ({step} == 0 || ({step} > 0 && {counter} >= {stop}) || "
            f"({step} < 0 && {counter} <= {stop})) {{ break; }}"
        )
        self.emit(f"{self.local(stmt.var)} = {counter};")
        self.loop_body(stmt.body)
        self.close_loop(increment)

    def stmt_Break(self, stmt) -> None:
        self.emit("break;")

    def stmt_Continue(self, stmt) -> None:
        self.emit("continue;")

    def stmt_StoreWindow(self, stmt: ir.StoreWindow) -> None:
        value = self.probe_value(stmt.value, self.expr(stmt.value))
        index, ok = self.window(stmt.view, stmt.r0, stmt.r1, stmt.c0, stmt.c1)
        self.guarded_store(stmt, ok, index, value)

    def stmt_VecStore(self, stmt: ir.VecStore) -> None:
        value = self.probe_value(stmt.value, self.expr(stmt.value))
        start, stop = self.let(i32, self.expr(stmt.start)), self.let(i32, self.expr(stmt.stop))
        base, dims = self.view_base(stmt.view)
        pos = self.let(i32, f"{start} + q_ti")
        ok = f"q_tj == 0 && {base[1]} && {pos} >= 0 && {pos} < min({stop}, {dims[-1]})"
        self.guarded_store(stmt, ok, f"{base[0]} + {pos}", value)

    def stmt_ArrayStore(self, stmt: ir.ArrayStore) -> None:
        value = self.probe_value(stmt.value, self.expr(stmt.value))
        index, ok = self.element(stmt.view, stmt.indices)
        self.guarded_store(stmt, ok if self.solo else f"q_lid == 0u && {ok}", index, value)

    def guarded_store(self, stmt, ok: str, index: str, value: str) -> None:
        """Write ``value`` at ``index`` of the array of ``stmt.view`` where ``ok`` holds,
        in program order with the program's other accesses to that memory (see the
        module docstring): a barrier first if any came before (or the store repeats, in
        a loop), and one after if a load may follow."""
        view = stmt.view
        write = self.array_write(self.binding(view.param), index, value, view.type.dtype)
        before, after = self.store_barriers[id(stmt)]
        if not self.solo and (before or self._loops):
            self.emit(self.storage_barrier)
        self.emit(f"if ({ok}) {{ {write} }}")
        if not self.solo and (after or self._loops):
            self.emit(self.storage_barrier)

    # ------------------------------------------------------------------ probe builds

    # A probe build (qnb/backends/probe.py) records, in the program the hidden parameter
    # names, each step's value after the step: every Assign and every store, as the cpu
    # trace does. Only the probe buffer is written; no value of the kernel changes.

    def probe_words(self, value: str, dtype: DType) -> list[str]:
        """i32 words holding ``value``'s bits (f16 widened to f32; f64 low word, then high)."""
        raise NotImplementedError

    def probe_open(self) -> None:
        params = {p.name: p for p in self.kernel.scalars}
        ids = [self.program_id("id", axis) for axis in range(3)]
        counts = [self.program_id("count", axis) for axis in range(2)]
        flat = f"{ids[0]} + {counts[0]} * ({ids[1]} + {counts[1]} * {ids[2]})"
        chosen = self.param_value(params[probe.PROGRAM_PARAM])
        here = self.let(bool_, f"({flat}) == {chosen}")
        count = self.var(i32, self.literal(0, i32))
        at = self.var(i32, self.literal(1, i32))
        binding = self.binding(probe.PROBE_PARAM)
        capacity = self.array_dim(self.dim_field(probe.PROBE_PARAM, 0))
        first = "true" if self.solo else "q_lid == 0u"
        self._probe = (here, count, at, binding, capacity, first)
        self.emit(f"if ({here} && {first}) {{ {self.array_element(binding, '0')} = 0; }}")

    def probe_value(self, node: ir.Expr, value: str) -> str:
        """A stored value, recorded first in a probe build (into a temporary, once)."""
        if not self.probe:
            return value
        value = self.let(node.type.dtype, value)
        self.probe_step(node.type.kind, node.type.dtype, value)
        return value

    def probe_step(self, kind: str, dtype: DType, value: str) -> None:
        here, count, at, binding, capacity, first = self._probe
        words = self.probe_words(value, dtype)
        need = 1 + probe.value_words(kind, dtype)
        line = self._loc.line if self._loc is not None else 0
        element = lambda index: self.array_element(binding, index)  # noqa: E731
        self.open(f"if ({here}) {{")
        self.open(f"if ({count} < {probe.STEP_BUDGET} && {at} + {need} <= {capacity}) {{")
        self.emit(f"if ({first}) {{ {element(at)} = {probe.header(kind, dtype, line)}; }}")
        if kind == "tile":
            position, guard = "(q_ti * 16 + q_tj)", None
        elif kind == "vec":
            position, guard = "q_ti", "q_tj == 0"
        else:
            position, guard = "0", first
        for w, word in enumerate(words):
            index = f"{at} + {1 + w} + {position} * {len(words)}"
            write = f"{element(index)} = {word};"
            self.emit(write if guard is None else f"if ({guard}) {{ {write} }}")
        self.emit(f"{at} = {at} + {need};")
        self.close()
        self.emit(f"if ({count} <= {probe.STEP_BUDGET}) {{ {count} = {count} + 1; }}")
        self.emit(f"if ({first}) {{ {element('0')} = {count}; }}")
        self.close()

    # ------------------------------------------------------------------ addressing

    def view_base(self, view: ir.ArrayView):
        """((flat offset of the view, condition that the batch exists), dims of the view)."""
        dims = [self.array_dim(self.dim_field(view.param, axis)) for axis in range(view.type.ndim)]
        if view.batch is None:
            return ("0", "true"), dims
        batch = self.let(i32, self.expr(view.batch))
        slab = " * ".join(dims[1:]) or "1"
        return (f"{self.wide(batch)} * {slab}", f"{batch} >= 0 && {batch} < {dims[0]}"), dims[1:]

    def window(self, view, r0, r1, c0, c1):
        """(flat index, in-window condition) of this thread's element of a tile window."""
        (offset, batch_ok), (rows, cols) = self.view_base(view)
        r0, r1, c0, c1 = (self.let(i32, self.expr(e)) for e in (r0, r1, c0, c1))
        row, col = self.let(i32, f"{r0} + q_ti"), self.let(i32, f"{c0} + q_tj")
        ok = self.let(
            bool_,
            f"{batch_ok} && {row} >= 0 && {col} >= 0 && {row} < min({r1}, {rows}) "
            f"&& {col} < min({c1}, {cols})",
        )
        return f"{offset} + {self.wide(row)} * {cols} + {col}", ok

    def element(self, view, indices):
        (offset, batch_ok), dims = self.view_base(view)
        values = [self.let(i32, self.expr(e)) for e in indices]
        ok = " && ".join([batch_ok] + [f"{v} >= 0 && {v} < {d}" for v, d in zip(values, dims)])
        flat = self.wide(values[0])
        for v, d in zip(values[1:], dims[1:]):
            flat = f"({flat}) * {d} + {v}"
        return f"{offset} + {flat}", ok

    # ------------------------------------------------------------------ expressions

    def expr(self, node: ir.Expr) -> str:
        saved = self._loc
        self._loc = node.loc or saved
        try:
            return getattr(self, "expr_" + type(node).__name__)(node)
        finally:
            self._loc = saved

    def expr_Const(self, node: ir.Const) -> str:
        return self.literal(node.value, node.type.dtype)

    def param_value(self, param: ir.Param) -> str:
        """A scalar parameter's value, as its own dtype."""
        return self.scalar_param(self.param_field(param.name))

    def expr_Var(self, node: ir.Var) -> str:
        if node.name in self.kernel.locals:
            return self.local(node.name)
        for param in self.kernel.scalars:
            if param.name == node.name:
                return self.param_value(param)
        return self.local(node.name)

    def expr_ProgramId(self, node: ir.ProgramId) -> str:
        return self.program_id(node.which, node.axis)

    def expr_ArrayDim(self, node: ir.ArrayDim) -> str:
        return self.array_dim(self.dim_field(node.param, node.axis))

    def expr_Unary(self, node: ir.Unary) -> str:
        a = self.expr(node.operand)
        if a.startswith("-"):  # a negative literal: "--0.5f" would be a decrement
            a = f"({a})"
        if node.op in self.unary_templates:
            return self.unary_templates[node.op].format(a=a)
        if node.op == "abs" and node.type.dtype is bool_:
            return a
        return f"{self.math_functions[node.op]}({a})"

    def expr_Binary(self, node: ir.Binary) -> str:
        a, b = self.expr(node.left), self.expr(node.right)
        dtype = node.left.type.dtype
        op = node.op
        if op in ("max", "min"):
            return self.minmax(op, a, b, dtype)
        if op == "floordiv":
            return f"{self.helper_floordiv(dtype)}({a}, {b})"
        if op == "mod":
            return f"{self.helper_mod(dtype)}({a}, {b})"
        if op == "pow":
            return f"{self.helper_pow(dtype)}({a}, {b})"
        if op == "div" and not dtype.is_float:
            return f"{self.helper_floordiv(dtype)}({a}, {b})"
        if op == "xor" and dtype is i32:  # the table's "!=" is xor on bools only
            return f"({a} ^ {b})"
        if op in ("shl", "shr"):
            return f"{self.helper_shift(op)}({a}, {b})"
        return self.binary_templates[op].format(a=a, b=b)

    def helper_shift(self, op: str) -> str:
        """The function that shifts an i32 as NumPy does for every count (``ir.SHIFT_OPS``):
        C++ leaves a count outside 0..31 undefined and WGSL takes it modulo 32."""
        raise NotImplementedError

    def expr_Logical(self, node: ir.Logical) -> str:
        left = self.expr(node.left)
        # The right side may need statements (a reduction, a load): evaluate it only
        # where the left side does not decide, like Python.
        result = self.var(bool_, left)
        self.open(f"if ({'' if node.op == 'and' else '!'}{result}) {{")
        right = self.expr(node.right)
        self.emit(f"{result} = {right};")
        self.close()
        return result

    def expr_Select(self, node: ir.Select) -> str:
        cond, a, b = self.expr(node.cond), self.expr(node.if_true), self.expr(node.if_false)
        return self.select(cond, a, b)

    def expr_Cast(self, node: ir.Cast) -> str:
        source, target = node.operand.type.dtype, node.type.dtype
        a = self.expr(node.operand)
        if source is target:
            return a
        if target is i32 and source.is_float:
            if source in (f16, bf16):  # through f32, which holds every half exactly
                a, source = self.cast(a, source, f32), f32
            return f"{self.helper_float_to_int(source)}({a})"
        return self.cast(a, source, target)

    def helper_float_to_int(self, dtype: DType) -> str:
        """float → i32 as the cpu backend defines it: toward zero, saturating, NaN → 0
        (a plain conversion is undefined out of range in C++ and differs by target)."""
        name = f"qnb_to_i32_{dtype.name}"

        def build():
            self.open(self.function_open(name, [("x", dtype)], i32))
            self.emit(f"if ({self.is_nan('x', dtype)}) {{ return {self.literal(0, i32)}; }}")
            self.emit(
                f"if (x >= {self.literal(2.0**31, dtype)}) {{ return {self.literal(2**31 - 1, i32)}; }}"
            )
            self.emit(
                f"if (x <= {self.literal(-(2.0**31), dtype)}) {{ return {self.literal(-(2**31), i32)}; }}"
            )
            self.emit(f"return {self.cast('x', dtype, i32)};")
            self.close()

        return self.helper(name, build)

    def expr_ArrayLoad(self, node: ir.ArrayLoad) -> str:
        index, ok = self.element(node.view, node.indices)
        dtype = node.type.dtype
        value = self.array_read(self.binding(node.view.param), index, dtype)
        if self.solo:  # the program's one thread reads for itself
            result = self.var(dtype, self.literal(0, dtype))
            self.emit(f"if ({ok}) {{ {result} = {value}; }}")
            return result
        slot = self.broadcast_slot(self.scratch_dtype(dtype))
        self.emit(self.barrier)
        self.open("if (q_lid == 0u) {")
        self.emit(f"{slot} = {self.to_scratch(self.literal(0, dtype), dtype)};")
        self.emit(f"if ({ok}) {{ {slot} = {self.to_scratch(value, dtype)}; }}")
        self.close()
        return self.broadcast(slot, dtype)

    def broadcast(self, slot: str, dtype: DType) -> str:
        target = self.var(self.scratch_dtype(dtype))
        for line in self.uniform_load(slot, target):
            self.emit(line)
        return self.from_scratch(target, dtype)

    def to_scratch(self, value: str, dtype: DType) -> str:
        stored = self.scratch_dtype(dtype)
        return value if stored is dtype else self.cast(value, dtype, stored)

    def from_scratch(self, value: str, dtype: DType) -> str:
        stored = self.scratch_dtype(dtype)
        return value if stored is dtype else self.cast(value, stored, dtype)

    def expr_TileFill(self, node: ir.TileFill) -> str:
        dtype = node.type.dtype
        if node.kind == "eye":
            return self.select("q_ti == q_tj", self.literal(1, dtype), self.literal(0, dtype))
        value = self.expr(node.value)
        if node.value.type.dtype is not dtype:
            value = self.cast(value, node.value.type.dtype, dtype)
        return value

    def expr_LoadWindow(self, node: ir.LoadWindow) -> str:
        dtype = node.type.dtype
        result = self.var(dtype, self.expr(node.base))
        index, ok = self.window(node.view, node.r0, node.r1, node.c0, node.c1)
        stored = node.view.type.dtype
        value = self.array_read(self.binding(node.view.param), index, stored)
        if stored is not dtype:  # Tile16.load(..., dtype=): converted as astype does
            value = self.cast(value, stored, dtype)
        self.emit(f"if ({ok}) {{ {result} = {value}; }}")
        return result

    def expr_VecLoad(self, node: ir.VecLoad) -> str:
        dtype = node.type.dtype
        base, dims = self.view_base(node.view)
        start, stop = self.let(i32, self.expr(node.start)), self.let(i32, self.expr(node.stop))
        pos = self.let(i32, f"{start} + q_ti")
        ok = f"{base[1]} && {pos} >= 0 && {pos} < min({stop}, {dims[0]})"
        if node.col is None:
            index = f"{base[0]} + {pos}"
        else:
            col = self.let(i32, self.expr(node.col))
            ok += f" && {col} >= 0 && {col} < {dims[1]}"
            index = f"{base[0]} + {self.wide(pos)} * {dims[1]} + {col}"
        other = self.literal(0, dtype) if node.other is None else self.expr(node.other)
        result = self.var(dtype, other)
        value = self.array_read(self.binding(node.view.param), index, dtype)
        self.emit(f"if ({ok}) {{ {result} = {value}; }}")
        return result

    # ---- ops that exchange elements through scratch memory

    def to_shared(self, value: str, dtype: DType, index: int = 0, where: str = "q_lid") -> str:
        """Barrier, write this thread's ``value`` to scratch[where], barrier; returns the scratch name."""
        name = self.scratch(self.scratch_dtype(dtype), index)
        self.emit(self.barrier)
        self.emit(f"{name}[{where}] = {self.to_scratch(value, dtype)};")
        return name

    def shared_tile(
        self, node: ir.Expr, index: int = 0, dtype: DType | None = None, value: str | None = None
    ) -> str:
        """Put a tile (or vec: element i at [i]) into scratch ``index``; returns its name.

        Ops with several operands evaluate them all first (``value``): an operand may
        itself go through scratch, and must not overwrite one already written."""
        dtype = dtype or node.type.dtype
        if value is None:
            value = self.operand(node, dtype)
        if node.type.kind == "vec":
            name = self.scratch(self.scratch_dtype(dtype), index)
            self.emit(self.barrier)
            self.emit(f"if (q_tj == 0) {{ {name}[q_ti] = {self.to_scratch(value, dtype)}; }}")
        else:
            name = self.to_shared(value, dtype, index)
        return name

    def operand(self, node: ir.Expr, dtype: DType | None = None) -> str:
        """Evaluate ``node`` (converted to ``dtype``) into a private temporary."""
        dtype = dtype or node.type.dtype
        value = self.expr(node)
        if dtype is not node.type.dtype:
            value = self.cast(value, node.type.dtype, dtype)
        return self.let(dtype, value)

    def read_shared(self, name: str, index: str, dtype: DType) -> str:
        return self.from_scratch(f"{name}[{index}]", dtype)

    def expr_Transpose(self, node: ir.Transpose) -> str:
        dtype = node.type.dtype
        name = self.shared_tile(node.operand)
        self.emit(self.barrier)
        return self.let(dtype, self.read_shared(name, "q_tj * 16 + q_ti", dtype))

    def arith(self, op: str, a: str, b: str, dtype: DType) -> str:
        """``a + b`` / ``a - b`` / ``a * b`` in ``dtype``, unparenthesised, for the products
        and sums the walker writes itself (a target whose i32 overflow is undefined wraps
        it here)."""
        return f"{a} {_ARITH[op]} {b}"

    def combine(self, op: str, acc: str, value: str, dtype: DType) -> str:
        if op == "sum":
            return self.arith("add", acc, value, dtype)
        return self.minmax(op, acc, value, dtype)

    def minmax(self, op: str, a: str, b: str, dtype: DType) -> str:
        """NumPy's ``maximum``/``minimum``: a NaN operand gives NaN (a target whose builtin
        drops NaNs overrides this)."""
        return f"{self.math_functions[op]}({a}, {b})"

    def is_nan(self, x: str, dtype: DType) -> str:
        """A test of ``x`` for NaN, by IEEE comparison (a target whose compiler may assume
        there are no NaNs overrides it with a test it cannot fold away)."""
        return f"!({x} == {x})"

    def is_inf(self, x: str, dtype: DType) -> str:
        """A test of ``x`` for ±infinity (as ``is_nan``)."""
        return f"({x} == {x} && {x} - {x} != {x} - {x})"

    def reduce_init(self, op: str, name: str, first: str, dtype: DType) -> str:
        return self.var(dtype, self.read_shared(name, first, dtype))

    def expr_Reduce(self, node: ir.Reduce) -> str:
        dtype = node.type.dtype
        # An f16 sum accumulates in f32 and rounds once, as NumPy's f16 sums do.
        work = self.accumulate_dtype(dtype) if node.op == "sum" else dtype
        operand = node.operand
        name = self.shared_tile(operand, dtype=work)
        self.emit(self.barrier)
        k = self.temp()
        if operand.type.kind == "vec" or node.axis is None:
            count = 16 if operand.type.kind == "vec" else THREADS
            slot = self.broadcast_slot(self.scratch_dtype(dtype))
            self.open("if (q_lid == 0u) {")
            acc = self.reduce_init(node.op, name, "0", work)
            self.open(self.counted_loop(k, 1, count))
            value = self.read_shared(name, k, work)
            self.emit(f"{acc} = {self.combine(node.op, acc, value, work)};")
            self.close()
            self.emit(f"{slot} = {self.to_scratch(self.narrow(acc, work, dtype), dtype)};")
            self.close()
            return self.broadcast(slot, dtype)
        first, at = (
            ("q_ti * 16", f"q_ti * 16 + {k}") if node.axis == 1 else ("q_ti", f"{k} * 16 + q_ti")
        )
        acc = self.reduce_init(node.op, name, first, work)
        self.open(self.counted_loop(k, 1, 16))
        value = self.read_shared(name, at, work)
        self.emit(f"{acc} = {self.combine(node.op, acc, value, work)};")
        self.close()
        return self.narrow(acc, work, dtype)

    def narrow(self, value: str, work: DType, dtype: DType) -> str:
        """``value``, computed in ``work``, as ``dtype`` (unchanged text when they agree)."""
        return value if work is dtype else self.cast(value, work, dtype)

    def counted_loop(self, name: str, start: int, stop: int) -> str:
        """Header of ``for name in range(start, stop)`` (a constant trip count)."""
        raise NotImplementedError

    def accumulate_dtype(self, dtype: DType) -> DType:
        return f32 if dtype in (f16, bf16) else dtype

    def expr_Matmul(self, node: ir.Matmul) -> str:
        dtype = node.type.dtype
        work = self.accumulate_dtype(node.a.type.dtype)
        a_value, b_value = self.operand(node.a, work), self.operand(node.b, work)
        acc_value = None if node.acc is None else self.operand(node.acc)
        a = self.shared_tile(node.a, 0, dtype=work, value=a_value)
        b = self.shared_tile(node.b, 1, dtype=work, value=b_value)
        # b's write is preceded by a barrier; one more makes both visible.
        self.emit(self.barrier)
        acc = self.var(work, self.literal(0, work))
        k = self.temp()
        self.open(self.counted_loop(k, 0, 16))
        a_k = self.read_shared(a, f"q_ti * 16 + {k}", work)
        b_k = self.read_shared(b, f"{k} * 16 + q_tj", work)
        self.emit(f"{acc} = {self.arith('add', acc, self.arith('mul', a_k, b_k, work), work)};")
        self.close()
        result = acc if work is dtype else self.cast(acc, work, dtype)
        if acc_value is not None:
            result = f"({self.arith('add', acc_value, result, dtype)})"
        return self.let(dtype, result)

    def expr_Outer(self, node: ir.Outer) -> str:
        dtype = node.type.dtype
        u = self.operand(node.u)
        v = self.shared_tile(node.v)
        self.emit(self.barrier)
        return self.let(dtype, self.arith("mul", u, self.read_shared(v, "q_tj", dtype), dtype))

    def expr_RowCol(self, node: ir.RowCol) -> str:
        dtype = node.type.dtype
        value = self.operand(node.operand)
        index = self.let(i32, self.expr(node.index))
        name = self.shared_tile(node.operand, value=value)
        self.emit(self.barrier)
        at = f"{index} * 16 + q_ti" if node.which == "row" else f"q_ti * 16 + {index}"
        result = self.var(dtype, self.literal(0, dtype))
        self.emit(
            f"if ({index} >= 0 && {index} < 16) {{ {result} = {self.read_shared(name, at, dtype)}; }}"
        )
        return result

    def expr_TileGet(self, node: ir.TileGet) -> str:
        dtype = node.type.dtype
        value = self.expr(node.base)
        i = self.let(i32, self.expr(node.i))
        if node.j is None:
            owner = f"q_tj == 0 && q_ti == {i}"
            inside = f"{i} >= 0 && {i} < 16"
        else:
            j = self.let(i32, self.expr(node.j))
            owner = f"q_ti == {i} && q_tj == {j}"
            inside = f"{i} >= 0 && {i} < 16 && {j} >= 0 && {j} < 16"
        slot = self.broadcast_slot(self.scratch_dtype(dtype))
        self.emit(self.barrier)
        # An index outside the tile reads 0 (thread 0 writes it; no owner exists).
        self.emit(
            f"if (q_lid == 0u && !({inside})) {{ {slot} = "
            f"{self.to_scratch(self.literal(0, dtype), dtype)}; }}"
        )
        self.emit(f"if ({owner}) {{ {slot} = {self.to_scratch(value, dtype)}; }}")
        return self.broadcast(slot, dtype)

    def expr_TileSet(self, node: ir.TileSet) -> str:
        base, value = self.expr(node.base), self.expr(node.value)
        i = self.let(i32, self.expr(node.i))
        if node.j is None:
            here = f"q_ti == {i}"
        else:
            here = f"q_ti == {i} && q_tj == {self.let(i32, self.expr(node.j))}"
        return self.let(node.type.dtype, self.select(here, value, base))

    def expr_Cholesky(self, node: ir.Cholesky) -> str:
        dtype = node.type.dtype
        eps = self.let(dtype, self.expr(node.eps))
        a = self.shared_tile(node.operand)
        self.emit(self.barrier)
        j, k = self.temp(), self.temp()
        at = lambda r, c: self.read_shared(a, f"{r} * 16 + {c}", dtype)  # noqa: E731
        # Column j: each row thread (tj == 0) sums over the finished columns k < j;
        # the diagonal goes first, then the rows below divide by it.
        # f16 dot products accumulate in f32 and round once (as the cpu backend's einsum).
        work = self.accumulate_dtype(dtype)
        wide = lambda r, c: self.narrow(at(r, c), dtype, work)  # noqa: E731
        self.open(self.counted_loop(j, 0, 16))
        dot = self.var(work, self.literal(0, work))
        total = dot if work is dtype else self.var(dtype, self.literal(0, dtype))
        self.open(f"if (q_tj == 0 && q_ti >= {j}) {{")
        self.open(self.counted_loop(k, 0, j))
        self.emit(f"{dot} = {dot} + {wide('q_ti', k)} * {wide(j, k)};")
        self.close()
        if total != dot:
            self.emit(f"{total} = {self.narrow(dot, work, dtype)};")
        sqrt = self.math_functions["sqrt"]
        floored = self.minmax("max", f"{at(j, j)} - {total}", eps, dtype)
        diagonal = self.to_scratch(f"{sqrt}({floored})", dtype)
        self.emit(f"if (q_ti == {j}) {{ {a}[q_ti * 16 + {j}] = {diagonal}; }}")
        self.close()
        self.emit(self.barrier)
        below = self.to_scratch(f"({at('q_ti', j)} - {total}) / {at(j, j)}", dtype)
        self.emit(f"if (q_tj == 0 && q_ti > {j}) {{ {a}[q_ti * 16 + {j}] = {below}; }}")
        self.emit(self.barrier)
        self.close()
        return self.let(
            dtype, self.select("q_ti >= q_tj", at("q_ti", "q_tj"), self.literal(0, dtype))
        )

    def expr_SolveTriangular(self, node: ir.SolveTriangular) -> str:
        dtype = node.type.dtype
        lower_value, rhs_value = self.operand(node.lower), self.operand(node.rhs)
        lower = self.shared_tile(node.lower, 0, value=lower_value)
        x = self.shared_tile(node.rhs, 1, value=rhs_value)
        self.emit(self.barrier)
        k, m = self.temp(), self.temp()
        L = lambda r, c: self.read_shared(lower, f"{r} * 16 + {c}", dtype)  # noqa: E731
        X = lambda r, c: self.read_shared(x, f"{r} * 16 + {c}", dtype)  # noqa: E731
        # Rows of X are independent: one thread per row substitutes forward.
        work = self.accumulate_dtype(dtype)  # f16 dots accumulate in f32, round once
        self.open("if (q_tj == 0) {")
        self.open(self.counted_loop(k, 0, 16))
        if work is dtype:
            total = self.var(dtype, X("q_ti", k))
            self.open(self.counted_loop(m, 0, k))
            self.emit(f"{total} = {total} - {X('q_ti', m)} * {L(k, m)};")
            self.close()
        else:
            dot = self.var(work, self.literal(0, work))
            self.open(self.counted_loop(m, 0, k))
            wide = [self.narrow(v, dtype, work) for v in (X("q_ti", m), L(k, m))]
            self.emit(f"{dot} = {dot} + {wide[0]} * {wide[1]};")
            self.close()
            total = self.let(dtype, f"{X('q_ti', k)} - {self.narrow(dot, work, dtype)}")
        self.emit(f"{x}[q_ti * 16 + {k}] = {self.to_scratch(f'{total} / {L(k, k)}', dtype)};")
        self.close()
        self.close()
        self.emit(self.barrier)
        return self.let(dtype, X("q_ti", "q_tj"))

    # ------------------------------------------------------------------ helpers (Python semantics)

    def helper_floordiv(self, dtype: DType) -> str:
        name = f"qnb_floordiv_{dtype.name}"

        def build():
            self.open(self.function_open(name, [("a", dtype), ("b", dtype)], dtype))
            zero, one = self.literal(0, dtype), self.literal(1, dtype)
            if dtype is f16:  # NumPy divides halves in f32 and rounds the quotient once
                wide = self.helper_floordiv(f32)
                a32, b32 = self.cast("a", f16, f32), self.cast("b", f16, f32)
                self.emit(f"return {self.cast(f'{wide}({a32}, {b32})', f32, f16)};")
                self.close()
                return
            if dtype.is_float:
                self.float_floordiv_body(dtype)
                self.close()
                return
            self.emit(f"if (b == {zero}) {{ return {zero}; }}")
            self.emit(self.declare_var("q", dtype, "a / b"))
            self.emit(
                f"if ((a - q * b) != {zero} && ((a < {zero}) != (b < {zero}))) {{ q = q - {one}; }}"
            )
            self.emit("return q;")
            self.close()

        return self.helper(name, build)

    def float_floordiv_body(self, dtype: DType) -> None:
        """NumPy's ``divmod`` quotient: from the exact remainder (``float_remainder``),
        ``(a - m) / b``, moved down when ``m`` and ``b`` differ in sign, then rounded to
        the nearest integer (not floored: the division may land just below it)."""
        zero, one = self.literal(0, dtype), self.literal(1, dtype)
        nan = self.literal(math.nan, dtype)
        self.emit(f"if (b == {zero}) {{ return a / b; }}")
        undefined = (
            f"{self.is_nan('a', dtype)} || {self.is_nan('b', dtype)} || {self.is_inf('a', dtype)}"
        )
        self.emit(f"if ({undefined}) {{ return {nan}; }}")
        self.emit(self.declare_let("m", dtype, self.float_remainder("a", "b", dtype)))
        self.emit(self.declare_var("d", dtype, "(a - m) / b"))
        self.emit(f"if (m != {zero} && ((b < {zero}) != (m < {zero}))) {{ d = d - {one}; }}")
        # a zero quotient has the sign of a / b (the signs of a and b, -0.0 included)
        opposite = f"{self.sign_bit('a', dtype)} != {self.sign_bit('b', dtype)}"
        negative = self.select(opposite, self.literal(-0.0, dtype), zero)
        self.emit(f"if (d == {zero}) {{ return {negative}; }}")
        self.emit(self.declare_let("f", dtype, f"{self.math_functions['floor']}(d)"))
        self.emit(f"if (d - f > {self.literal(0.5, dtype)}) {{ return f + {one}; }}")
        self.emit("return f;")

    def helper_mod(self, dtype: DType) -> str:
        name = f"qnb_mod_{dtype.name}"

        def build():
            self.open(self.function_open(name, [("a", dtype), ("b", dtype)], dtype))
            zero = self.literal(0, dtype)
            if dtype.is_float:  # fmod's own NaNs and infinities carry NumPy's cases through
                self.emit(self.declare_var("r", dtype, self.float_remainder("a", "b", dtype)))
            else:
                self.emit(f"if (b == {zero}) {{ return {zero}; }}")
                self.emit(self.declare_var("r", dtype, "a % b"))
            self.emit(f"if (r != {zero} && ((r < {zero}) != (b < {zero}))) {{ r = r + b; }}")
            if dtype.is_float:  # a zero remainder has the sign of b, as NumPy's
                signed = self.select(self.sign_bit("b", dtype), self.literal(-0.0, dtype), zero)
                self.emit(f"if (r == {zero}) {{ return {signed}; }}")
            self.emit("return r;")
            self.close()

        return self.helper(name, build)

    def float_remainder(self, a: str, b: str, dtype: DType) -> str:
        """C's ``fmod(a, b)``, exactly (NaN for an infinite ``a`` or a zero ``b``, ``a`` for
        an infinite ``b``): the float ``//`` and ``%`` helpers build NumPy's divmod on it."""
        raise NotImplementedError

    def helper_pow(self, dtype: DType) -> str:
        name = f"qnb_pow_{dtype.name}"

        def build():
            self.open(self.function_open(name, [("a", dtype), ("b", dtype)], dtype))
            zero, one = self.literal(0, dtype), self.literal(1, dtype)
            if dtype is f16:  # NumPy raises halves to a power in f32 and rounds once
                wide = self.helper_pow(f32)
                a32, b32 = self.cast("a", f16, f32), self.cast("b", f16, f32)
                self.emit(f"return {self.cast(f'{wide}({a32}, {b32})', f32, f16)};")
            elif dtype.is_float:
                self.float_pow_body(dtype)
            else:
                # By squaring, wrapping; a negative exponent gives the true power
                # truncated toward zero (±1 for a base of ±1, else 0).
                self.open(f"if (b < {zero}) {{")
                self.emit(
                    f"if (a == {one} || (a == -{one} && (b & {one}) == {zero})) {{ return {one}; }}"
                )
                self.emit(f"if (a == -{one}) {{ return a; }}")
                self.emit(f"return {zero};")
                self.close()
                self.emit(self.declare_var("r", dtype, one))
                self.emit(self.declare_var("x", dtype, "a"))
                self.emit(self.declare_var("e", dtype, "b"))
                self.open_loop(None)
                self.emit(f"if (e <= {zero}) {{ break; }}")
                self.emit(f"if ((e & {one}) != {zero}) {{ r = r * x; }}")
                self.emit("x = x * x;")
                self.emit(f"e = e >> {self.shift_amount(1)};")
                self.close_loop(None)
                self.emit("return r;")
            self.close()

        return self.helper(name, build)

    def float_pow_body(self, dtype: DType) -> None:
        """C99's pow (Annex F), which NumPy's is. The target's pow(a, b) is
        exp2(b * log2(a)): undefined for a <= 0 and for infinite operands, so those cases
        are decided here, and the target's pow sees only a finite nonzero base."""
        zero, one = self.literal(0, dtype), self.literal(1, dtype)
        inf, nan = self.literal(math.inf, dtype), self.literal(math.nan, dtype)
        negative_zero, half = self.literal(-0.0, dtype), self.literal(0.5, dtype)
        floor = self.math_functions["floor"]
        self.emit(f"if (b == {zero} || a == {one}) {{ return {one}; }}")
        self.emit(
            f"if ({self.is_nan('a', dtype)} || {self.is_nan('b', dtype)}) {{ return a + b; }}"
        )
        whole = f"{floor}(b) == b"
        self.emit(self.declare_let("odd", bool_, f"{whole} && {floor}(b * {half}) != b * {half}"))
        self.open(f"if ({self.is_inf('b', dtype)}) {{")  # |a| against 1 decides
        self.emit(f"if (abs(a) == {one}) {{ return {one}; }}")
        self.emit(self.declare_let("grows", bool_, f"(abs(a) > {one}) == (b > {zero})"))
        self.emit(f"return {self.select('grows', inf, zero)};")
        self.close()
        negative = self.sign_bit("a", dtype)
        self.open(f"if (a == {zero}) {{")  # ±0: the sign survives an odd power
        self.emit(
            f"if (b < {zero}) {{ return {self.select(f'odd && {negative}', f'-{inf}', inf)}; }}"
        )
        self.emit(f"return {self.select(f'odd && {negative}', negative_zero, zero)};")
        self.close()
        self.open(f"if ({self.is_inf('a', dtype)}) {{")
        self.emit(f"if (a > {zero}) {{ return {self.select(f'b > {zero}', inf, zero)}; }}")
        self.emit(f"if (b > {zero}) {{ return {self.select('odd', f'-{inf}', inf)}; }}")
        self.emit(f"return {self.select('odd', negative_zero, zero)};")
        self.close()
        self.emit(self.declare_let("m", dtype, f"{self.math_functions['pow']}(abs(a), b)"))
        self.emit(f"if (a > {zero}) {{ return m; }}")
        self.emit(f"if (!({whole})) {{ return {nan}; }}")
        self.emit(f"return {self.select('odd', '-m', 'm')};")

    def sign_bit(self, x: str, dtype: DType) -> str:
        """Whether float ``x`` has its sign bit set (true for -0.0)."""
        return f"({x} < {self.literal(0, dtype)} || 1.0 / {x} < 0.0)"

    def shift_amount(self, n: int) -> str:
        return str(n)
