"""Kernels and funcs: specialisation, the cache key, and the launch path.

``k[grid](*args)`` does, in order: read the captured names (a snapshot tuple),
derive the argument signature, and look both up in the kernel's launch memo. A hit
(nothing changed since an earlier launch) costs microseconds and goes straight to
the compiled launcher. A miss builds the full :class:`~qnb.cache.CacheKey` from its
named components and asks the kernel cache, which loads or compiles.
"""

from __future__ import annotations

import functools
import hashlib
import pathlib
import sys
import time
import types

import numpy as np

from qnb import ir
from qnb.backends import registry as _backends
from qnb.backends.base import FAST_ARRAY_TYPES, ONE_PROGRAM, Options
from qnb.errors import (
    QnbCaptureError,
    QnbError,
    QnbIndexError,
    QnbSyntaxError,
    QnbTypeError,
    caller_place,
    public,
)
from qnb.frontend import reads as _reads
from qnb.frontend.capture import (
    CaptureKind,
    Captures,
    chain_node,
    classify,
    intrinsic_name,
)
from qnb.frontend.checks import add_bounds_checks
from qnb.frontend.checks import table_from_json as checks_table_from_json
from qnb.frontend.checks import table_to_json as checks_table_to_json
from qnb.frontend.lower import ParamSpec, lower_kernel
from qnb.frontend.parse import ParsedFunction, parse_function
from qnb.frontend.reads import Recorder
from qnb.frontend.semantics import unsupported_call_message
from qnb.function import QnbFunction
from qnb.signature import Parameters, _param_node
from qnb.specialization import Launch, Specialization, user_position

CACHE_SCHEMA = 3  # 3: GPU artifacts say how many programs a workgroup/block runs


def _version() -> str:
    try:
        from qnb._version import __version__
    except ImportError:  # a source tree without the generated version module
        return "0.1.0"
    return __version__


# The modules whose code decides what a kernel compiles to (the notebook layer, the widgets,
# the CLI and the cache's own bookkeeping do not).
_COMPILER_PARTS = (
    "frontend",
    "backends",
    "dtypes.py",
    "errors.py",
    "function.py",
    "ir.py",
    "kernel.py",
    "language.py",
    "signature.py",
)


@functools.lru_cache(maxsize=1)
def _compiler_digest() -> str:
    """sha256 of qnb's compiler source, so that an edited qnb (an editable install, a patched
    release) never reuses kernels the old code compiled. Read once per process (~1 ms)."""
    root = pathlib.Path(__file__).resolve().parent
    digest = hashlib.sha256()
    for part in _COMPILER_PARTS:
        path = root / part
        for file in sorted(path.rglob("*.py")) if path.is_dir() else [path]:
            digest.update(file.relative_to(root).as_posix().encode() + b"\0")
            digest.update(file.read_bytes())
    return digest.hexdigest()[:16]


class Func(QnbFunction):
    """A ``@qnb.func`` helper: inlined into the kernels that call it.

    Arguments behave as in Python: a Tile16/Vec16 variable passed in is the caller's tile,
    so in-place ops on the parameter (``t.load_``, ``t.eye_()``, ``t[i, j] = s``,
    ``t += u``) change it, as on a NumPy array; assigning the parameter (``t = t + 1``)
    makes a value of the func's own and leaves the caller's tile alone. Numbers are copied.
    """

    @public
    def __init__(self, fn):
        self.parsed: ParsedFunction = parse_function(fn)
        self.captures = Captures(self.parsed)
        functools.update_wrapper(self, fn)

    def __call__(self, *args, **kwargs):
        raise RuntimeError(f"@qnb.func {self.__name__!r} can only be called from inside a kernel")

    def __repr__(self) -> str:
        return f"<qnb.func {self.parsed.qualname}>"


@public
def func(fn) -> Func:
    """Decorate a helper that kernels call; it is inlined and enters their cache key."""
    return Func(fn)


