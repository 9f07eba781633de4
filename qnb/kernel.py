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
from qnb.backends.base import FAST_ARRAY_TYPES, DeviceArray, Options
from qnb.dtypes import DType, as_dtype, bool_, f32, f64, i32
from qnb.errors import (
    QnbCaptureError,
    QnbError,
    QnbIndexError,
    QnbSyntaxError,
    QnbTypeError,
    public,
)
from qnb.frontend import reads as _reads
from qnb.frontend.capture import (
    UNDEFINED,
    Captures,
    canonical,
    classify,
    decode,
    describe,
    display,
    intrinsic_name,
)
from qnb.frontend.checks import add_bounds_checks
from qnb.frontend.lower import ParamSpec, lower_kernel
from qnb.frontend.parse import ParsedFunction, parse_function
from qnb.frontend.reads import Recorder
from qnb.frontend.semantics import unsupported_call_message
from qnb.language import _ArrayAnnotation, _TemplateAnnotation

CACHE_SCHEMA = 3  # 3: GPU artifacts say how many programs a workgroup/block runs
_LANGUAGES = {"cuda": "cuda", "wgsl": "wgpu"}


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
    "ir.py",
    "kernel.py",
    "language.py",
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


class Func:
    """A ``@qnb.func`` helper: inlined into the kernels that call it.

    Arguments behave as in Python: a Tile16/Vec16 variable passed in is the caller's tile,
    so in-place ops on the parameter (``t.load_``, ``t.eye_()``, ``t[i, j] = s``,
    ``t += u``) change it, as on a NumPy array; assigning the parameter (``t = t + 1``)
    makes a value of the func's own and leaves the caller's tile alone. Numbers are copied.
    """

    @public
    def __init__(self, fn):
        self._qnb_parsed: ParsedFunction = parse_function(fn)
        self._qnb_captures = Captures(self._qnb_parsed)
        functools.update_wrapper(self, fn)

    def __call__(self, *args, **kwargs):
        raise RuntimeError(f"@qnb.func {self.__name__!r} can only be called from inside a kernel")

    def __repr__(self) -> str:
        return f"<qnb.func {self._qnb_parsed.qualname}>"


@public
def func(fn) -> Func:
    """Decorate a helper that kernels call; it is inlined and enters their cache key."""
    return Func(fn)


class _Annotation:
    """A parameter's declared kind: array (dtype/ndim or None), scalar, template, or none."""

    __slots__ = ("kind", "dtype", "ndim")

    def __init__(self, kind, dtype=None, ndim=None):
        self.kind, self.dtype, self.ndim = kind, dtype, ndim


def _read_annotation(parsed: ParsedFunction, name: str, value) -> _Annotation:
    if value is None:
        return _Annotation(None)
    if isinstance(value, str):
        try:
            value = eval(value, parsed.fn.__globals__)  # noqa: S307 - the user's own annotation
        except Exception as exc:  # noqa: BLE001
            message = f"cannot read the annotation of {name!r}: {exc}"
            raise parsed.error(QnbTypeError, message, _param_node(parsed, name)) from None
    if isinstance(value, _ArrayAnnotation):
        return _Annotation("array", value.dtype, value.ndim)
    if isinstance(value, _TemplateAnnotation):
        return _Annotation("template")
    try:
        dtype = as_dtype(value)
    except TypeError:
        message = (
            f"parameter {name!r} has an annotation qnb does not understand: {value!r} (use "
            "qnb.Array, qnb.Array[dtype, ndim], qnb.i32, qnb.f32, qnb.f64 or qnb.Template)"
        )
        raise parsed.error(QnbTypeError, message, _param_node(parsed, name)) from None
    if dtype not in (i32, f32, f64):
        message = f"scalar parameter {name!r} must be qnb.i32, qnb.f32 or qnb.f64"
        raise parsed.error(QnbTypeError, message, _param_node(parsed, name))
    return _Annotation("scalar", dtype)


_FAST_ARRAY, _FAST_ANY_ARRAY, _FAST_FLOAT, _FAST_INT = "array", "any-array", "float", "int"


