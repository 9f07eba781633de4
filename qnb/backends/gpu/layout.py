"""The GPU program's layout: threads per program and the fragments (slots) a tile or
vec is held in, the binding layout a launcher reads, and the walker's layout methods.
(The program model is described in :mod:`qnb.backends.gpu`.)"""

from __future__ import annotations

from dataclasses import dataclass, field

from qnb import ir, ops
from qnb.dtypes import DType, bf16, bool_, f16, f32, f64, i32
from qnb.errors import BackendError

THREADS = ir.TILE * ir.TILE  # the old layout's program (still the Layout's default)


MAX_THREADS = 256  # threads per program: WebGPU's default maxComputeInvocationsPerWorkgroup


MAX_ELEMENTS = 4096  # the largest tile or vec a GPU program holds


ARITH = {"add": "+", "sub": "-", "mul": "*"}


REDUCE_ARITH = ops.REDUCE_ARITH  # the reductions that combine by arithmetic (qnb.ops)


BYTES = {f16: 2, bf16: 2, f32: 4, i32: 4, bool_: 4, f64: 8}


def as_2d(shape: tuple[int, ...]) -> tuple[int, int]:
    """A vec's shape as the 1 x N tile NumPy's broadcasting treats it as."""
    return (1, shape[0]) if len(shape) == 1 else (shape[0], shape[1])


def value_types(kernel: ir.KernelIR):
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
    for typ, loc in value_types(kernel):
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


class LayoutMixin:
    """Threads, slots and scratch: how a program holds its values."""

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

    def scratch(self, dtype: DType, index: int = 0, size: int = THREADS) -> str:
        """Scratch array ``index`` of ``dtype`` (declared with the largest size asked)."""
        name = f"qs_{dtype.name}_{index}"
        self._scratch[name] = dtype
        self._scratch_size[name] = max(self._scratch_size.get(name, 0), size)
        return name

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

    def broadcast_slot(self, dtype: DType) -> str:
        name = f"qu_{dtype.name}"
        self._scratch[name] = dtype
        return name