class _Resolved:
    """A launch's view of the functions a kernel reaches: each one's unit name, source and
    captured roots, and the captured constants (the ``captured`` key component).

    Every captured name is read once (``Captures.read``): the key, the launch memo's
    snapshot and the lowering all use that one read, so a compile uses exactly the values
    its key holds however another thread rebinds them meanwhile."""

    def __init__(self):
        self.captured: dict[str, object] = {}
        self.sources: dict[str, str] = {}
        self.parsed_units: dict[str, ParsedFunction] = {}
        self.roots: dict[str, dict] = {}
        self.names: dict[int, str] = {}  # id(parsed) -> unit name; this launch only, no key
        self.items: dict[int, list] = {}  # id(parsed) -> its Captures.read() items
        self.forms: dict[int, dict] = {}  # id(parsed) -> chain -> what the key holds for it
        # (id(object), attribute) -> value, for every attribute a captured chain's walk read.
        self.covered: dict[tuple[int, str], object] = {}
        self._keep: list = []  # the objects of ``covered``, so their ids stay theirs
        self.root_forms: dict[str, dict] = {}  # unit -> root name -> its form, keyed whole

    def add(self, parsed: ParsedFunction, roots: dict) -> str:
        name, count = parsed.unit_name, 1
        while name in self.parsed_units:
            count += 1
            name = f"{parsed.unit_name}#{count}"
        self.names[id(parsed)] = name
        self.parsed_units[name] = parsed
        self.sources[name] = parsed.source
        self.roots[name] = roots
        return name

    def visit(self, parsed: ParsedFunction, captures: Captures, is_kernel: bool) -> None:
        """Classify one function's captured values (and the funcs it captures, in turn)."""
        if id(parsed) in self.names:
            return
        roots, items = captures.read()
        unit = self.add(parsed, roots)
        self.items[id(parsed)] = items
        forms = self.forms[id(parsed)] = {}
        prefix = "" if is_kernel else f"{unit}."
        keyed = self.root_forms[unit] = {}  # root name -> its own form, where keyed whole
        for item in items:
            chain, value = item.chain, item.value
            for base, attr, found in item.steps:
                self.covered[(id(base), attr)] = found
                self._keep.append(base)
            try:
                classified = classify(parsed, item.walked, value)
            except QnbCaptureError as err:
                where = parsed.position(chain_node(parsed, chain))
                static_only = chain in parsed.static_chains
                if _is_library_callable(value) and not static_only:  # print, math.sin
                    message = unsupported_call_message(".".join(chain))
                    raise QnbSyntaxError(message, *where) from None  # not a capture
                raise err.with_location(*where) from None
            kind = classified.kind
            if kind is CaptureKind.CONST and _is_qnb_module(roots.get(chain[0])):
                continue  # qnb.f32 and friends: the language itself (the `qnb` component)
            form = None
            if kind is CaptureKind.CONST or kind is CaptureKind.OBJECT:
                form = classified.form
                chain = item.walked  # (keyed by what the walk read: ``cfg.scale``)
                if not item.steps and kind is CaptureKind.CONST:
                    keyed[chain[0]] = form  # lowering computes with its decoded value
            elif (
                kind is CaptureKind.INTRINSIC
                and len(chain) == 1
                and getattr(value, "__name__", None) != chain[0]
            ):  # a plain name bound to an intrinsic (OP = max): the key says which one
                form = ["intrinsic", intrinsic_name(value)]
            elif kind is CaptureKind.INTRINSIC and _names_another_shape(chain, value, roots):
                # T.load with T = qnb.Tile[8, 32]: rebinding T to another shape must
                # change the key (the tag names the shape: "Tile[8, 32].load")
                form = ["intrinsic", intrinsic_name(value)]
            elif kind is CaptureKind.CALLABLE:
                self.visit(value.parsed, value.captures, False)
            elif kind is CaptureKind.NAMESPACE and not _is_qnb_module(value):
                # Which module: lowering reads its attributes by name (reads.Recorder), so
                # a name bound to another module must not meet the first one's entries.
                form = ["module", value.__name__]
            elif kind is CaptureKind.UNDEFINED:
                form = ["undefined"]
            if form is not None:
                self.captured[prefix + ".".join(chain)] = form
                forms[item.chain] = form

    def items_of(self, parsed: ParsedFunction) -> list:
        return self.items[id(parsed)]

    def fingerprint(self, func) -> str:
        """A func reached through a compile-time value (``m.h``): the digest of its source
        and what it captures, transitively, from this launch's one read of them (a func
        met first here is read now, and lowered from that read)."""
        self.visit(func.parsed, func.captures, False)
        form = self._tree_form(func.parsed, set())
        return hashlib.sha256(_cache().canonical_json(form).encode()).hexdigest()[:32]

    def _tree_form(self, parsed: ParsedFunction, seen: set) -> list:
        if id(parsed) in seen:
            return ["recursive", parsed.qualname]
        seen.add(id(parsed))
        forms, parts = self.forms[id(parsed)], []
        for item in self.items[id(parsed)]:
            name, value = ".".join(item.chain), item.value
            if isinstance(value, QnbFunction) and id(value.parsed) in self.items:
                parts.append([name, self._tree_form(value.parsed, seen)])
            else:
                parts.append([name, forms.get(item.chain)])
        return [parsed.source, parts]

    def recorder(self) -> Recorder:
        """The one way this launch's lowering reads attributes of compile-time values."""
        return Recorder(self.covered, self.roots, self.fingerprint, self.root_forms, self.unit_of)

    def unit_of(self, parsed: ParsedFunction) -> tuple[str, dict]:
        """(unit name, captured roots) of a function the lowering meets."""
        name = self.names.get(id(parsed))
        if name is None:  # reached through a compile-time value, not a captured name
            name = self.add(parsed, Captures(parsed).roots())
        return name, self.roots[name]