def _fast_plan(annotations) -> list[tuple] | None:
    """Per parameter, what ``Kernel._fast_signature`` accepts: (code, dtype, ndim, spec).
    None for a kernel with a Template parameter (its spec depends on the value)."""
    plan = []
    for a in annotations:
        if a.kind == "template":
            return None
        if a.kind == "array" and a.dtype is not None and a.ndim is not None:
            plan.append((_FAST_ARRAY, a.dtype, a.ndim, ("array", a.dtype, a.ndim)))
        elif a.kind in ("array", None):  # an unannotated parameter: arrays only, here
            plan.append((_FAST_ANY_ARRAY, a.dtype, a.ndim, None))
        elif a.dtype is i32:
            plan.append((_FAST_INT, i32, None, ("scalar", i32)))
        else:
            plan.append((_FAST_FLOAT, a.dtype, None, ("scalar", a.dtype)))
    return plan


def _plain_array_spec(value, dtype, ndim) -> tuple | None:
    """("array", dtype, ndim) for a C-contiguous array of a fast-path type whose dtype and
    rank qnb supports and the annotation (``dtype``/``ndim``, None for any) allows; else
    None, and the full check decides (and explains)."""
    if type(value) not in FAST_ARRAY_TYPES or not value.flags.c_contiguous:
        return None
    got, rank = _QNB_DTYPES.get(value.dtype), value.ndim
    if got is None or not 1 <= rank <= 3:
        return None
    if (dtype is not None and got is not dtype) or ndim not in (None, rank):
        return None
    return ("array", got, rank)


def _param_node(parsed: ParsedFunction, name: str):
    """The ``def`` line's AST node of parameter ``name`` (errors point at it)."""
    return next((a for a in parsed.tree.args.args if a.arg == name), parsed.tree)


def _holds_named_tuple(form) -> bool:
    if form[0] == "namedtuple":
        return True
    return form[0] == "tuple" and any(_holds_named_tuple(item) for item in form[1])


def _template_spec(value, form) -> tuple:
    """A Template parameter's signature entry: ("template", its canonical JSON text, the
    value lowering uses, how the key shows it). The memo and the key both compare the
    canonical form (never ``==`` or ``repr``: ``0.0 == -0.0``, and a float subclass may
    print rounded); lowering uses the value the form decodes to, so what is compiled is
    what is keyed (a named tuple, read by field, stays as passed: its form holds its
    fields)."""
    from qnb.cache.key import canonical_json

    text = canonical_json(form)
    used = value if _holds_named_tuple(form) else decode(form)
    return ("template", text, used, f"Template = {display(form)}")


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
        for chain, _, value, steps in items:
            for base, attr, found in steps:
                self.covered[(id(base), attr)] = found
                self._keep.append(base)
            try:
                kind = classify(parsed, chain, value)
            except QnbCaptureError as err:
                where = parsed.position(_first_use(parsed, chain))
                static_only = chain in parsed.static_chains
                if _is_library_callable(value) and not static_only:  # print, math.sin
                    message = unsupported_call_message(".".join(chain))
                    raise QnbSyntaxError(message, *where) from None  # not a capture
                raise err.with_location(*where) from None
            if kind[0] == "const" and _is_qnb_module(roots.get(chain[0])):
                continue  # qnb.f32 and friends: the language itself (the `qnb` component)
            form = None
            if kind[0] == "const":
                form = kind[1]
            elif (
                kind[0] == "intrinsic"
                and len(chain) == 1
                and getattr(value, "__name__", None) != chain[0]
            ):  # a plain name bound to an intrinsic (OP = max): the key says which one
                form = ["intrinsic", intrinsic_name(value)]
            elif kind[0] == "intrinsic" and _names_another_shape(chain, value, roots):
                # T.load with T = qnb.Tile[8, 32]: rebinding T to another shape must
                # change the key (the tag names the shape: "Tile[8, 32].load")
                form = ["intrinsic", intrinsic_name(value)]
            elif kind[0] == "callable":
                self.visit(value._qnb_parsed, value._qnb_captures, False)
            elif kind[0] == "namespace" and not _is_qnb_module(value):
                # Which module: lowering reads its attributes by name (reads.Recorder), so
                # a name bound to another module must not meet the first one's entries.
                form = ["module", value.__name__]
            elif kind[0] == "undefined":
                form = ["undefined"]
            if form is not None:
                self.captured[prefix + ".".join(chain)] = form
                forms[chain] = form

    def items_of(self, parsed: ParsedFunction) -> list:
        return self.items[id(parsed)]

    def fingerprint(self, func) -> str:
        """A func reached through a compile-time value (``m.h``): the digest of its source
        and what it captures, transitively, from this launch's one read of them (a func
        met first here is read now, and lowered from that read)."""
        self.visit(func._qnb_parsed, func._qnb_captures, False)
        form = self._tree_form(func._qnb_parsed, set())
        return hashlib.sha256(_cache().canonical_json(form).encode()).hexdigest()[:32]

    def _tree_form(self, parsed: ParsedFunction, seen: set) -> list:
        if id(parsed) in seen:
            return ["recursive", parsed.qualname]
        seen.add(id(parsed))
        forms, parts = self.forms[id(parsed)], []
        for chain, _, value, _ in self.items[id(parsed)]:
            inner = getattr(value, "_qnb_parsed", None)
            if inner is not None and id(inner) in self.items:
                parts.append([".".join(chain), self._tree_form(inner, seen)])
            else:
                parts.append([".".join(chain), forms.get(chain)])
        return [parsed.source, parts]

    def recorder(self) -> Recorder:
        """The one way this launch's lowering reads attributes of compile-time values."""
        return Recorder(self.covered, self.roots, self.fingerprint)

    def unit_of(self, parsed: ParsedFunction) -> tuple[str, dict]:
        """(unit name, captured roots) of a function the lowering meets."""
        name = self.names.get(id(parsed))
        if name is None:  # reached through a compile-time value, not a captured name
            name = self.add(parsed, Captures(parsed).roots())
        return name, self.roots[name]


