"""What a launch resolves, as objects a tool built on a kernel can hold.

``kernel[grid]`` is a :class:`Launch` (the kernel and its grid, public); ``kernel.
specialize(*args, grid=..., backend=...)`` is a :class:`Specialization`: the signature,
the captured values read once, the cache key, the lowered IR and the prepared launcher of
that launch, with the ways to run it (the backend, the cpu interpreter, a trace) and to
place its errors at the user's own lines. ``qnb.compare``, ``kernel.trace``, ``%qbench``
and the magics go through these, never through a kernel's private members.

This module is the kernel's own implementation, split from ``qnb/kernel.py`` for size:
it drives the kernel's steps (``Kernel._prepare``, ``_lowered_for``, ``_memo_hit``,
``_locate``, the signature checks), and these two modules are the only ones that read a
kernel's private members (``tests/test_kernel_seams.py`` holds it).
"""

from __future__ import annotations

import numpy as np

from qnb import ir
from qnb.backends import registry as _backends
from qnb.errors import QnbCaptureError, QnbError, QnbTypeError, public
from qnb.frontend.parse import ParsedFunction
from qnb.languages import LANGUAGES, spoken


class Launch:
    """``kernel[grid]``: a kernel bound to a launch grid; call it with the arguments.

    ``kernel`` and ``grid`` (3 ints) say what it launches; ``specialize(*args,
    backend=...)`` is ``kernel.specialize(*args, grid=grid, backend=...)``."""

    __slots__ = ("_kernel", "_grid", "_launch")

    def __init__(self, kernel_, grid: tuple[int, int, int]):
        self._kernel, self._grid, self._launch = kernel_, grid, kernel_._launch

    @property
    def kernel(self):
        return self._kernel

    @property
    def grid(self) -> tuple[int, int, int]:
        return self._grid

    def __call__(self, *args, **kwargs):
        try:  # (as in Kernel.__call__: this frame is the one qnb frame a user sees)
            hot = self._kernel._memo.hot
            if hot is None or kwargs or not hot(self._grid, args):
                self._launch(self._grid, args, kwargs)
        except QnbError as err:
            raise err.with_traceback(None) from None

    def specialize(self, *args, backend: str | None = None) -> Specialization:
        """What this launch with ``args`` resolves (see :class:`Specialization`)."""
        return self._kernel.specialize(*args, grid=self._grid, backend=backend)

    def __repr__(self) -> str:
        return f"<qnb launch {self._kernel.parsed.qualname}[{self._grid}]>"