def _evaluator(resolved: _Resolved):
    """``evaluate(reads)`` for ``get_or_compile_reading``: the recorded reads' forms now
    (``reads.evaluate``), from this launch's one read of the captured names."""
    return lambda reads: _reads.evaluate(reads, resolved.roots, resolved.fingerprint)


def _fresh_fingerprint(func) -> str:
    """A func's fingerprint from a fresh read (the launch memo's re-check of a reached func)."""
    return _Resolved().fingerprint(func)


_reads._FINGERPRINTS.append(_fresh_fingerprint)


class _Prepared:
    """What a launch needs once the memo hits: the launcher, the key, the source units
    (to place runtime errors), and the cache event that produced it."""

    __slots__ = ("checks", "event", "key", "launcher", "units")

    def __init__(self, launcher, key, units, event, checks=()):
        self.launcher, self.key, self.units, self.event = launcher, key, units, event
        # (object, attribute, form) read past the captured names: re-checked at each hit.
        self.checks = checks


class Kernel(QnbFunction):
    """A tile kernel. Launch with ``k[grid](*args)``; ``k(*args)`` is ``k[1](*args)``."""

    decorator = "@qnb.kernel"

    @public
    def __init__(
        self,
        fn,
        backend: str | None = None,
        options: Options | None = None,
        no_cache: bool = False,
    ):
        self.parsed = parsed = parse_function(fn)
        if backend is not None:
            try:
                _backends.check_name(backend)
            except QnbError as err:
                raise err.with_location(*parsed.position(parsed.tree)) from None
            if backend != "auto":  # launched there soon: wgpu starts making its device now
                _backends._start_early(_backends.get(backend))
        self.captures = Captures(parsed)
        self._fn = fn
        self._backend = backend
        self._options = options or Options()
        self._parameters = parameters = Parameters(parsed, getattr(fn, "__annotations__", {}) or {})
        # The launch path's argument checks, called as the kernel's own (compare and the
        # trace launcher use them too).
        self._positional = parameters._positional
        self._fast_signature = parameters._fast_signature
        self._signature = parameters._signature
        self._example_args = parameters._example_args
        self._memo = _LaunchMemo()
        self._memo_generation = 0
        self._grids: dict = {}
        self._no_cache = bool(no_cache)
        # (snapshot, signature) -> (KernelIR, parsed units, checks): Specialization.ir
        self._lowered: dict = {}
        functools.update_wrapper(self, fn)

    # ------------------------------------------------------------------ public

    @property
    def name(self) -> str:
        return self.parsed.name

    @property
    def filename(self) -> str:
        return self.parsed.filename

    @property
    def firstlineno(self) -> int:
        return self.parsed.firstlineno

    @property
    def param_names(self) -> list[str]:
        return list(self.parsed.param_names)

    @property
    def backend(self) -> str | None:
        """The backend this kernel always launches on, or None to follow ``qnb.set_backend``."""
        return self._backend

    @backend.setter
    @public
    def backend(self, name: str | None) -> None:
        if name is not None and name != "auto":
            _backends._start_early(_backends.get(name))  # unknown names raise BackendError
        self._backend = None if name == "auto" else name

    @property
    def no_cache(self) -> bool:
        """True when this kernel takes nothing from the kernel cache: each specialisation
        it launches compiles anew the first time (its entry then replaces the cached one,
        and this kernel's launch memo serves the later launches). ``%%qkernel
        --no-cache`` sets it on the cell's kernels; other kernels are untouched."""
        return self._no_cache

    @no_cache.setter
    def no_cache(self, value: bool) -> None:
        self._no_cache = bool(value)
        self._memo.clear()  # what it served came from the cache

    @property
    def is_fully_annotated(self) -> bool:
        """True when every parameter's type is known without example arguments."""
        return self._parameters.is_fully_annotated

    def __repr__(self) -> str:
        return f"<qnb.kernel {self.parsed.qualname}>"

    def __getitem__(self, grid) -> Launch:
        # (only grids of exact ints are memoised: (4, 2.0) == (4, 2), and must still raise)
        if type(grid) is int or (type(grid) is tuple and all(type(v) is int for v in grid)):
            launch = self._grids.get(grid)
        else:
            launch = None
        if launch is None:
            try:
                grid3 = self._grid(grid)
            except QnbError as err:  # (no @public here: this runs at every launch)
                raise err.with_traceback(None) from None
            launch = Launch(self, grid3)
            if len(self._grids) < 64:
                self._grids[grid] = launch
        return launch

    def __call__(self, *args, **kwargs):
        # As @public does, without its extra call on the launch fast path (``_launch``
        # raises with the compiler's frames dropped; this drops its own). The last hit's
        # launch is tried first, here, a call nearer the user (see ``_hot_launch``).
        try:
            hot = self._memo.hot
            if hot is None or kwargs or not hot(_ONE_PROGRAM, args):
                self._launch(_ONE_PROGRAM, args, kwargs)
        except QnbError as err:
            raise err.with_traceback(None) from None

    @property
    def trace(self):
        """``kernel.trace[grid](*args)`` runs on the cpu backend and returns a ``qnb.Trace``."""
        return _TraceLauncher(self)

    @public
    def source(self, lang: str = "ir", *args) -> str:
        """The generated text for "cuda", "wgsl" or "ir" (args only where parameters are not
        fully annotated). Needs no device and no compiler."""
        return self.specialize(*args).source(lang)

    @public
    def compile(self, *args, backend: str | None = None):
        """Compile (or load) now for ``backend``; returns the cache event. Example args are
        needed only where parameters are not fully annotated."""
        return self.specialize(*args, backend=backend).compile()

    @public
    def specialize(self, *args, grid=1, backend: str | None = None) -> Specialization:
        """What a launch ``k[grid](*args)`` on ``backend`` resolves (see
        :class:`Specialization`): for tools built on a kernel. Arguments by position;
        example arguments only where parameters are not fully annotated. ``backend``:
        default the kernel's own, else the current one (``qnb.set_backend``)."""
        grid3 = self._grid(grid)
        name = backend or self._backend
        if name is None or name == "auto":
            name = _current_backend()
        else:
            try:
                _backends.check_name(name)
            except QnbError as err:
                raise err.with_location(*self.parsed.position(self.parsed.tree)) from None
        examples = self._example_args(args)
        signature = self._fast_signature(examples) or self._signature(examples)[0]
        return Specialization(self, grid3, name, signature, self.captures.snapshot())

    @public
    def variant(self, **options) -> Kernel:
        """This kernel with other compile options (``debug``, ``fast_math``, ``threads``;
        ``probe=True`` is ``qnb.compare``'s probe build): the same function, with a launch
        memo and cache entries of its own (``options`` enters the key)."""
        import copy
        import dataclasses

        try:
            wanted = dataclasses.replace(self._options, **options)
        except TypeError:
            known = ", ".join(f.name for f in dataclasses.fields(Options))
            message = f"a kernel's compile options are {known}; not {', '.join(options)}"
            raise QnbTypeError(message) from None
        variants = self.__dict__.setdefault("_variants", {})
        found = variants.get(wanted)
        if found is None:
            found = variants[wanted] = copy.copy(self)
            found._options, found._memo, found._grids = wanted, _LaunchMemo(), {}
            found.__dict__.pop("_variants", None)  # (its lowered IR is shared: options do
            # not change the IR, only what a backend makes of it)
        return found

    # ------------------------------------------------------------------ launch path

    def _launch(self, grid, args: tuple, kwargs: dict):
        # As @public does, without its extra call on the launch fast path. (The arguments
        # come as a tuple and a dict, not re-packed: ``k(d)`` builds each once.)
        try:
            memo = self._memo
            if kwargs:  # (the call tried the hot launch only where it had no keywords)
                args = self._positional(args, kwargs)
                hot = memo.hot
                if hot is not None and hot(grid, args):
                    return
            started = _clock()
            backend_name = self._backend or _current_backend()
            signature = self._fast_signature(args)
            if signature is None:
                signature, runtime_args = self._signature(args)
            else:
                runtime_args = args  # (a launcher reads its arguments, never changes them)
            cache = _CACHE_MODULE[0] if _CACHE_MODULE else _cache()
            if self._memo_generation != cache.generation[0]:
                memo.clear()  # qnb.cache.clear() ran: the next launch must look again
                self._memo_generation = cache.generation[0]
            captures = self.captures
            snapshot = captures.snapshot()
            prepared = None
            if not cache.always_compile():  # QNB_ALWAYS_COMPILE=1: every launch compiles
                prepared = memo.get((backend_name, snapshot, signature))
            if prepared is not None and prepared.checks and not _reads.recheck(prepared.checks):
                prepared = memo.hot = None  # a value lowering read past the names changed
            if prepared is None:
                prepared = self._prepare(backend_name, snapshot, signature)
            else:
                roots = captures.plain_roots()
                if roots is not None and captures.snapshot_of(roots) == snapshot:
                    # the names bound to the objects of this hit: the next launch to
                    # find them so needs neither the snapshot nor the lookup
                    same = captures.roots_check(roots)
                    memo.hot = _hot_launch(self, backend_name, signature, same, prepared)
                cache.record_memory_hit(
                    self.parsed.name, backend_name, prepared.key, _clock() - started
                )
            try:
                prepared.launcher(grid, runtime_args)
            except QnbError as err:
                raise self._locate(err, prepared.units) from None
        except QnbError as err:
            raise err.with_traceback(None) from None

    def _grid(self, grid) -> tuple[int, int, int]:
        """The launch grid as 3 ints; a bad one is reported at the kernel's ``def`` line."""
        try:
            return _grid(grid)
        except QnbTypeError as err:
            raise err.with_location(*self.parsed.position(self.parsed.tree)) from None

    # ------------------------------------------------------------------ specialisation

    def _resolve(self) -> _Resolved:
        """Classify every captured value (kernel and funcs, transitively).

        Each function object is its own unit, named ``module:qualname``: two funcs made by
        one factory share that name but not their captured values, so the second one met
        is ``module:qualname#2`` (met in the order of the captured names, the same in
        every process). A func's captured names enter the key under its unit name."""
        resolved = _Resolved()
        resolved.visit(self.parsed, self.captures, True)
        return resolved

    def _param_specs(self, signature) -> list[ParamSpec]:
        specs = []
        for name, spec in zip(self.parsed.param_names, signature):
            if spec.kind == "template":
                specs.append(ParamSpec(name, "template", value=spec.value))
            elif spec.kind == "array":
                specs.append(ParamSpec(name, "array", ir.Type("array", spec.dtype, spec.ndim)))
            else:
                specs.append(ParamSpec(name, "scalar", ir.scalar(spec.dtype)))
        return specs

    def _key_components(self, backend, signature, captured, sources) -> dict:
        backend_component, compiler_component = _backend_components(backend)
        names = self.parsed.param_names
        described = {name: spec.described() for name, spec in zip(names, signature)}
        return {
            "qnb": {"version": _version(), "schema": CACHE_SCHEMA, "code": _compiler_digest()},
            "source": sources,
            "captured": captured,
            "signature": described,
            "backend": backend_component,
            "compiler": compiler_component,
            "options": self._options.as_component(),
        }

    def _lower(self, signature, resolved: _Resolved, reads: Recorder | None = None) -> ir.KernelIR:
        reads = reads if reads is not None else resolved.recorder()
        try:
            return lower_kernel(self.parsed, reads.unit_of, self._param_specs(signature), reads)
        except RecursionError:
            message = f"kernel {self.name!r} is nested too deeply to compile"
            raise self.parsed.error(QnbTypeError, message, self.parsed.tree) from None

    def _lower_for(self, args):
        specialization = self.specialize(*args)
        return specialization.ir, specialization._units()

    def _lowered_for(self, signature, snapshot, resolved: _Resolved):
        """(IR, parsed units) of ``signature`` under the captured values ``snapshot`` (read
        as ``resolved``), remembered while what lowering read past the names is unchanged:
        the tools (compare, trace, bench) ask for one launch's IR again and again."""
        found = self._lowered.get((snapshot, signature))
        if found is not None and (not found[2] or _reads.recheck(found[2])):
            return found[0], found[1]
        recorder = resolved.recorder()
        kernel_ir = self._lower(signature, resolved, recorder)
        if len(self._lowered) >= 64:
            self._lowered.clear()
        self._lowered[(snapshot, signature)] = (kernel_ir, resolved.parsed_units, recorder.checks)
        return kernel_ir, resolved.parsed_units

    def _memo_hit(self, backend_name, snapshot, signature) -> _Prepared | None:
        """The launch memo's entry, where it still serves (the cache not cleared since, and
        nothing lowering read past the captured names changed)."""
        if self._memo_generation != _cache().generation[0]:
            return None
        prepared = self._memo.get((backend_name, snapshot, signature))
        if prepared is not None and prepared.checks and not _reads.recheck(prepared.checks):
            return None
        return prepared

    def _prepare(self, backend_name, snapshot, signature, resolved=None) -> _Prepared:
        from qnb import cache

        try:
            backend = _backends.require(backend_name)
        except QnbError as err:  # unknown or unavailable here: shown at the kernel's def
            raise err.with_location(*self.parsed.position(self.parsed.tree)) from None
        resolved = resolved if resolved is not None else self._resolve()
        parsed_units = resolved.parsed_units
        components = self._key_components(backend, signature, resolved.captured, resolved.sources)
        key = cache.CacheKey(components)

        # Debug mode on a GPU: bounds checks become IR (the cpu backend checks as it runs);
        # the artifact holds their table, for the launcher to raise the one that failed.
        debug_checks = self._options.debug and backend_name != "cpu"
        recorders = []

        def compile_now():
            recorder = resolved.recorder()
            recorders.append(recorder)
            kernel_ir = self._lower(signature, resolved, recorder)
            # qnb.compare's probe build: its parameters come before the error word, which
            # the debug launcher passes last
            if self._options.probe and backend_name != "cpu":
                from qnb.backends.probe import add_probe

                kernel_ir = add_probe(kernel_ir)
            if debug_checks:
                kernel_ir, table = add_bounds_checks(kernel_ir)
            try:
                artifact = backend.compile(kernel_ir, self._options)
            except QnbError as err:
                raise self._locate(err, parsed_units, kernel_ir.units) from None
            if debug_checks:
                artifact.text[DEBUG_CHECKS] = checks_table_to_json(table)
            return artifact, recorder.reads

        load = backend.load
        if debug_checks:

            def load(artifact):
                table = checks_table_from_json(artifact.text[DEBUG_CHECKS])
                return _checked(backend.load(artifact), table)

        launcher, event, key, checks = cache.get_or_compile_reading(
            self.name,
            backend_name,
            key,
            compile_now,
            load,
            _evaluator(resolved),
            origin=f"{self.filename}:{self.firstlineno}",
            force=NO_CACHE_REASON if self._no_cache else None,
        )
        if checks is None:  # compiled now: re-check what this compile read
            checks = recorders[0].checks
        prepared = _Prepared(launcher, key, parsed_units, event, tuple(checks))
        if len(self._memo) > 256:  # a kernel relaunched with ever-new captured values
            self._memo.clear()
        # Under the values this launch keyed and compiled from (the snapshot taken before
        # may differ: another thread can rebind a captured name meanwhile).
        keyed = self.captures.keyed_snapshot(resolved.items_of)
        memo_key = (backend_name, keyed, signature)
        self._memo[memo_key] = prepared
        cache.hold(key.digest, self._memo, memo_key)  # dropped with the launcher
        return prepared

    def _locate(self, err: QnbError, parsed_units: dict, ir_units=()) -> QnbError:
        """Give an error raised at an IR location the user's own file and line (one with
        no IR location: the parameter it names in ``param``, else the ``def`` line).

        The unit is the error's ``ir_unit`` (runtime errors carry it) or, at compile time,
        the IR's unit list entry its ``ir_loc`` names."""
        if err.lineno is not None:
            return err
        loc = err.ir_loc
        if loc is None:  # a launcher refused an argument: its parameter, else the def line
            parsed = self.parsed
            name = err.param
            node = _param_node(parsed, name) if name in parsed.param_names else parsed.tree
            return err.with_location(*parsed.position(node))
        unit_name = err.ir_unit
        if unit_name is None and loc.unit < len(ir_units):
            unit_name = ir_units[loc.unit].qualname
        parsed = parsed_units.get(unit_name)
        if parsed is not None:
            err.with_location(*user_position(parsed, loc))
        return err


