"""The walker's driver: :meth:`GpuRenderer.render`, names and lines, and the slot loop's
preparation of operands. The rooms of the walk are mixins (see :mod:`qnb.backends.gpu`)."""

from __future__ import annotations

import re

from qnb import ir
from qnb.backends import probe
from qnb.backends.base import Options
from qnb.backends.gpu.analysis import ELEMENTWISE, node_dtypes, store_barriers
from qnb.backends.gpu.exchanges import ExchangesMixin
from qnb.backends.gpu.expressions import ExpressionsMixin
from qnb.backends.gpu.layout import (
    BYTES,
    LayoutMixin,
    Rendered,
    choose_threads,
)
from qnb.backends.gpu.linalg import LinalgMixin
from qnb.backends.gpu.probe_steps import ProbeMixin
from qnb.backends.gpu.pysemantics import PythonSemanticsMixin
from qnb.backends.gpu.statements import StatementsMixin
from qnb.backends.gpu.target import GpuTarget
from qnb.dtypes import DType, f16
from qnb.errors import BackendError


class GpuRenderer(
    StatementsMixin,
    ProbeMixin,
    ExpressionsMixin,
    ExchangesMixin,
    LinalgMixin,
    PythonSemanticsMixin,
    LayoutMixin,
    GpuTarget,
):
    """Render a :class:`~qnb.ir.KernelIR` to GPU source. Subclasses are spelling tables."""

    def __init__(self, options: Options | None = None):
        self.options = options or Options()
        self.requested_threads = self.options.threads

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
        self.store_barriers = store_barriers(kernel)
        self._loops = 0
        self.solo = not ir.holds_tiles(kernel)
        self.layout = self._layout(kernel)
        if self.solo:
            self.layout.programs_per_group = self.layout.threads = self.solo_programs
        else:
            self.layout.threads = choose_threads(kernel, self.requested_threads, self.language)
        self.threads = self.layout.threads
        self.uses_f16 = (
            any(d is f16 for node in ir.walk_body(kernel.body) for d in node_dtypes(node))
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
        shared, align = 0, self.scratch_align
        for name, dtype in self._scratch.items():
            size = self._scratch_size.get(name, 0)
            # each declaration starts at a multiple of the target's alignment: rounding
            # every one up bounds the total the compiler lays out, whatever its order
            # (ptxas placed 13 of them at 49,154 bytes where their sizes add up to 49,044)
            shared += -(-BYTES[dtype] * max(size, 1) // align) * align
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
            for dtype in node_dtypes(node):
                self._spellable(dtype, getattr(node, "loc", None))

    def _spellable(self, dtype, loc, first_use=False):
        try:
            self.type_name(dtype)
        except BackendError as exc:
            if first_use:  # point at the first use in the body if there is one
                for node in ir.walk_body(self.kernel.body):
                    if dtype in tuple(node_dtypes(node)) and getattr(node, "loc", None):
                        loc = node.loc
                        break
            exc.ir_loc = loc
            raise

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
            elif isinstance(child, ELEMENTWISE) and not (
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

    def helper(self, key: str, build) -> str:
        """A helper function, rendered once per kernel; returns its name."""
        if key not in self._helpers:
            saved = self._lines, self._locs, self._depth, self._loc
            self._lines, self._locs, self._depth, self._loc = [], [], 0, None
            build()
            self._helpers[key] = self._lines
            self._lines, self._locs, self._depth, self._loc = saved
        return key