class Specialization:
    """What one launch of a kernel resolves, as an object a tool can hold (``qnb.compare``,
    the trace and ``%qbench`` go through it, as a user's tool would).

    Made by ``kernel.specialize(*args, grid=..., backend=...)`` (or ``kernel[grid].
    specialize(*args)``): ``kernel``, ``grid`` (3 ints), ``backend`` (a name),
    ``signature`` (an ``ArgSpec`` per parameter, from the arguments) and ``snapshot``
    (the captured values read at that moment; the launch memo's key, compared by
    equality). The rest is computed when first asked for, and kept:

    - ``ir``: the lowered ``qnb.ir.KernelIR`` (shared: read it, do not change it);
      ``source(lang)``: its text in "ir", "cuda" or "wgsl";
    - ``compile()``: look the launch up in the kernel cache now (memory, disk, else
      compile) → its ``CacheEvent``; ``key`` (a ``CacheKey``; ``components``, its named
      components), ``event`` and ``launcher`` are that lookup's, or the kernel's launch
      memo's where it holds the launch already;
    - ``launch(args)``: run on ``backend`` (arguments of this signature, by position);
      ``trace(args)``: a ``qnb.Trace`` from the cpu interpreter; ``interpret(args,
      observer=)``: the cpu interpreter on copies of ``args``, watched by a
      ``qnb.backends.cpu.observer.Observer``; ``cost(args)``: FLOPs and bytes counted from the IR
      (``qnb.cost``);
    - ``on(backend)``, ``variant(**options)``: the same launch on another backend, or
      with other compile options (``probe=True``: ``qnb.compare``'s probe build);
    - ``locate(err)``, ``position(loc)``: an error, or an IR location of ``ir``, at the
      user's own file, line and column.

    Errors from any of these name the user's own line, as a launch's do. Captured values
    that change after ``specialize`` make the next lowering or compile raise
    ``QnbCaptureError`` (specialise again), never a launch of other values."""

    __slots__ = (
        "kernel",
        "grid",
        "backend",
        "signature",
        "snapshot",
        "_resolved",
        "_lowered",
        "_prepared",
    )

    def __init__(self, kernel_, grid, backend: str, signature: tuple, snapshot):
        self.kernel, self.grid, self.backend = kernel_, tuple(grid), backend
        self.signature, self.snapshot = signature, snapshot
        self._resolved = self._lowered = self._prepared = None

    def __repr__(self) -> str:
        described = ", ".join(spec.described() for spec in self.signature)
        name = self.kernel.parsed.qualname
        return f"<qnb.Specialization {name}[{self.grid}]({described}) on {self.backend}>"

    # ------------------------------------------------------------------ what it resolves

    @property
    def ir(self) -> ir.KernelIR:
        return self._lowering()[0]

    @property
    def key(self):
        return self._ready().key

    @property
    def components(self) -> dict:
        return self._ready().key.components

    @property
    def event(self):
        return self._ready().event

    @property
    def launcher(self):
        return self._ready().launcher

    @property
    def units(self) -> dict:
        """Unit name (the kernel's and each ``@qnb.func``'s qualname) → its parsed
        source, for placing an IR location at the user's line."""
        return self._units()

    @public
    def source(self, lang: str = "ir") -> str:
        """The generated text for "cuda", "wgsl" or "ir". Needs no device and no compiler."""
        language = LANGUAGES.get(lang)
        if language is None:
            raise QnbTypeError(f"source() renders {spoken()}, not {lang!r}")
        kernel_ir = self.ir
        if language.backend is None:
            return ir.format_kernel(kernel_ir)
        try:
            return _backends.get(language.backend).render(kernel_ir, self.kernel._options)
        except QnbError as err:
            raise self.locate(err) from None

    @public
    def compile(self):
        """Look this launch up in the kernel cache now (load, or compile); the event."""
        kernel_ = self.kernel
        self._prepared = kernel_._prepare(
            self.backend, self.snapshot, self.signature, self._resolution()
        )
        return self._prepared.event

    # ------------------------------------------------------------------ running it

    @public
    def launch(self, args, extra=()) -> None:
        """Run on ``backend`` with ``args`` (of this signature, by position). ``extra``:
        the hidden parameters a variant's build adds after the kernel's own (a probe
        build's buffer and program index)."""
        runtime = self._runtime_args(args)
        prepared = self._ready()
        try:
            prepared.launcher(self.grid, [*runtime, *extra])
        except QnbError as err:
            raise self.kernel._locate(err, prepared.units) from None

    @public
    def trace(self, args, programs: range | None = None, max_steps: int | None = None):
        """A ``qnb.Trace`` of the launch with ``args`` on the cpu interpreter (whatever
        ``backend``); ``programs``: only those (flat indices), as if run alone; with
        ``max_steps``, the run stops where a program has recorded that many steps."""
        from qnb.backends.cpu import backend as cpu_backend

        runtime = self._runtime_args(args)
        kernel_ir, units = self._lowering()
        parsed = self.kernel.parsed
        try:
            return cpu_backend.trace(
                kernel_ir, self.grid, runtime, parsed, units, programs, max_steps
            )
        except QnbError as err:
            raise self.locate(err) from None

    @public
    def arguments(self, args) -> list:
        """The runtime values of ``args`` in ``ir``'s parameter order, as a tool running
        ``ir`` itself passes them (refused unless ``args`` have this signature)."""
        return self._runtime_args(args)

    @public
    def interpret(self, args, observer=None) -> list:
        """Run the cpu interpreter (whatever ``backend``) on copies of ``args`` (one array
        passed twice stays one array), ``observer`` (a ``qnb.backends.cpu.observer.Observer``)
        watching; returns the copies as the launch left them."""
        from qnb.backends.cpu import interpreter

        made: dict = {}
        copies = [_copy_once(value, made) for value in args]
        runtime = self._runtime_args(copies)
        try:
            interpreter.run(self.ir, self.grid, runtime, observer=observer)
        except QnbError as err:
            raise self.locate(err) from None
        return copies

    @public
    def cost(self, args):
        """FLOPs and bytes of the launch with ``args``, counted from ``ir`` per op
        (``qnb.cost.count``: its rules, and where a count is unknown)."""
        from qnb import cost

        runtime = self._runtime_args(args)
        return cost.count(self.ir, self.grid, runtime, self.position)

    def on(self, backend: str) -> Specialization:
        """The same launch on ``backend`` (its lowering shared)."""
        _backends.check_name(backend)
        other = Specialization(self.kernel, self.grid, backend, self.signature, self.snapshot)
        other._resolved, other._lowered = self._resolved, self._lowered
        return other

    @public
    def variant(self, **options) -> Specialization:
        """The same launch with other compile options (see ``Kernel.variant``)."""
        kernel_ = self.kernel.variant(**options)
        other = Specialization(kernel_, self.grid, self.backend, self.signature, self.snapshot)
        other._resolved, other._lowered = self._resolved, self._lowered
        return other

    # ------------------------------------------------------------------ the user's lines

    def locate(self, err: QnbError) -> QnbError:
        """``err`` (raised at an IR location, or naming a parameter) at the user's own
        file, line and column; an error placed already is left as it is."""
        if err.lineno is not None:
            return err
        ir_units = self.ir.units if err.ir_loc is not None and err.ir_unit is None else ()
        return self.kernel._locate(err, self._units(), ir_units)

    def position(self, loc: ir.Loc) -> tuple[str, int, int]:
        """(filename, line, column) in the user's source of ``loc``, an IR location of
        ``ir`` (its unit an index into ``ir.units``)."""
        unit = self.ir.units[loc.unit].qualname
        return user_position(self._units()[unit], loc)

    # ------------------------------------------------------------------ internals

    def _resolution(self):
        """The captured values, read once (``Kernel._resolve``): those of ``snapshot``."""
        if self._resolved is None:
            kernel_ = self.kernel
            resolved = kernel_._resolve()
            if kernel_.captures.keyed_snapshot(resolved.items_of) != self.snapshot:
                parsed = kernel_.parsed
                message = (
                    f"a value kernel {kernel_.name!r} captures changed since this "
                    "specialisation was made: specialise again (kernel.specialize(...))"
                )
                raise parsed.error(QnbCaptureError, message, parsed.tree)
            self._resolved = resolved
        return self._resolved

    def _lowering(self) -> tuple[ir.KernelIR, dict]:
        if self._lowered is None:
            self._lowered = self.kernel._lowered_for(
                self.signature, self.snapshot, self._resolution()
            )
        return self._lowered

    def _ready(self):
        """The prepared launch: the memo's, else a cache lookup now."""
        if self._prepared is None:
            found = self.kernel._memo_hit(self.backend, self.snapshot, self.signature)
            if found is None:
                self.compile()
            else:
                self._prepared = found
        return self._prepared

    def _units(self) -> dict:
        """Unit name → ParsedFunction, for placing errors."""
        if self._prepared is not None:
            return self._prepared.units
        if self._lowered is not None:
            return self._lowered[1]
        return self._resolution().parsed_units

    def _runtime_args(self, args) -> list:
        """The runtime values of ``args``, refused unless they have this signature."""
        kernel_ = self.kernel
        args = tuple(args)
        signature = kernel_._fast_signature(args)
        if signature is not None:
            runtime = list(args)
        else:
            signature, runtime = kernel_._signature(args)
        if signature != self.signature:
            parsed = kernel_.parsed
            given = ", ".join(spec.described() for spec in signature)
            mine = ", ".join(spec.described() for spec in self.signature)
            message = (
                f"these arguments ({given}) do not fit this specialisation of kernel "
                f"{kernel_.name!r} ({mine}): specialise again for them"
            )
            raise parsed.error(QnbTypeError, message, parsed.tree)
        return runtime


def user_position(parsed: ParsedFunction, loc: ir.Loc) -> tuple[str, int, int]:
    """An IR location (relative to its unit's ``def`` line) in the user's own source."""
    return parsed.filename, parsed.firstlineno + loc.line - 1, loc.col + parsed.indent


def _copy_once(value, made: dict):
    """A NumPy array copied (once per array: ``made`` holds the copies by id), else as is."""
    if not isinstance(value, np.ndarray):
        return value
    if id(value) not in made:
        made[id(value)] = np.array(value, copy=True)  # (its layout kept)
    return made[id(value)]


__all__ = ["Launch", "Specialization"]