@public
def kernel(
    fn=None,
    *,
    backend: str | None = None,
    debug: bool = False,
    fast_math: bool = False,
    threads: int | None = None,
    no_cache: bool = False,
):
    """Decorate a tile kernel: ``@qnb.kernel`` or ``@qnb.kernel(backend="wgpu", debug=True)``.

    Decoration parses the function (an unsupported construct raises ``QnbSyntaxError``
    at its line); it is compiled for a backend at its first launch with new argument
    types (or captured values), and the result is cached (see ``qnb.cache``).

    - ``k[grid](*args)`` launches it over ``grid`` (an int or a tuple of up to 3 ints) of
      programs; ``k(*args)`` is ``k[1](*args)``. Arguments may be passed by name.
    - ``k.source("cuda" | "wgsl" | "ir", *example_args)``: the generated text, on any
      machine (arguments only where parameters are not fully annotated).
    - ``k.trace[grid](*args)``: a ``qnb.Trace`` of every op of every program (cpu).
    - ``k.compile(*args, backend=...)``: compile without launching; the cache event.
    - ``k.specialize(*args, grid=..., backend=...)``: what that launch resolves (its
      signature, cache key, IR, launcher), a ``qnb.Specialization``, for tools.

    ``backend``: this kernel's backend, whatever ``qnb.set_backend`` says. ``debug``: the
    cpu backend's bounds checks on the GPU backends too. ``fast_math``: let NVRTC trade
    IEEE accuracy for speed (``--use_fast_math``; cuda only). ``threads``: the threads of
    one program on the GPU backends (a power of two up to 256; by default chosen from the
    kernel's tile shapes), for tuning. ``no_cache``: take nothing from the kernel cache
    (each specialisation compiles anew on its first launch; see ``Kernel.no_cache``)."""
    options = Options(debug=debug, fast_math=fast_math, threads=threads)

    @public
    def wrap(f):
        return Kernel(f, backend=backend, options=options, no_cache=no_cache)

    return wrap(fn) if fn is not None else wrap