def _evaluator(resolved: _Resolved):
    """``evaluate(reads)`` for ``get_or_compile_reading``: the recorded reads' forms now
    (label → form, and the (object, attribute, form) checks), or None when a path no longer
    names an object or a value can no longer be keyed."""

    def evaluate(reads):
        forms, checks = {}, []
        for label, path, attr in reads:
            base = _reads.resolve(path, resolved.roots)
            if base is UNDEFINED:
                return None
            try:
                value = getattr(base, attr)
            except AttributeError:
                value = UNDEFINED
            except Exception:  # noqa: BLE001 - a property failing now: compile and report
                return None
            try:
                form = _reads.encode(value, resolved.fingerprint)
            except QnbError:
                return None
            forms[label] = form
            checks.append((base, attr, form))
        return forms, checks

    return evaluate


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


class Kernel:
    """A tile kernel. Launch with ``k[grid](*args)``; ``k(*args)`` is ``k[1](*args)``."""

    @public
    def __init__(self, fn, backend: str | None = None, options: Options | None = None):
        self._qnb_parsed = parsed = parse_function(fn)
        if backend is not None:
            try:
                _backends.check_name(backend)
            except QnbError as err:
                raise err.with_location(*parsed.position(parsed.tree)) from None
        self._qnb_captures = Captures(parsed)
        self._fn = fn
        self._backend = backend
        self._options = options or Options()
        hints = getattr(fn, "__annotations__", {}) or {}
        self._annotations = [_read_annotation(parsed, n, hints.get(n)) for n in parsed.param_names]
        self._fast_plan = _fast_plan(self._annotations)
        self._memo = _LaunchMemo()
        self._memo_generation = 0
        self._grids: dict = {}
        functools.update_wrapper(self, fn)

    # ------------------------------------------------------------------ public

    @property
    def name(self) -> str:
        return self._qnb_parsed.name

    @property
    def filename(self) -> str:
        return self._qnb_parsed.filename

    @property
    def firstlineno(self) -> int:
        return self._qnb_parsed.firstlineno

    @property
    def param_names(self) -> list[str]:
        return list(self._qnb_parsed.param_names)

    @property
    def backend(self) -> str | None:
        """The backend this kernel always launches on, or None to follow ``qnb.set_backend``."""
        return self._backend

    @backend.setter
    @public
    def backend(self, name: str | None) -> None:
        if name is not None and name != "auto":
            _backends.get(name)  # unknown names raise BackendError
        self._backend = None if name == "auto" else name

    @property
    def is_fully_annotated(self) -> bool:
        """True when every parameter's type is known without example arguments."""
        return all(
            a.kind == "scalar" or (a.kind == "array" and a.dtype is not None and a.ndim is not None)
            for a in self._annotations
        )

    def __repr__(self) -> str:
        return f"<qnb.kernel {self._qnb_parsed.qualname}>"

    def __getitem__(self, grid):
        launch = self._grids.get(grid) if isinstance(grid, int | tuple) else None
        if launch is None:
            try:
                grid3 = self._grid(grid)
            except QnbError as err:  # (no @public here: this runs at every launch)
                raise err.with_traceback(None) from None
            launch = functools.partial(self._launch, grid3)
            if len(self._grids) < 64:
                self._grids[grid] = launch
        return launch

    @public
    def __call__(self, *args, **kwargs):
        return self._launch((1, 1, 1), *args, **kwargs)

    @property
    def trace(self):
        """``kernel.trace[grid](*args)`` runs on the cpu backend and returns a ``qnb.Trace``."""
        return _TraceLauncher(self)

    @public
    def source(self, lang: str = "ir", *args) -> str:
        """The generated text for "cuda", "wgsl" or "ir" (args only where parameters are not
        fully annotated). Needs no device and no compiler."""
        if lang not in ("ir", "cuda", "wgsl"):
            raise QnbTypeError(f"source() renders 'ir', 'cuda' or 'wgsl', not {lang!r}")
        kernel_ir, parsed_units = self._lower_for(args)
        if lang == "ir":
            return ir.format_kernel(kernel_ir)
        renderer = _backends.get(_LANGUAGES[lang])
        try:
            return renderer.render(kernel_ir, self._options)
        except QnbError as err:
            raise self._locate(err, parsed_units, kernel_ir.units) from None

    @public
    def compile(self, *args, backend: str | None = None):
        """Compile (or load) now for ``backend``; returns the cache event. Example args are
        needed only where parameters are not fully annotated."""
        name = backend or self._backend or _backends.current_name()
        signature, _ = self._signature(self._example_args(args))
        return self._prepare(name, self._qnb_captures.snapshot(), signature).event

    # ------------------------------------------------------------------ launch path

    def _launch(self, grid, *args, **kwargs):
        # As @public does, without its extra call on the launch fast path.
        try:
            if kwargs:
                args = self._positional(args, kwargs)
            started = time.perf_counter()
            backend_name = self._backend or _backends.current_name()
            snapshot = self._qnb_captures.snapshot()
            signature = self._fast_signature(args)
            if signature is None:
                signature, runtime_args = self._signature(args)
            else:
                runtime_args = list(args)
            cache = _cache()
            if self._memo_generation != cache.lookup.generation[0]:
                self._memo.clear()  # qnb.cache.clear() ran: the next launch must look again
                self._memo_generation = cache.lookup.generation[0]
            if cache.store.always_compile():  # QNB_ALWAYS_COMPILE=1: every launch compiles
                prepared = None
            else:
                prepared = self._memo.get((backend_name, snapshot, signature))
                if prepared is not None and prepared.checks and not _reads.recheck(prepared.checks):
                    prepared = None  # a value lowering read past the captured names changed
            if prepared is None:
                prepared = self._prepare(backend_name, snapshot, signature)
            else:
                cache.record_memory_hit(
                    self.name, backend_name, prepared.key, time.perf_counter() - started
                )
            try:
                prepared.launcher(grid, runtime_args)
            except QnbError as err:
                raise self._locate(err, prepared.units) from None
        except QnbError as err:
            raise err.with_traceback(None) from None

    def _positional(self, args: tuple, kwargs: dict) -> tuple:
        """``args`` followed by the keyword arguments, in parameter order."""
        names = self._qnb_parsed.param_names
        for name in kwargs:
            if name not in names:
                raise self._def_error(f"kernel {self.name!r} has no parameter {name!r}")
            if names.index(name) < len(args):
                raise self._def_error(
                    f"kernel {self.name!r} got parameter {name!r} both by position and by name"
                )
        missing = [n for n in names[len(args) :] if n not in kwargs]
        if missing:
            raise self._def_error(
                f"kernel {self.name!r} is missing {', '.join(map(repr, missing))} "
                f"(its parameters are {', '.join(names)})"
            )
        return (*args, *(kwargs[n] for n in names[len(args) :]))

    def _fast_signature(self, args) -> tuple | None:
        """The signature of the common call (C-contiguous NumPy arrays, or a loaded
        backend's own arrays, see ``FAST_ARRAY_TYPES``; Python floats for float parameters;
        Python ints in range for i32 ones), or None: then ``_signature`` decides, and
        explains what is wrong."""
        plan = self._fast_plan
        if plan is None or len(args) != len(plan):
            return None
        signature = []
        for value, (code, dtype, ndim, spec) in zip(args, plan):
            if code is _FAST_FLOAT:
                if type(value) is not float:
                    return None
            elif code is _FAST_INT:
                if type(value) is not int or not -(2**31) <= value < 2**31:
                    return None
            elif code is _FAST_ARRAY:  # a fixed dtype and rank: the spec is the plan's own
                if type(value) not in FAST_ARRAY_TYPES or not value.flags.c_contiguous:
                    return None
                if _QNB_DTYPES.get(value.dtype) is not dtype or value.ndim != ndim:
                    return None
            else:
                spec = _plain_array_spec(value, dtype, ndim)
                if spec is None:
                    return None
            signature.append(spec)
        return tuple(signature)

    def _signature(self, args) -> tuple[tuple, list]:
        parsed = self._qnb_parsed
        if len(args) != len(self._annotations):
            raise self._def_error(
                f"kernel {self.name!r} takes {len(self._annotations)} "
                f"argument{'' if len(self._annotations) == 1 else 's'} "
                f"({', '.join(parsed.param_names)}) but {len(args)} "
                f"{'was' if len(args) == 1 else 'were'} given"
            )
        signature = []
        runtime = []
        for name, annotation, value in zip(parsed.param_names, self._annotations, args):
            try:
                spec, runtime_value = self._arg_spec(name, annotation, value)
            except (QnbTypeError, QnbCaptureError) as err:
                node = _param_node(parsed, name)
                raise err.with_location(*parsed.position(node)) from None
            signature.append(spec)
            if spec[0] != "template":
                runtime.append(runtime_value)
        return tuple(signature), runtime

    def _grid(self, grid) -> tuple[int, int, int]:
        """The launch grid as 3 ints; a bad one is reported at the kernel's ``def`` line."""
        try:
            return _grid(grid)
        except QnbTypeError as err:
            raise err.with_location(*self._qnb_parsed.position(self._qnb_parsed.tree)) from None

    def _arg_error(self, message):
        """An argument error; _signature points it at the parameter on the ``def`` line."""
        return QnbTypeError(message)

    def _def_error(self, message):
        """An error about the call as a whole, shown at the kernel's ``def`` line."""
        return self._qnb_parsed.error(QnbTypeError, message, self._qnb_parsed.tree)

    def _arg_spec(self, name, annotation, value):
        kind = annotation.kind
        if kind is None or kind == "array":  # the common case, kept cheap
            spec = _plain_array_spec(value, annotation.dtype, annotation.ndim)
            if spec is not None:
                return spec, value
        if kind == "template" or (kind is None and _is_template_value(value)):
            try:
                form = canonical(value)
            except QnbCaptureError as err:
                raise QnbCaptureError(f"Template parameter {name!r}: {err.message}") from None
            if form is None:
                raise self._arg_error(
                    f"Template parameter {name!r} must be a bool, int, float, str, "
                    f"None, dtype or tuple of these, not {_not_constant(value)}"
                )
            return _template_spec(value, form), None
        if _is_array(value):
            if kind == "scalar":
                raise self._arg_error(
                    f"parameter {name!r} is a {annotation.dtype} scalar; got an array "
                    "(pass a number, or read an element inside the kernel)"
                )
            return self._array_spec(name, annotation, value), value
        if kind == "array":
            raise self._arg_error(
                f"parameter {name!r} expects an array, got {type(value).__name__}"
            )
        if isinstance(value, bool | np.bool_):
            raise self._arg_error(
                f"parameter {name!r} is a {annotation.dtype or 'number'}; "
                "got a bool (annotate it qnb.Template to branch on it)"
            )
        if isinstance(value, int | np.integer):
            dtype = annotation.dtype or i32
            if dtype is i32 and not -(2**31) <= int(value) < 2**31:
                raise self._arg_error(f"parameter {name!r}: {value} does not fit in i32")
            return ("scalar", dtype), (int(value) if dtype is i32 else float(value))
        if isinstance(value, float | np.floating):
            dtype = annotation.dtype or f32
            if dtype is i32:
                raise self._arg_error(f"parameter {name!r} is qnb.i32; got the float {value!r}")
            return ("scalar", dtype), float(value)
        raise self._arg_error(
            f"parameter {name!r}: qnb cannot pass a {type(value).__name__} to a "
            "kernel (arrays, numbers, or Template values)"
        )

    def _array_spec(self, name, annotation, value):
        try:
            dtype = as_dtype(value.dtype)
        except TypeError:
            raise self._arg_error(
                f"array {name!r} has dtype {value.dtype}, which qnb does not "
                "support; convert it with .astype(np.float32) (or f16, f64, "
                "int32, bool)"
            ) from None
        ndim = len(value.shape)
        if isinstance(value, np.ndarray) and not value.flags.c_contiguous:
            raise self._arg_error(
                f"array {name!r} is not C-contiguous; pass "
                "np.ascontiguousarray(x) (and copy results back)"
            )
        if ndim not in (1, 2, 3):
            raise self._arg_error(
                f"array {name!r} has {ndim} dimensions; qnb kernels take 1-D, 2-D or 3-D arrays"
            )
        if annotation.dtype is not None and annotation.dtype is not dtype:
            raise self._arg_error(
                f"array {name!r} must be {annotation.dtype}, got {dtype} "
                f"(convert with .astype({annotation.dtype.numpy.name!r}))"
            )
        if annotation.ndim is not None and annotation.ndim != ndim:
            raise self._arg_error(f"array {name!r} must be {annotation.ndim}-D, got {ndim}-D")
        return ("array", dtype, ndim)

    def _example_args(self, args):
        if args:
            return args
        if not self.is_fully_annotated:
            raise self._def_error(
                f"kernel {self.name!r} has parameters without full annotations; "
                "pass example arguments"
            )
        examples = []
        for annotation in self._annotations:
            if annotation.kind == "scalar":
                examples.append(0 if annotation.dtype is i32 else 0.0)
            else:
                examples.append(_Example(annotation.dtype, annotation.ndim))
        return examples

    # ------------------------------------------------------------------ specialisation

    def _resolve(self) -> _Resolved:
        """Classify every captured value (kernel and funcs, transitively).

        Each function object is its own unit, named ``module:qualname``: two funcs made by
        one factory share that name but not their captured values, so the second one met
        is ``module:qualname#2`` (met in the order of the captured names, the same in
        every process). A func's captured names enter the key under its unit name."""
        resolved = _Resolved()
        resolved.visit(self._qnb_parsed, self._qnb_captures, True)
        return resolved

    def _param_specs(self, signature) -> list[ParamSpec]:
        specs = []
        for name, spec in zip(self._qnb_parsed.param_names, signature):
            if spec[0] == "template":
                specs.append(ParamSpec(name, "template", value=spec[2]))
            elif spec[0] == "array":
                specs.append(ParamSpec(name, "array", ir.Type("array", spec[1], spec[2])))
            else:
                specs.append(ParamSpec(name, "scalar", ir.scalar(spec[1])))
        return specs

    def _key_components(self, backend, signature, captured, sources) -> dict:
        backend_component, compiler_component = _backend_components(backend)
        described = {}
        for name, spec in zip(self._qnb_parsed.param_names, signature):
            if spec[0] == "template":
                described[name] = spec[3]
            elif spec[0] == "array":
                described[name] = f"Array[{spec[1].name}, {spec[2]}]"
            else:
                described[name] = spec[1].name
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
            return lower_kernel(
                self._qnb_parsed, resolved.unit_of, self._param_specs(signature), reads
            )
        except RecursionError:
            message = f"kernel {self.name!r} is nested too deeply to compile"
            raise self._qnb_parsed.error(QnbTypeError, message, self._qnb_parsed.tree) from None

    def _lower_for(self, args):
        signature, _ = self._signature(self._example_args(args))
        resolved = self._resolve()
        return self._lower(signature, resolved), resolved.parsed_units

    def _prepare(self, backend_name, snapshot, signature) -> _Prepared:
        from qnb import cache

        try:
            backend = _backends.require(backend_name)
        except QnbError as err:  # unknown or unavailable here: shown at the kernel's def
            raise err.with_location(*self._qnb_parsed.position(self._qnb_parsed.tree)) from None
        resolved = self._resolve()
        parsed_units = resolved.parsed_units
        components = self._key_components(backend, signature, resolved.captured, resolved.sources)
        key = cache.CacheKey(components)

        # Debug mode on a GPU: bounds checks become IR (the cpu backend checks as it runs).
        debug_checks = self._options.debug and backend_name != "cpu"
        tables = []
        recorders = []

        def lowered():
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
                tables.append(table)
            return kernel_ir

        def compile_now():
            kernel_ir = lowered()
            try:
                return backend.compile(kernel_ir, self._options), recorders[0].reads
            except QnbError as err:
                raise self._locate(err, parsed_units, kernel_ir.units) from None

        launcher, event, key, checks = cache.lookup.get_or_compile_reading(
            self.name,
            backend_name,
            key,
            compile_now,
            backend.load,
            _evaluator(resolved),
            origin=f"{self.filename}:{self.firstlineno}",
        )
        if checks is None:  # compiled now: re-check what this compile read
            checks = recorders[0].checks
        if debug_checks:
            if not tables:  # loaded from the cache: rebuild the check table (debug only)
                lowered()
            launcher = _checked(launcher, tables[0])
        prepared = _Prepared(launcher, key, parsed_units, event, tuple(checks))
        if len(self._memo) > 256:  # a kernel relaunched with ever-new captured values
            self._memo.clear()
        # Under the values this launch keyed and compiled from (the snapshot taken before
        # may differ: another thread can rebind a captured name meanwhile).
        keyed = self._qnb_captures.keyed_snapshot(resolved.items_of)
        memo_key = (backend_name, keyed, signature)
        self._memo[memo_key] = prepared
        cache.lookup.hold(key.digest, self._memo, memo_key)  # dropped with the launcher
        return prepared

    def _variant(self, **options) -> Kernel:
        """This kernel with other compile options (``probe=True`` for ``qnb.compare``): the
        same function, its own memo and cache entries (``options`` enters the key)."""
        import copy
        import dataclasses

        wanted = dataclasses.replace(self._options, **options)
        variants = self.__dict__.setdefault("_variants", {})
        found = variants.get(wanted)
        if found is None:
            found = variants[wanted] = copy.copy(self)
            found._options, found._memo, found._grids = wanted, _LaunchMemo(), {}
            found.__dict__.pop("_variants", None)
        return found

    def _locate(self, err: QnbError, parsed_units: dict, ir_units=()) -> QnbError:
        """Give an error raised at an IR location the user's own file and line (one with
        no IR location: the parameter it names in ``param``, else the ``def`` line).

        The unit is the error's ``ir_unit`` (runtime errors carry it) or, at compile time,
        the IR's unit list entry its ``ir_loc`` names."""
        if err.lineno is not None:
            return err
        loc = getattr(err, "ir_loc", None)
        if loc is None:  # a launcher refused an argument: its parameter, else the def line
            parsed = self._qnb_parsed
            name = getattr(err, "param", None)
            node = _param_node(parsed, name) if name in parsed.param_names else parsed.tree
            return err.with_location(*parsed.position(node))
        unit_name = getattr(err, "ir_unit", None)
        if unit_name is None and loc.unit < len(ir_units):
            unit_name = ir_units[loc.unit].qualname
        parsed = parsed_units.get(unit_name)
        if parsed is not None:
            line = parsed.firstlineno + loc.line - 1
            err.with_location(parsed.filename, line, loc.col + parsed.indent)
        return err


