"""The one walker over the IR shared by the GPU renderers (WGSL and CUDA C++).

A GPU target is a subclass of :class:`GpuRenderer` that fills in a *table of
spellings* (type names, operator templates, math functions, the barrier) and
overrides a few hooks where the languages differ in shape rather than in words
(declarations, bindings, the entry point, the uniform broadcast).

Program model (see docs/ARCHITECTURE.md): one program is one workgroup/block of P
threads (``Layout.threads``: :func:`choose_threads` picks a power of two from the tile
shapes, or the ``threads=`` option sets it), except in a kernel that holds no tile or vec
("solo" below). A tile or vec of S elements is held in *fragments*: flat (row-major)
element ``e`` by thread ``e % P`` in slot ``e // P`` of a private array of
``max(1, S // P)`` slots; a value smaller than the program is replicated (thread ``t``
holds element ``t % S``; only threads ``t < S`` write it to memory or scratch). Scalars
are held, equal, by every thread. A statement's elementwise tree is rendered as one loop
over the slots (``q_s`` the slot, ``q_e`` the flat index); its scalar operands, and its
operands that exchange elements, are evaluated before the loop (:meth:`prepare`). Ops
that need other threads' elements write the operand to a scratch array in
workgroup/shared memory between barriers (``tile_*`` methods; ``@`` in chunks of K);
scalars read from memory or from tiles are written by one thread to a
broadcast slot and read back with :meth:`GpuRenderer.uniform_load`, so every
scalar a branch or loop tests is provably uniform (WGSL's uniformity analysis
then accepts the barriers inside). A tile or vec past :data:`MAX_ELEMENTS`, or scratch
past the target's ``shared_limit``, is a BackendError at compile time.

A kernel whose every value is a scalar has nothing for 256 threads to share: it
is rendered *solo*, one thread per program and ``solo_programs`` programs per
workgroup/block (``Layout.programs_per_group``), with no barriers, no broadcast
and no ``q_lid``/``q_t``; a thread past the grid's last program returns.

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
from qnb.backends.base import Options
from qnb.dtypes import DType, bf16, bool_, f16, f32, f64, i32
from qnb.errors import BackendError

THREADS = ir.TILE * ir.TILE  # the old layout's program (still the Layout's default)
MAX_THREADS = 256  # threads per program: WebGPU's default maxComputeInvocationsPerWorkgroup
MAX_ELEMENTS = 4096  # the largest tile or vec a GPU program holds
_ARITH = {"add": "+", "sub": "-", "mul": "*"}
_REDUCE_ARITH = {"sum": "add", "prod": "mul"}  # the reductions that combine by arithmetic
_BYTES = {f16: 2, bf16: 2, f32: 4, i32: 4, bool_: 4, f64: 8}


def _as_2d(shape: tuple[int, ...]) -> tuple[int, int]:
    """A vec's shape as the 1 x N tile NumPy's broadcasting treats it as."""
    return (1, shape[0]) if len(shape) == 1 else (shape[0], shape[1])


def _value_types(kernel: ir.KernelIR):
    """Every tile and vec type of the kernel (locals, then each node's)."""
    for typ in kernel.locals.values():
        if typ.kind in ("tile", "vec"):
            yield typ, None
    for node in ir.walk_body(kernel.body):
        typ = getattr(node, "type", None)
        if isinstance(typ, ir.Type) and typ.kind in ("tile", "vec"):
            yield typ, getattr(node, "loc", None)


def choose_threads(kernel: ir.KernelIR, requested: int | None = None, language: str = "gpu") -> int:
    """The threads of one program: ``requested`` (the ``threads=`` kernel option) if given,
    else the size of the largest tile or vec, between 32 (a warp) and 256: one slot per
    thread up to 256 elements (on lavapipe a 16x16 kernel ran 1.2-1.9x faster with 256
    threads of one slot than with 64 of four: benchmarks/bench_layouts.py). Raises
    BackendError for a value larger than :data:`MAX_ELEMENTS` or a bad ``requested``."""
    largest = 1
    for typ, loc in _value_types(kernel):
        if typ.size > MAX_ELEMENTS:
            exc = BackendError(
                f"{language} holds tiles and vecs of at most {MAX_ELEMENTS} elements per "
                f"program; this kernel uses {typ.shape_name}[{typ.dtype.name}] "
                f"({typ.size} elements): use smaller blocks, or the cpu backend"
            )
            exc.ir_loc = loc
            raise exc
        largest = max(largest, typ.size)
    if requested is not None:
        if not ir.valid_side(requested) or requested > MAX_THREADS:
            raise BackendError(
                f"threads={requested!r}: a program's threads must be a power of two "
                f"from 1 to {MAX_THREADS}"
            )
        return requested
    return min(MAX_THREADS, max(32, largest))


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
    shared_bytes: int = 0  # workgroup/shared memory the program declares

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
            "shared_bytes": self.shared_bytes,
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
_STORES = (ir.ArrayStore, ir.StoreWindow, ir.VecStore, ir.Atomic)
# Tile/vec ops whose element e needs only element e of their operands (and scalars):
# rendered inside one slot loop. Every other tile/vec op exchanges elements (``tile_*``).
_ELEMENTWISE = (
    ir.Var,
    ir.Unary,
    ir.Binary,
    ir.Select,
    ir.Cast,
    ir.TileFill,
    ir.LoadWindow,
    ir.VecLoad,
    ir.TileSet,
    ir.Reshape,
)


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
    shared_limit = 16384  # workgroup/shared bytes one program may declare
    staging_bytes = 8192  # scratch bytes for the two panels of one matmul chunk

    def __init__(self, options: Options | None = None):
        self.options = options or Options()
        self.requested_threads = self.options.threads

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

    def declare_array(self, name: str, dtype: DType, count: int) -> str:
        """A private array of ``count`` elements (a thread's slots of a tile or vec)."""
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

    def close_loop(self, increment: str | None, ends: str | None = None) -> None:
        """End the loop :meth:`open_loop` began. ``ends``, where known, is an expression
        that is true when the loop's next test will leave it (its condition negated), to be
        evaluated after ``increment``: a target may use it (WGSL on a driver with a loop
        budget, ``wgsl.py``)."""
        raise NotImplementedError

    def function_open(self, name: str, params: list[tuple[str, DType]], result: DType) -> str:
        raise NotImplementedError

    def prelude(self, kernel: ir.KernelIR, layout: Layout, uses_f16: bool) -> list[str]:
        """Everything before the helpers: extensions, bindings, the parameter block."""
        raise NotImplementedError

    def entry_open(self, kernel: ir.KernelIR, layout: Layout) -> list[str]:
        """The entry point's signature; must define the thread index as u32 ``q_lid`` and
        as i32 ``q_t``."""
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
        self._scratch_size: dict[str, int] = {}
        self._pre: dict[int, str] = {}  # prepared operands of the open slot loop, by id
        self._in_slots = False
        self._helpers: dict[str, list[str]] = {}
        self._check_dtypes(kernel)
        self.loaded, self.stored = ir.array_uses(kernel)
        self.atomic_params = {
            node.view.param for node in ir.walk_body(kernel.body) if isinstance(node, ir.Atomic)
        }
        self.probe = probe.is_probe(kernel)
        if self.probe:  # the walker writes the probe buffer itself: the launcher copies it back
            self.stored = self.stored | {probe.PROBE_PARAM}
        self.store_barriers = _store_barriers(kernel)
        self._loops = 0
        self.solo = not ir.holds_tiles(kernel)
        self.layout = self._layout(kernel)
        if self.solo:
            self.layout.programs_per_group = self.layout.threads = self.solo_programs
        else:
            self.layout.threads = choose_threads(kernel, self.requested_threads, self.language)
        self.threads = self.layout.threads
        self.uses_f16 = (
            any(d is f16 for node in ir.walk_body(kernel.body) for d in _node_dtypes(node))
            or any(p.type.dtype is f16 for p in kernel.params)
            or any(t.dtype is f16 for t in kernel.locals.values())
        )

        # The body first (it decides which scratch arrays and helpers exist).
        self._depth = 1
        for name, typ in kernel.locals.items():
            if typ.kind in ("tile", "vec"):
                self.emit(self.declare_array(self.local(name), typ.dtype, self.slots(typ)))
            else:
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
        shared = 0
        for name, dtype in self._scratch.items():
            size = self._scratch_size.get(name, 0)
            shared += _BYTES[dtype] * max(size, 1)
            self.emit(self.declare_scratch(name, dtype, size))
        self.layout.shared_bytes = shared
        if shared > self.shared_limit:
            raise BackendError(
                f"kernel {kernel.name!r} needs {shared} bytes of workgroup/shared memory per "
                f"program for its exchanges, past {self.language}'s limit of "
                f"{self.shared_limit}: use smaller tiles, or the cpu backend"
            )
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

    def scratch(self, dtype: DType, index: int = 0, size: int = THREADS) -> str:
        """Scratch array ``index`` of ``dtype`` (declared with the largest size asked)."""
        name = f"qs_{dtype.name}_{index}"
        self._scratch[name] = dtype
        self._scratch_size[name] = max(self._scratch_size.get(name, 0), size)
        return name

    # ------------------------------------------------------------------ the layout

    # A tile or vec of S elements is held by the program's P threads: flat (row-major)
    # element e by thread e % P in slot e // P of a private array of max(1, S // P)
    # slots; a value smaller than the program (S < P) is replicated, thread t holding
    # element t % S. Shapes and P are powers of two, so the slots divide evenly.

    def slots(self, typ: ir.Type) -> int:
        return max(1, typ.size // self.threads)

    def replicated(self, typ: ir.Type) -> bool:
        return typ.size < self.threads

    def slot_loop(self, typ: ir.Type) -> None:
        """Open the loop over this thread's slots of a value of ``typ``: ``q_s`` the slot,
        ``q_e`` its element's flat index. :meth:`close` ends it."""
        slots = self.slots(typ)
        saved, self._loc = self._loc, None  # (a compiler error names the op's own line)
        if slots == 1:
            self.open("{")
            self.emit(self.declare_let("q_s", i32, self.literal(0, i32)))
        else:
            self.open(self.counted_loop("q_s", 0, slots))
        if self.replicated(typ):
            flat = f"q_t % {typ.size}"
        else:
            flat = "q_t" if slots == 1 else f"q_s * {self.threads} + q_t"
        self.emit(self.declare_let("q_e", i32, flat))
        self._loc = saved

    def new_array(self, typ: ir.Type) -> str:
        name = self.temp()
        self.emit(self.declare_array(name, typ.dtype, self.slots(typ)))
        return name

    def prepare(self, node) -> None:
        """Evaluate, before a slot loop over ``node``, what its elements need that is not
        elementwise: scalar operands (once, not per slot) and operands that exchange
        elements (into private arrays); the loop then reads them from ``_pre``."""
        for child in ir.children(node):
            if id(child) in self._pre:
                continue
            if isinstance(child, ir.ArrayView):
                if child.batch is not None:
                    self.prepare_scalar(child.batch)
                continue
            if child.type.kind == "scalar":
                self.prepare_scalar(child)
            elif isinstance(child, _ELEMENTWISE) and not (
                isinstance(child, ir.Var) and child.name not in self.kernel.locals
            ):
                self.prepare(child)
            elif isinstance(child, ir.Broadcast) and self.free_broadcast(child):
                self._pre[id(child)] = f"{self.materialize(child.operand)}[0]"
            else:
                self._pre[id(child)] = f"{self.materialize(child)}[q_s]"

    def prepare_scalar(self, node: ir.Expr) -> None:
        value = self.expr(node)
        if not re.fullmatch(r"[\w.]+", value):
            value = self.let(node.type.dtype, value)
        self._pre[id(node)] = value

    def materialize(self, node: ir.Expr) -> str:
        """A tile or vec expression as the name of the private array holding it."""
        if isinstance(node, ir.Var) and node.name in self.kernel.locals:
            return self.local(node.name)
        exchange = getattr(self, "tile_" + type(node).__name__, None)
        saved_loc = self._loc
        self._loc = node.loc or saved_loc
        try:
            if exchange is not None:
                return exchange(node)
            return self.elementwise(node, None)
        finally:
            self._loc = saved_loc

    def elementwise(self, node: ir.Expr, target: str | None) -> str:
        """Evaluate the elementwise tree ``node`` slot by slot into ``target`` (a new
        array if None): one loop, its exchanging operands prepared first."""
        saved, in_slots = dict(self._pre), self._in_slots
        self.prepare(node)
        if target is None:
            target = self.new_array(node.type)
        self.slot_loop(node.type)
        self._in_slots = True
        self.emit(f"{target}[q_s] = {self.expr(node)};")
        self._in_slots = in_slots
        self.close()
        self._pre = saved
        return target

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
        typ = self.kernel.locals.get(stmt.name, stmt.value.type)
        if stmt.value.type.kind in ("tile", "vec"):
            target = self.local(stmt.name)
            if hasattr(self, "tile_" + type(stmt.value).__name__):
                source = self.materialize(stmt.value)
                self.slot_loop(typ)
                self.emit(f"{target}[q_s] = {source}[q_s];")
                self.close()
            else:  # written in place: an elementwise tree reads only its own slot
                self.elementwise(stmt.value, target)
        else:
            value = self.expr(stmt.value)
            self.emit(f"{self.local(stmt.name)} = {value};")
        if self.probe:
            self.probe_step(typ, self.local(stmt.name))

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
        before = len(self._lines)
        cond = self.expr(stmt.cond)
        pure = len(self._lines) == before  # one expression, no statements: testable again
        self.emit(f"if (!{cond}) {{ break; }}")
        self.loop_body(stmt.body)
        self.close_loop(None, f"!{cond}" if pure else None)

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
        ends = (
            f"{step} == 0 || ({step} > 0 && {counter} >= {stop}) || "
            f"({step} < 0 && {counter} <= {stop})"
        )
        self.emit(f"if ({ends}) {{ break; }}")
        self.emit(f"{self.local(stmt.var)} = {counter};")
        self.loop_body(stmt.body)
        self.close_loop(increment, ends)

    def stmt_Break(self, stmt) -> None:
        self.emit("break;")

    def stmt_Continue(self, stmt) -> None:
        self.emit("continue;")

    def store_slots(self, stmt, place) -> None:
        """A tile or vec store: each thread writes its elements (``place()`` gives, in the
        slot loop, the flat index and the condition), ordered as :meth:`guarded_store`."""
        view, typ = stmt.view, stmt.value.type
        saved, in_slots = dict(self._pre), self._in_slots
        if self.probe:  # the stored value is recorded first, as a whole
            array = self.materialize(stmt.value)
            self.probe_step(typ, array)
            self._pre[id(stmt.value)] = f"{array}[q_s]"
        dtype = view.type.dtype
        if id(stmt.value) not in self._pre and any(
            isinstance(n, _LOADS) and n.view.type.dtype is dtype for n in ir.walk(stmt.value)
        ):
            # read all of it before any thread writes (the store may overwrite what it reads)
            array = self.materialize(stmt.value)
            self._pre[id(stmt.value)] = f"{array}[q_s]"
        self.prepare(stmt)
        before, after = self.store_barriers[id(stmt)]
        if before or self._loops:
            self.emit(self.storage_barrier)
        self.slot_loop(typ)
        self._in_slots = True
        value = self.expr(stmt.value)
        if typ.dtype is not view.type.dtype:  # converted to the array's dtype
            value = self.cast(value, typ.dtype, view.type.dtype)
        index, ok = place()
        if self.replicated(typ):  # one writer per element
            ok = f"q_t < {typ.size} && {ok}"
        write = self.array_write(self.binding(view.param), index, value, view.type.dtype)
        self.emit(f"if ({ok}) {{ {write} }}")
        self._in_slots = in_slots
        self.close()
        self._pre = saved
        if after or self._loops:
            self.emit(self.storage_barrier)

    def stmt_StoreWindow(self, stmt: ir.StoreWindow) -> None:
        shape = stmt.value.type.shape
        self.store_slots(
            stmt, lambda: self.window(stmt.view, stmt.r0, stmt.r1, stmt.c0, stmt.c1, shape)
        )

    def stmt_VecStore(self, stmt: ir.VecStore) -> None:
        self.store_slots(
            stmt,
            lambda: self.vec_place(stmt.view, stmt.start, stmt.stop, stmt.col, stmt.axis),
        )

    def stmt_ArrayStore(self, stmt: ir.ArrayStore) -> None:
        value = self.probe_value(stmt.value, self.expr(stmt.value))
        index, ok = self.element(stmt.view, stmt.indices)
        self.guarded_store(stmt, ok if self.solo else f"q_lid == 0u && {ok}", index, value)

    def atomic_update(self, op: str, binding: str, index: str, value: str, dtype: DType) -> str:
        """The expression that applies ``qnb.atomic_<op>`` to one element and gives its old
        value. A target without atomics refuses (the caller places the error)."""
        raise BackendError(f"qnb.atomic_{op} does not run on {self.language} yet")

    def stmt_Atomic(self, stmt: ir.Atomic) -> None:
        """An atomic: each element of the index updates its element once (a scalar index:
        thread 0 of the program, its old value broadcast to the result)."""
        view, typ, dtype = stmt.view, stmt.value.type, stmt.view.type.dtype
        binding = self.binding(view.param)
        try:
            self.atomic_update(stmt.op, binding, "0", "0", dtype)
        except BackendError as exc:
            exc.ir_loc = stmt.loc
            raise
        before, after = self.store_barriers[id(stmt)]
        if typ.kind == "scalar":
            value = self.probe_value(stmt.value, self.expr(stmt.value))
            index, ok = self.element(view, stmt.indices)
            update = self.atomic_update(stmt.op, binding, index, value, dtype)
            if self.solo:
                old = self.var(dtype, self.literal(0, dtype))
                self.emit(f"if ({ok}) {{ {old} = {update}; }}")
            else:
                if before or self._loops:
                    self.emit(self.storage_barrier)
                slot = self.broadcast_slot(self.scratch_dtype(dtype))
                self.emit(self.barrier)
                self.open("if (q_lid == 0u) {")
                self.emit(f"{slot} = {self.to_scratch(self.literal(0, dtype), dtype)};")
                self.emit(f"if ({ok}) {{ {slot} = {self.to_scratch(update, dtype)}; }}")
                self.close()
                old = self.broadcast(slot, dtype)
            if stmt.result is not None:
                self.emit(f"{self.local(stmt.result)} = {old};")
        else:
            saved, in_slots = dict(self._pre), self._in_slots
            if self.probe:  # the value is recorded first, as a whole
                array = self.materialize(stmt.value)
                self.probe_step(typ, array)
                self._pre[id(stmt.value)] = f"{array}[q_s]"
            self.prepare(stmt)
            if before or self._loops:
                self.emit(self.storage_barrier)
            self.slot_loop(typ)
            self._in_slots = True
            value = self.expr(stmt.value)
            index, ok = self.element(view, stmt.indices)
            if self.replicated(typ):  # one update per element
                ok = f"q_t < {typ.size} && {ok}"
            update = self.atomic_update(stmt.op, binding, index, value, dtype)
            self.emit(f"if ({ok}) {{ {update}; }}")
            self._in_slots = in_slots
            self.close()
            self._pre = saved
        if after or self._loops:
            self.emit(self.storage_barrier)

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
        """A stored scalar, recorded first in a probe build (into a temporary, once)."""
        if not self.probe:
            return value
        value = self.let(node.type.dtype, value)
        self.probe_step(node.type, value)
        return value

    def probe_step(self, typ: ir.Type, value: str) -> None:
        """Record ``value`` (a scalar, or the private array of a tile or vec): element
        ``e`` at word ``e`` of the entry, written by its owner thread."""
        kind, dtype = typ.kind, typ.dtype
        here, count, at, binding, capacity, first = self._probe
        words = (
            self.probe_words(value, dtype)
            if kind == "scalar"
            else [None] * len(self.probe_words("x", dtype))
        )
        need = 1 + probe.value_words(typ)
        line = self._loc.line if self._loc is not None else 0
        element = lambda index: self.array_element(binding, index)  # noqa: E731
        self.open(f"if ({here}) {{")
        self.open(f"if ({count} < {probe.STEP_BUDGET} && {at} + {need} <= {capacity}) {{")
        self.emit(f"if ({first}) {{ {element(at)} = {probe.header(typ, line)}; }}")
        if kind in ("tile", "vec"):
            self.slot_loop(typ)
            words = self.probe_words(f"{value}[q_s]", dtype)
            position = "q_e"
            guard = f"q_t < {typ.size}" if self.replicated(typ) else None
        else:
            position, guard = "0", first
        for w, word in enumerate(words):
            index = f"{at} + {1 + w} + {position} * {len(words)}"
            write = f"{element(index)} = {word};"
            self.emit(write if guard is None else f"if ({guard}) {{ {write} }}")
        if kind in ("tile", "vec"):
            self.close()
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

    def window(self, view, r0, r1, c0, c1, shape):
        """(flat index, in-window condition) of this slot's element of a tile window."""
        (offset, batch_ok), (rows, cols) = self.view_base(view)
        r0, r1, c0, c1 = (self.let(i32, self.expr(e)) for e in (r0, r1, c0, c1))
        n = shape[1]
        row, col = self.let(i32, f"{r0} + q_e / {n}"), self.let(i32, f"{c0} + q_e % {n}")
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
        """A scalar's value; in a slot loop, the element ``q_s`` of a tile or vec; outside
        one, a tile or vec as the name of its private array."""
        prepared = self._pre.get(id(node))
        if prepared is not None:
            return prepared
        if not self._in_slots and node.type.kind in ("tile", "vec"):
            return self.materialize(node)
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
            if node.type.kind in ("tile", "vec"):
                return f"{self.local(node.name)}[q_s]"
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

    # ---- elementwise ops: one element (slot ``q_s``, flat index ``q_e``) at a time

    def expr_TileFill(self, node: ir.TileFill) -> str:
        dtype = node.type.dtype
        if node.kind == "eye":
            n = node.type.shape[-1]
            return self.select(
                f"q_e / {n} == q_e % {n}", self.literal(1, dtype), self.literal(0, dtype)
            )
        if node.kind == "arange":
            return self.cast("q_e", i32, dtype) if dtype is not i32 else "q_e"
        value = self.expr(node.value)
        if node.value.type.dtype is not dtype:
            value = self.cast(value, node.value.type.dtype, dtype)
        return value

    def expr_Reshape(self, node: ir.Reshape) -> str:
        return self.expr(node.operand)  # the same flat order: the same slots

    def expr_TileSet(self, node: ir.TileSet) -> str:
        base, value = self.expr(node.base), self.expr(node.value)
        shape = node.type.shape
        i = self.let(i32, self.expr(node.i))
        if node.j is None:
            here = f"{i} >= 0 && {i} < {shape[0]} && q_e == {i}"
        else:
            j = self.let(i32, self.expr(node.j))
            here = (
                f"{i} >= 0 && {i} < {shape[0]} && {j} >= 0 && {j} < {shape[1]} "
                f"&& q_e == {i} * {shape[1]} + {j}"
            )
        return self.let(node.type.dtype, self.select(here, value, base))

    def expr_LoadWindow(self, node: ir.LoadWindow) -> str:
        dtype = node.type.dtype
        result = self.var(dtype, self.expr(node.base))
        index, ok = self.window(node.view, node.r0, node.r1, node.c0, node.c1, node.type.shape)
        stored = node.view.type.dtype
        value = self.array_read(self.binding(node.view.param), index, stored)
        if stored is not dtype:  # Tile.load(..., dtype=): converted as astype does
            value = self.cast(value, stored, dtype)
        self.emit(f"if ({ok}) {{ {result} = {value}; }}")
        return result

    def vec_place(self, view, start, stop, col, axis):
        """(flat index, condition) of this slot's element of a vec load or store."""
        base, dims = self.view_base(view)
        start, stop = self.let(i32, self.expr(start)), self.let(i32, self.expr(stop))
        pos = self.let(i32, f"{start} + q_e")
        if col is None:
            ok = f"{base[1]} && {pos} >= 0 && {pos} < min({stop}, {dims[0]})"
            return f"{base[0]} + {pos}", ok
        col = self.let(i32, self.expr(col))
        if axis == 0:  # a column: a[start + i, col]
            ok = (
                f"{base[1]} && {pos} >= 0 && {pos} < min({stop}, {dims[0]}) "
                f"&& {col} >= 0 && {col} < {dims[1]}"
            )
            return f"{base[0]} + {self.wide(pos)} * {dims[1]} + {col}", ok
        ok = (  # a row: a[col, start + j]
            f"{base[1]} && {pos} >= 0 && {pos} < min({stop}, {dims[1]}) "
            f"&& {col} >= 0 && {col} < {dims[0]}"
        )
        return f"{base[0]} + {self.wide(col)} * {dims[1]} + {pos}", ok

    def expr_VecLoad(self, node: ir.VecLoad) -> str:
        dtype = node.type.dtype
        index, ok = self.vec_place(node.view, node.start, node.stop, node.col, node.axis)
        other = self.literal(0, dtype) if node.other is None else self.expr(node.other)
        result = self.var(dtype, other)
        stored = node.view.type.dtype
        value = self.array_read(self.binding(node.view.param), index, stored)
        if stored is not dtype:
            value = self.cast(value, stored, dtype)
        self.emit(f"if ({ok}) {{ {result} = {value}; }}")
        return result

    def expr_Broadcast(self, node: ir.Broadcast) -> str:
        raise AssertionError("a Broadcast is prepared before its slot loop")  # pragma: no cover

    # ---- ops that exchange elements through scratch (workgroup/shared) memory

    def to_shared(
        self, array: str, typ: ir.Type, dtype: DType | None = None, index: int = 0
    ) -> str:
        """Barrier, then every thread writes its elements of the private ``array`` (a value
        of ``typ``, converted to ``dtype``) to scratch ``index`` at their flat indices;
        returns the scratch name. The caller puts a barrier before reading it."""
        dtype = dtype or typ.dtype
        name = self.scratch(self.scratch_dtype(dtype), index, typ.size)
        self.emit(self.barrier)
        self.slot_loop(typ)
        value = self.narrow(f"{array}[q_s]", typ.dtype, dtype)
        write = f"{name}[q_e] = {self.to_scratch(value, dtype)};"
        self.emit(f"if (q_t < {typ.size}) {{ {write} }}" if self.replicated(typ) else write)
        self.close()
        return name

    def read_shared(self, name: str, index: str, dtype: DType) -> str:
        return self.from_scratch(f"{name}[{index}]", dtype)

    def fill(self, typ: ir.Type, element) -> str:
        """A new private array of ``typ`` whose slot gets ``element()`` (called inside the
        slot loop, where it may emit statements)."""
        name = self.new_array(typ)
        self.slot_loop(typ)
        self.emit(f"{name}[q_s] = {element()};")
        self.close()
        return name

    def tile_Transpose(self, node: ir.Transpose) -> str:
        dtype = node.type.dtype
        m, n = node.operand.type.shape
        name = self.to_shared(self.materialize(node.operand), node.operand.type)
        self.emit(self.barrier)
        # result [r, c] (shape N x M) is operand [c, r]
        return self.fill(
            node.type, lambda: self.read_shared(name, f"(q_e % {m}) * {n} + q_e / {m}", dtype)
        )

    def tile_Broadcast(self, node: ir.Broadcast) -> str:
        source = self.materialize(node.operand)
        if self.free_broadcast(node):
            return self.fill(node.type, lambda: f"{source}[0]")
        a, b = _as_2d(node.operand.type.shape)
        n = _as_2d(node.type.shape)[1]
        name = self.to_shared(source, node.operand.type)
        self.emit(self.barrier)
        row = f"(q_e / {n}) * {b}" if a > 1 else "0"
        col = f"q_e % {n}" if b > 1 else "0"
        return self.fill(
            node.type, lambda: self.read_shared(name, f"{row} + {col}", node.type.dtype)
        )

    def free_broadcast(self, node: ir.Broadcast) -> bool:
        """Whether each thread already holds its elements of the broadcast: the operand is
        replicated (no larger than the program) and is repeated as whole rows, so element
        ``e`` of the result is element ``e % S`` of the operand, which thread ``e % P``
        holds in slot 0."""
        typ = node.operand.type
        a, b = _as_2d(typ.shape)
        return typ.size <= self.threads and a == 1 and b in (1, _as_2d(node.type.shape)[1])

    def expr_IndexReduce(self, node: ir.IndexReduce) -> str:
        """argmax/argmin: the spelling in reductions the node carries."""
        return self.expr(node.spelled)

    def tile_IndexReduce(self, node: ir.IndexReduce) -> str:
        return self.materialize(node.spelled)

    def expr_Reduce(self, node: ir.Reduce) -> str:
        """A reduction to a scalar: each thread combines its own slots, the program's
        partial results meet in scratch, and thread 0 combines them in thread order."""
        dtype = node.type.dtype
        # An f16 sum or product accumulates in f32 and rounds once, as NumPy's f16 sums do.
        work = self.accumulate_dtype(dtype) if node.op in ("sum", "prod") else dtype
        typ = node.operand.type
        array = self.materialize(node.operand)
        partial = self.var(work, self.narrow(f"{array}[0]", typ.dtype, work))
        slots = self.slots(typ)
        if slots > 1:
            s = self.temp()
            self.open(self.counted_loop(s, 1, slots))
            value = self.narrow(f"{array}[{s}]", typ.dtype, work)
            self.emit(f"{partial} = {self.combine(node.op, partial, value, work)};")
            self.close()
        count = min(typ.size, self.threads)
        name = self.scratch(self.scratch_dtype(work), 0, count)
        self.emit(self.barrier)
        self.emit(f"if (q_t < {count}) {{ {name}[q_t] = {self.to_scratch(partial, work)}; }}")
        self.emit(self.barrier)
        slot = self.broadcast_slot(self.scratch_dtype(dtype))
        k = self.temp()
        self.open("if (q_lid == 0u) {")
        acc = self.reduce_init(node.op, name, "0", work)
        self.open(self.counted_loop(k, 1, count))
        value = self.read_shared(name, k, work)
        self.emit(f"{acc} = {self.combine(node.op, acc, value, work)};")
        self.close()
        self.emit(f"{slot} = {self.to_scratch(self.narrow(acc, work, dtype), dtype)};")
        self.close()
        return self.broadcast(slot, dtype)

    def tile_Reduce(self, node: ir.Reduce) -> str:
        """A reduction along one axis (to a vec): each thread combines its elements' rows
        or columns from scratch."""
        dtype = node.type.dtype
        work = self.accumulate_dtype(dtype) if node.op in ("sum", "prod") else dtype
        typ = node.operand.type
        m, n = typ.shape
        name = self.to_shared(self.materialize(node.operand), typ, work)
        self.emit(self.barrier)
        k = self.temp()

        def element():
            if node.axis == 1:  # v[i] = op_j t[i, j]
                first, at, count = f"q_e * {n}", f"q_e * {n} + {k}", n
            else:  # v[j] = op_i t[i, j]
                first, at, count = "q_e", f"{k} * {n} + q_e", m
            acc = self.reduce_init(node.op, name, first, work)
            self.open(self.counted_loop(k, 1, count))
            self.emit(
                f"{acc} = {self.combine(node.op, acc, self.read_shared(name, at, work), work)};"
            )
            self.close()
            return self.narrow(acc, work, dtype)

        return self.fill(node.type, element)

    def tile_Scan(self, node: ir.Scan) -> str:
        """cumsum/cumprod, Hillis and Steele's way in scratch: at step ``d`` (1, 2, 4 …,
        unrolled: no loop for a driver to cut) each element combines the value ``d``
        before it on its line, when there is one, so after log2(line) steps each holds
        its inclusive scan. (Sums group differently from the cpu's running sum: the
        same value within rounding, the same bits for i32.)"""
        dtype = node.type.dtype
        work = self.accumulate_dtype(dtype)
        typ = node.operand.type
        m, n = _as_2d(typ.shape)
        along_rows = node.axis != 0  # along each row (a vec: its one row)
        line, stride = (n, 1) if along_rows else (m, n)
        name = self.to_shared(self.materialize(node.operand), typ, work)
        self.emit(self.barrier)
        private = self.new_array(typ.with_dtype(work))
        position = f"q_e % {n}" if along_rows else f"q_e / {n}"
        step = 1
        while step < line:
            self.slot_loop(typ)
            own = self.read_shared(name, "q_e", work)
            # (clamped: a select may read both sides, and the first elements have none)
            earlier = self.read_shared(name, f"max(q_e - {step * stride}, 0)", work)
            combined = self.combine(node.op, earlier, own, work)
            self.emit(f"{private}[q_s] = {self.select(f'{position} >= {step}', combined, own)};")
            self.close()
            self.emit(self.barrier)
            self.slot_loop(typ)
            write = f"{name}[q_e] = {self.to_scratch(f'{private}[q_s]', work)};"
            self.emit(f"if (q_t < {typ.size}) {{ {write} }}" if self.replicated(typ) else write)
            self.close()
            self.emit(self.barrier)
            step *= 2
        return self.fill(
            node.type, lambda: self.narrow(self.read_shared(name, "q_e", work), work, dtype)
        )

    def narrow(self, value: str, work: DType, dtype: DType) -> str:
        """``value``, computed in ``work``, as ``dtype`` (unchanged text when they agree)."""
        return value if work is dtype else self.cast(value, work, dtype)

    def counted_loop(self, name: str, start, stop) -> str:
        """Header of ``for name in range(start, stop)``."""
        raise NotImplementedError

    def strided_loop(self, name: str, start: str, stop, step: int) -> str:
        """Header of ``for name in range(start, stop, step)`` (``step`` > 0)."""
        raise NotImplementedError

    def accumulate_dtype(self, dtype: DType) -> DType:
        return f32 if dtype in (f16, bf16) else dtype

    def matmul_chunk(self, m: int, n: int, k: int, dtype: DType) -> int:
        """How many of the K columns of ``a`` (rows of ``b``) are staged at once: the
        largest power of two whose two panels fit :attr:`staging_bytes`."""
        chunk = k
        while chunk > 1 and (m + n) * chunk * _BYTES[dtype] > self.staging_bytes:
            chunk //= 2
        return chunk

    def tile_Matmul(self, node: ir.Matmul) -> str:
        """``acc + a @ b``: the K axis in chunks; per chunk the panels ``a[:, k0:k0+kc]``
        and ``b[k0:k0+kc, :]`` go through scratch and each thread adds their products
        into its own elements, in K order."""
        dtype = node.type.dtype
        work = self.accumulate_dtype(node.a.type.dtype)
        (m, kk), n = node.a.type.shape, node.b.type.shape[1]
        a, b = self.materialize(node.a), self.materialize(node.b)
        acc_value = None if node.acc is None else self.materialize(node.acc)
        chunk = self.matmul_chunk(m, n, kk, work)
        total = self.new_array(node.type.with_dtype(work))
        self.slot_loop(node.type)
        self.emit(f"{total}[q_s] = {self.literal(0, work)};")
        self.close()
        sa = self.scratch(self.scratch_dtype(work), 0, m * chunk)
        sb = self.scratch(self.scratch_dtype(work), 1, chunk * n)
        c = self.temp()
        self.open(self.counted_loop(c, 0, kk // chunk))
        self.emit(self.barrier)
        for array, typ, panel, at, inside in (
            (
                a,
                node.a.type,
                sa,
                f"(q_e / {kk}) * {chunk} + q_e % {chunk}",
                f"q_e % {kk} / {chunk} == {c}",
            ),
            (
                b,
                node.b.type,
                sb,
                f"(q_e / {n} % {chunk}) * {n} + q_e % {n}",
                f"q_e / {n} / {chunk} == {c}",
            ),
        ):
            if self.replicated(typ):
                inside += f" && q_t < {typ.size}"
            self.slot_loop(typ)
            value = self.to_scratch(self.narrow(f"{array}[q_s]", typ.dtype, work), work)
            self.emit(f"if ({inside}) {{ {panel}[{at}] = {value}; }}")
            self.close()
        self.emit(self.barrier)
        k = self.temp()
        self.slot_loop(node.type)
        self.open(self.counted_loop(k, 0, chunk))
        a_k = self.read_shared(sa, f"(q_e / {n}) * {chunk} + {k}", work)
        b_k = self.read_shared(sb, f"{k} * {n} + q_e % {n}", work)
        self.emit(
            f"{total}[q_s] = {self.arith('add', f'{total}[q_s]', self.arith('mul', a_k, b_k, work), work)};"
        )
        self.close()
        self.close()
        self.close()

        def element():
            result = self.narrow(f"{total}[q_s]", work, dtype)
            if acc_value is not None:
                result = f"({self.arith('add', f'{acc_value}[q_s]', result, dtype)})"
            return result

        return self.fill(node.type, element)

    def tile_Outer(self, node: ir.Outer) -> str:
        dtype = node.type.dtype
        n = node.type.shape[1]
        u, v = self.materialize(node.u), self.materialize(node.v)
        su = self.to_shared(u, node.u.type, index=0)
        sv = self.to_shared(v, node.v.type, index=1)
        self.emit(self.barrier)
        return self.fill(
            node.type,
            lambda: self.arith(
                "mul",
                self.read_shared(su, f"q_e / {n}", dtype),
                self.read_shared(sv, f"q_e % {n}", dtype),
                dtype,
            ),
        )

    def tile_RowCol(self, node: ir.RowCol) -> str:
        dtype = node.type.dtype
        m, n = node.operand.type.shape
        array = self.materialize(node.operand)
        index = self.let(i32, self.expr(node.index))
        name = self.to_shared(array, node.operand.type)
        self.emit(self.barrier)
        at = f"{index} * {n} + q_e" if node.which == "row" else f"q_e * {n} + {index}"
        limit = m if node.which == "row" else n

        def element():
            result = self.var(dtype, self.literal(0, dtype))
            self.emit(
                f"if ({index} >= 0 && {index} < {limit}) "
                f"{{ {result} = {self.read_shared(name, at, dtype)}; }}"
            )
            return result

        return self.fill(node.type, element)

    def expr_TileGet(self, node: ir.TileGet) -> str:
        """An element as a scalar: its owner thread writes it to the broadcast slot."""
        dtype = node.type.dtype
        typ = node.base.type
        array = self.materialize(node.base)
        i = self.let(i32, self.expr(node.i))
        if node.j is None:
            inside = f"{i} >= 0 && {i} < {typ.shape[0]}"
            flat = i
        else:
            j = self.let(i32, self.expr(node.j))
            m, n = typ.shape
            inside = f"{i} >= 0 && {i} < {m} && {j} >= 0 && {j} < {n}"
            flat = self.let(i32, f"{i} * {n} + {j}")
        if self.replicated(typ):
            owner, slot_index = f"q_t == {flat}", "0"
        else:
            p = self.threads
            owner, slot_index = f"q_t == {flat} % {p}", f"{flat} / {p}"
        slot = self.broadcast_slot(self.scratch_dtype(dtype))
        self.emit(self.barrier)
        # An index outside the value reads 0 (thread 0 writes it; no owner exists).
        self.emit(
            f"if (q_lid == 0u && !({inside})) {{ {slot} = "
            f"{self.to_scratch(self.literal(0, dtype), dtype)}; }}"
        )
        self.emit(
            f"if (({inside}) && {owner}) {{ {slot} = "
            f"{self.to_scratch(f'{array}[{slot_index}]', dtype)}; }}"
        )
        return self.broadcast(slot, dtype)

    def tile_Cholesky(self, node: ir.Cholesky) -> str:
        dtype = node.type.dtype
        n = node.type.shape[0]
        eps = self.let(dtype, self.expr(node.eps))
        a = self.to_shared(self.materialize(node.operand), node.operand.type)
        self.emit(self.barrier)
        j, k, r = self.temp(), self.temp(), self.temp()
        at = lambda row, col: self.read_shared(a, f"{row} * {n} + {col}", dtype)  # noqa: E731
        # Column j: thread 0 finishes the diagonal over the finished columns k < j, then
        # the rows below (a thread per row, strided) divide by it. f16 dot products
        # accumulate in f32 and round once (as the cpu backend's einsum).
        work = self.accumulate_dtype(dtype)
        wide = lambda row, col: self.narrow(at(row, col), dtype, work)  # noqa: E731
        sqrt = self.math_functions["sqrt"]

        def dot(row):
            total = self.var(work, self.literal(0, work))
            self.open(self.counted_loop(k, 0, j))
            self.emit(f"{total} = {total} + {wide(row, k)} * {wide(j, k)};")
            self.close()
            return self.narrow(total, work, dtype)

        self.open(self.counted_loop(j, 0, n))
        self.open("if (q_lid == 0u) {")
        total = self.let(dtype, dot(j))
        floored = self.minmax("max", f"{at(j, j)} - {total}", eps, dtype)
        self.emit(f"{a}[{j} * {n} + {j}] = {self.to_scratch(f'{sqrt}({floored})', dtype)};")
        self.close()
        self.emit(self.barrier)
        self.open(self.strided_loop(r, f"{j} + 1 + q_t", n, self.threads))
        total = self.let(dtype, dot(r))
        below = self.to_scratch(f"({at(r, j)} - {total}) / {at(j, j)}", dtype)
        self.emit(f"{a}[{r} * {n} + {j}] = {below};")
        self.close()
        self.emit(self.barrier)
        self.close()
        return self.fill(
            node.type,
            lambda: self.select(
                f"q_e / {n} >= q_e % {n}", self.read_shared(a, "q_e", dtype), self.literal(0, dtype)
            ),
        )

    def tile_SolveTriangular(self, node: ir.SolveTriangular) -> str:
        dtype = node.type.dtype
        m, n = node.type.shape
        lower_value, rhs_value = self.materialize(node.lower), self.materialize(node.rhs)
        lower = self.to_shared(lower_value, node.lower.type, index=0)
        x = self.to_shared(rhs_value, node.rhs.type, index=1)
        self.emit(self.barrier)
        k, q, r = self.temp(), self.temp(), self.temp()
        L = lambda row, col: self.read_shared(lower, f"{row} * {n} + {col}", dtype)  # noqa: E731
        X = lambda row, col: self.read_shared(x, f"{row} * {n} + {col}", dtype)  # noqa: E731
        # Rows of X are independent: a thread per row (strided) substitutes forward.
        work = self.accumulate_dtype(dtype)  # f16 dots accumulate in f32, round once
        self.open(self.strided_loop(r, "q_t", m, self.threads))
        self.open(self.counted_loop(k, 0, n))
        if work is dtype:
            total = self.var(dtype, X(r, k))
            self.open(self.counted_loop(q, 0, k))
            self.emit(f"{total} = {total} - {X(r, q)} * {L(k, q)};")
            self.close()
        else:
            dot = self.var(work, self.literal(0, work))
            self.open(self.counted_loop(q, 0, k))
            wide = [self.narrow(v, dtype, work) for v in (X(r, q), L(k, q))]
            self.emit(f"{dot} = {dot} + {wide[0]} * {wide[1]};")
            self.close()
            total = self.let(dtype, f"{X(r, k)} - {self.narrow(dot, work, dtype)}")
        self.emit(f"{x}[{r} * {n} + {k}] = {self.to_scratch(f'{total} / {L(k, k)}', dtype)};")
        self.close()
        self.close()
        self.emit(self.barrier)
        return self.fill(node.type, lambda: self.read_shared(x, "q_e", dtype))

    def arith(self, op: str, a: str, b: str, dtype: DType) -> str:
        """``a + b`` / ``a - b`` / ``a * b`` in ``dtype``, unparenthesised, for the products
        and sums the walker writes itself (a target whose i32 overflow is undefined wraps
        it here)."""
        return f"{a} {_ARITH[op]} {b}"

    def combine(self, op: str, acc: str, value: str, dtype: DType) -> str:
        if op in _REDUCE_ARITH:
            return self.arith(_REDUCE_ARITH[op], acc, value, dtype)
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