NO_CACHE_REASON = "the kernel's no_cache option forces a compile"


# ---------------------------------------------------------------------- helpers


FAST_ARRAY_TYPES.add(np.ndarray)


class _LaunchMemo(dict):
    """A kernel's launch memo: (backend, snapshot, signature) → _Prepared. The memory
    level holds it by a weak reference and drops the entries of launchers it evicts.

    ``hot`` is the last hit's launch again (``_hot_launch``), where the snapshot depends
    only on which objects the captured names are bound to (``Captures.plain_roots``;
    ``Captures.roots_check`` tells whether they still are): a launch finding the same
    objects needs neither the snapshot nor the lookup. Dropping any entry drops it too,
    so it never outlives its launcher."""

    __slots__ = ("__weakref__", "hot")

    def __init__(self):
        super().__init__()
        self.hot = None

    def pop(self, key, *default):
        self.hot = None
        return super().pop(key, *default)

    def clear(self):
        self.hot = None
        super().clear()


def _hot_launch(kernel: Kernel, backend_name: str, signature: tuple, same, prepared):
    """``hot(grid, args) -> bool``: the launch of a memo hit again, for as long as
    nothing its lookup read has changed: the backend chosen, the arguments' signature,
    the captured names' objects (``same``), the cache's generation and
    ``QNB_ALWAYS_COMPILE``, and the values lowering read past the names
    (``prepared.checks``). False, having done nothing, where one has: the full launch
    (``Kernel._launch``) then decides. What the lookup would fetch is fetched once, here."""
    cache = _cache()
    generation, expected = cache.generation, cache.generation[0]
    always_compile, record = cache.always_compile, cache.record_memory_hit
    fast_signature, full_signature = kernel._fast_signature, kernel._signature
    current = _current_backend
    checks, recheck = prepared.checks, _reads.recheck
    launcher, key, name = prepared.launcher, prepared.key, kernel.parsed.name
    memo = kernel._memo

    def hot(grid, args) -> bool:
        started = _clock()
        found = fast_signature(args)
        if found is None:
            found, args = full_signature(args)  # (raises what the launch would raise)
        if (
            (kernel._backend or current()) != backend_name
            or (found is not signature and found != signature)
            or generation[0] != expected
            or always_compile()
            or not same()
        ):
            return False
        if checks and not recheck(checks):
            memo.hot = None  # a value lowering read past the names changed
            return False
        record(name, backend_name, key, _clock() - started)
        try:
            launcher(grid, args)
        except QnbError as err:
            raise kernel._locate(err, prepared.units) from None
        return True

    return hot