@public
def kernel(
    fn=None,
    *,
    backend: str | None = None,
    debug: bool = False,
    fast_math: bool = False,
    threads: int | None = None,
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

    ``backend``: this kernel's backend, whatever ``qnb.set_backend`` says. ``debug``: the
    cpu backend's bounds checks on the GPU backends too. ``fast_math``: let NVRTC trade
    IEEE accuracy for speed (``--use_fast_math``; cuda only). ``threads``: the threads of
    one program on the GPU backends (a power of two up to 256; by default chosen from the
    kernel's tile shapes), for tuning."""
    options = Options(debug=debug, fast_math=fast_math, threads=threads)

    @public
    def wrap(f):
        return Kernel(f, backend=backend, options=options)

    return wrap(fn) if fn is not None else wrap


# ---------------------------------------------------------------------- helpers


_QNB_DTYPES = {d.numpy: d for d in (bool_, i32, f32, f64, as_dtype("f16"))}
FAST_ARRAY_TYPES.add(np.ndarray)


class _LaunchMemo(dict):
    """A kernel's launch memo: (backend, snapshot, signature) → _Prepared. The memory
    level holds it by a weak reference and drops the entries of launchers it evicts."""

    __slots__ = ("__weakref__",)


class _Example:
    """An example array for a fully annotated parameter (dtype and rank only)."""

    def __init__(self, dtype, ndim):
        self.dtype = dtype.numpy
        self.shape = (16,) * ndim


def _is_array(value) -> bool:
    return isinstance(value, np.ndarray | DeviceArray | _Example) or hasattr(
        value, "__cuda_array_interface__"
    )


def _is_template_value(value) -> bool:
    if isinstance(value, bool | np.bool_ | str) or value is None:
        return True
    if isinstance(value, DType | np.dtype) or (
        isinstance(value, type) and issubclass(value, np.generic)
    ):
        return True
    return isinstance(value, tuple)


def _grid(grid) -> tuple[int, int, int]:
    values = grid if isinstance(grid, tuple) else (grid,)
    if not 1 <= len(values) <= 3 or not all(isinstance(v, int | np.integer) for v in values):
        raise QnbTypeError(f"a launch grid is an int or a tuple of up to 3 ints, got {grid!r}")
    values = tuple(int(v) for v in values) + (1,) * (3 - len(values))
    if any(v < 1 for v in values):
        raise QnbTypeError(f"every grid dimension must be at least 1, got {grid!r}")
    if any(v >= 2**31 for v in values):  # program ids are i32 in every backend
        raise QnbTypeError(f"every grid dimension must be below 2**31, got {grid!r}")
    return values


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
    return intrinsic_name(value) != ".".join(chain)


def _is_qnb_module(value) -> bool:
    name = getattr(value, "__name__", "") if isinstance(value, types.ModuleType) else ""
    return name == "qnb" or name.startswith("qnb.")


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


def _not_constant(value, where: str = "") -> str:
    """What in a Template value is not a compile-time constant (for its error message)."""
    if isinstance(value, tuple):
        for index, item in enumerate(value):
            if canonical(item) is None:
                return _not_constant(item, f"{where}[{index}]")
    if where:
        return f"a tuple whose element {where} is of type {describe(value)}"
    return describe(value)


def _first_use(parsed: ParsedFunction, chain):
    import ast

    for node in ast.walk(parsed.tree):
        if isinstance(node, ast.Name) and node.id == chain[0]:
            return node
    return parsed.tree


class _TraceLauncher:
    def __init__(self, kernel_: Kernel):
        self._kernel = kernel_

    def __getitem__(self, grid):
        grid3 = public(self._kernel._grid)(grid)

        @public
        def run(*args, **kwargs):
            from qnb.backends import cpu

            k = self._kernel
            if kwargs:
                args = k._positional(args, kwargs)
            signature, runtime_args = k._signature(args)
            resolved = k._resolve()
            parsed_units = resolved.parsed_units
            kernel_ir = k._lower(signature, resolved)
            try:
                return cpu.trace(kernel_ir, grid3, runtime_args, k._qnb_parsed, parsed_units)
            except QnbError as err:
                raise k._locate(err, parsed_units, kernel_ir.units) from None

        return run

    @public
    def __call__(self, *args, **kwargs):
        return self[1](*args, **kwargs)


__all__ = ["Kernel", "Func", "kernel", "func"]