def _grid(grid) -> tuple[int, int, int]:
    values = grid if isinstance(grid, tuple) else (grid,)
    if not 1 <= len(values) <= 3 or not all(isinstance(v, int | np.integer) for v in values):
        raise QnbTypeError(
            f"a launch grid is an int or a tuple of up to 3 ints, got {grid!r}", *caller_place()
        )
    values = tuple(int(v) for v in values) + (1,) * (3 - len(values))
    if any(v < 1 for v in values):
        raise QnbTypeError(
            f"every grid dimension must be at least 1, got {grid!r}", *caller_place()
        )
    if any(v >= 2**31 for v in values):  # program ids are i32 in every backend
        raise QnbTypeError(
            f"every grid dimension must be below 2**31, got {grid!r}", *caller_place()
        )
    return values


_ONE_PROGRAM = ONE_PROGRAM
_clock = time.perf_counter
_current_backend = _backends.current_name

_COMPONENTS_CACHE: dict[str, tuple[dict, dict]] = {}
_CACHE_MODULE = []


def _cache():
    """qnb.cache, imported on first use (``import qnb`` stays light)."""
    if not _CACHE_MODULE:
        from qnb import cache

        _CACHE_MODULE.append(cache)
    return _CACHE_MODULE[0]


def _backend_components(backend) -> tuple[dict, dict]:
    found = _COMPONENTS_CACHE.get(backend.name)
    if found is None:
        found = _COMPONENTS_CACHE[backend.name] = backend.key_components()
    return found


def _names_another_shape(chain, value, roots) -> bool:
    """Whether ``chain`` reaches a tile/vec type or constructor under a name other than
    its own (``T.load`` for ``Tile[8, 32].load``; not ``Tile16.load`` or ``qnb.Tile32``)."""
    if getattr(value, "_qnb_kind", None) is None or _is_qnb_module(roots.get(chain[0])):
        return False
    name, spelled = intrinsic_name(value), ".".join(chain)
    return spelled != name and not spelled.startswith(name + ".")  # Tile16 / Tile16.ones


def _is_qnb_module(value) -> bool:
    name = getattr(value, "__name__", "") if isinstance(value, types.ModuleType) else ""
    return name == "qnb" or name.startswith("qnb.")


DEBUG_CHECKS = "debug_checks"  # the artifact's text field that holds a debug build's checks


def _checked(launcher, table):
    """Wrap a debug-mode launcher: pass the error word, raise the check that failed."""

    def launch(grid, args):
        errors = np.zeros(4, np.int32)
        launcher(grid, [*args, errors])
        code = int(errors[0])
        if code:
            check = table[code - 1]
            err = QnbIndexError(f"{check.message} (debug-mode check)")
            err.ir_loc, err.ir_unit = check.loc, check.unit
            raise err

    return launch


def _is_library_callable(value) -> bool:
    """A function or class of Python's standard library or NumPy (``print``, ``math.sin``,
    ``np.zeros``, ``enumerate``): a kernel cannot call it, and no @qnb.func makes it so."""
    if not callable(value) or isinstance(value, Kernel | Func):
        return False
    module = (getattr(value, "__module__", None) or "").partition(".")[0]
    if isinstance(value, np.ufunc) or module == "numpy":
        return True
    return module in sys.stdlib_module_names or module == "builtins"


class _TraceLauncher:
    def __init__(self, kernel_: Kernel):
        self._kernel = kernel_

    def __getitem__(self, grid):
        grid3 = public(self._kernel._grid)(grid)

        @public
        def run(*args, **kwargs):
            k = self._kernel
            if kwargs:
                args = k._positional(args, kwargs)
            return k.specialize(*args, grid=grid3, backend="cpu").trace(args)

        return run

    @public
    def __call__(self, *args, **kwargs):
        return self[1](*args, **kwargs)


__all__ = ["Kernel", "Func", "Launch", "Specialization", "kernel", "func"]
