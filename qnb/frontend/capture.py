"""Launch time: read the names a kernel captures, and give each a canonical value.

Every global or closure name a kernel (or a func it calls) reads is re-read at each
launch. :meth:`Captures.snapshot` is the fast path: a tuple that compares equal only
when nothing a kernel reads has changed (types included at every level, so ``1``,
``1.0`` and ``True`` differ, also inside tuples; floats by their bits, so ``0.0`` and
``-0.0`` differ and a NaN equals itself). :func:`classify` is the slow path, run only
when the snapshot changed: it turns each value into a compile-time constant with a
canonical, JSON-able form for the cache key (a NumPy scalar keeps its type there), or
raises :class:`QnbCaptureError`.
"""

from __future__ import annotations

import ast
import builtins
import enum
import importlib
import math
import sys
import types
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from qnb import ops
from qnb.dtypes import is_dtype_like
from qnb.errors import QnbCaptureError
from qnb.frontend.constants import (  # the one encoding (decode, display: re-exported)
    MAX_TUPLE_DEPTH,  # noqa: F401
    canonical,
    decode,  # noqa: F401
    display,  # noqa: F401
    nesting_error,  # noqa: F401
    too_deep,
)
from qnb.frontend.parse import KERNEL_BUILTINS, ParsedFunction
from qnb.function import QnbFunction


class _Undefined:
    def __repr__(self):
        return "<undefined>"


UNDEFINED = _Undefined()

# Functions from ``math`` and ``numpy`` that mean the same as a language intrinsic.
_FOREIGN_INTRINSICS = {
    math.exp: "exp",
    math.log: "log",
    math.sqrt: "sqrt",
    math.fabs: "abs",
    np.maximum: "maximum",
    np.minimum: "minimum",
    np.where: "where",
    # math.floor/ceil/trunc return ints in Python, so only NumPy's (float) ones are twins.
    **{getattr(math, name): name for name in ("log2", "sin", "cos", "tanh")},
    **{op.numpy: name for name, op in ops.MATH.items()},  # (the registry's ufuncs)
}


class CaptureKind(enum.Enum):
    """What a captured value is to the compiler."""

    CONST = "const"  # a compile-time constant: its canonical form enters the key
    NAMESPACE = "namespace"  # a module: the kernel reads its attributes by name
    OBJECT = "object"  # a configuration object: the kernel reads its attributes (reads.py)
    INTRINSIC = "intrinsic"  # a language intrinsic, or its math/NumPy twin (np.exp)
    CALLABLE = "callable"  # a @qnb.func or kernel: keyed by its own source and captures
    UNDEFINED = "undefined"  # bound nowhere (yet)


@dataclass(frozen=True, slots=True)
class Classified:
    """:func:`classify`'s answer: the value's kind and, for a constant, its canonical form."""

    kind: CaptureKind
    form: list | None = None


_NAMESPACE = Classified(CaptureKind.NAMESPACE)
_INTRINSIC = Classified(CaptureKind.INTRINSIC)
_CALLABLE = Classified(CaptureKind.CALLABLE)
_UNDEFINED_NAME = Classified(CaptureKind.UNDEFINED)


class CapturedRead(NamedTuple):
    """One captured chain as ``Captures.read`` found it."""

    chain: tuple[str, ...]  # the name and the attributes the kernel reads of it: ("cfg", "N")
    root: object  # the value bound to the name
    value: object  # the value at the end of the walk (``walked``)
    steps: list  # the (object, attribute, value) reads the walk made

    @property
    def walked(self) -> tuple[str, ...]:
        """The part of the chain the walk read (``cfg.scale`` of ``cfg.scale.hex``): what
        the value stands for, and its name in the key."""
        return self.chain[: 1 + len(self.steps)]


def foreign_intrinsic(value) -> str | None:
    try:
        return _FOREIGN_INTRINSICS.get(value)
    except Exception:  # noqa: BLE001 - unhashable, or an object whose == refuses
        return None


def is_qnb_callable(value) -> bool:
    """A @qnb.func or kernel: it enters the key by its own source and captures."""
    return isinstance(value, QnbFunction)


def _walk_chain(root, chain: tuple[str, ...]):
    """Follow a chain as far as it reads attributes (:func:`steps_into`): the value the
    kernel uses at its end."""
    value = root
    for attr in chain[1:]:
        if not steps_into(value, attr):
            break
        value = read_attribute(value, attr)
    return value


def read_attribute(value, attr: str):
    """``getattr(value, attr)`` for a captured chain's walk: UNDEFINED where there is no
    such attribute, a :class:`Raised` where reading it raised (a property that fails),
    so a launch never fails inside the snapshot (``classify`` reports it)."""
    try:
        return getattr(value, attr)
    except AttributeError:
        return UNDEFINED
    except Exception as exc:  # noqa: BLE001 - the user's property: reported by classify
        return Raised(exc)


class Raised:
    """What a walk found where reading an attribute raised: never equal to another."""

    __slots__ = ("error",)

    def __init__(self, error: BaseException):
        self.error = error

    def __repr__(self) -> str:
        return f"<raised {type(self.error).__name__}>"


def steps_into(value, attr: str) -> bool:
    """Whether a captured chain reads ``attr`` of ``value`` when it is captured: through a
    module or an Enum class (to the attribute's value, as a namespace), through a
    configuration object (:func:`is_config_object`), and a named tuple's field. A chain
    stops at anything else (a constant, qnb's own objects, a func): lowering reads on."""
    if _is_namespace(value) or is_config_object(value):
        return True
    kind = type(value)
    return issubclass(kind, tuple) and attr in (getattr(kind, "_fields", None) or ())


def _walks_through(root) -> bool:
    """Whether some chain may read past ``root`` when it is captured (``steps_into``):
    then the snapshot depends on more than which object ``root`` is."""
    if _is_namespace(root) or is_config_object(root):
        return True
    kind = type(root)
    return issubclass(kind, tuple) and bool(getattr(kind, "_fields", None))


def _is_namespace(value) -> bool:
    """A module or an Enum class: a chain through it reaches an attribute's value, not
    the object itself (``_walk_chain``)."""
    return isinstance(value, types.ModuleType) or (
        isinstance(value, type) and issubclass(value, enum.Enum)
    )


# Never configuration objects: values, containers and callables of Python's own.
_NOT_CONFIG = frozenset(
    {int, float, complex, bool, str, bytes, bytearray, type(None), tuple, list, dict, set,
     frozenset, range, slice, types.ModuleType, types.FunctionType, types.MethodType,
     types.BuiltinFunctionType, types.BuiltinMethodType, types.MethodWrapperType,
     types.WrapperDescriptorType, types.MethodDescriptorType, property, staticmethod,
     classmethod, type(Ellipsis), type(NotImplemented)}
)  # fmt: skip
_ARRAY_PROTOCOLS = ("__array__", "__array_interface__", "__cuda_array_interface__", "__dlpack__")
_OWN_MODULES = ("builtins", "numpy", "qnb")


def is_config_object(value) -> bool:
    """A configuration object: a value a kernel reads for its attributes, each a
    compile-time read keyed by its path (a dataclass instance, a ``SimpleNamespace``, a
    class of the user's or any instance of one). Not: a constant, a module, an Enum class,
    a func, a function or other callable, a container, an array, or an object of Python's,
    NumPy's or qnb's own."""
    kind = type(value)
    if kind in _NOT_CONFIG:
        return False
    if isinstance(value, type):
        return _is_config_class(value)
    module = getattr(kind, "__module__", None) or ""
    if module.partition(".")[0] in _OWN_MODULES:
        return False
    if issubclass(kind, int | float | str | tuple | enum.Enum | np.generic | QnbFunction):
        return False  # (subclasses of constants: constants themselves, by their plain value)
    return not (callable(value) or any(hasattr(kind, name) for name in _ARRAY_PROTOCOLS))


def _is_config_class(cls: type) -> bool:
    if issubclass(cls, enum.Enum) or is_dtype_like(cls):
        return False
    module = getattr(cls, "__module__", None) or ""
    return isinstance(module, str) and module.partition(".")[0] not in _OWN_MODULES


def _qnb_module():
    return sys.modules.get("qnb")


class Captures:
    """Reads one function's captured names (closure cells first, then globals, then builtins)."""

    def __init__(self, parsed: ParsedFunction):
        fn = parsed.fn
        self.parsed = parsed
        code = fn.__code__
        cells = dict(zip(code.co_freevars, fn.__closure__ or ()))
        self._globals = fn.__globals__
        self._readers = []
        self._tokens: dict[tuple[str, ...], tuple[object, object]] = {}  # chain → (value, token)
        for chain in parsed.chains:
            root = chain[0]
            self._readers.append((chain, cells.get(root)))
        # Each root name once: (name, cell, whether every chain of it is the name alone).
        whole: dict[str, bool] = {}
        for chain in parsed.chains:
            whole[chain[0]] = whole.get(chain[0], True) and len(chain) == 1
        self._names = [(name, cells.get(name), alone) for name, alone in whole.items()]

    def _root(self, name, cell):
        if cell is not None:
            try:
                return cell.cell_contents
            except ValueError:  # an empty cell: the name is assigned later in the outer scope
                return UNDEFINED
        value = self._globals.get(name, UNDEFINED)
        if value is UNDEFINED:
            value = getattr(builtins, name, UNDEFINED)
        return value

    def roots(self) -> dict[str, object]:
        """Root name -> current value, for the names this function reads."""
        return {chain[0]: self._root(chain[0], cell) for chain, cell in self._readers}

    def read(self) -> tuple[dict, list[CapturedRead]]:
        """One read of every captured name: (root name -> value, a :class:`CapturedRead`
        per chain). A compile keys and lowers from this one read (``Kernel._resolve``)."""
        roots: dict[str, object] = {}
        items = []
        for chain, cell in self._readers:
            name = chain[0]
            root = roots[name] if name in roots else roots.setdefault(name, self._root(name, cell))
            value, steps = root, []
            for attr in chain[1:]:
                if not steps_into(value, attr):
                    break
                found = read_attribute(value, attr)
                steps.append((value, attr, found))
                value = found
            items.append(CapturedRead(chain, root, value, steps))
        return roots, items

    def keyed_snapshot(self, keyed, _seen=None) -> tuple:
        """What :meth:`snapshot` gives for the values a compile read (``keyed(parsed)`` is
        that function's :meth:`read` items), not the live ones: the launch memo stores a
        launcher under the values it was compiled from, whatever changed meanwhile."""
        out = []
        qnb_module = _qnb_module()
        for chain, root, value, _ in keyed(self.parsed):
            if root is qnb_module:
                out.append((chain, root))
                continue
            if isinstance(value, QnbFunction):
                seen = _seen or set()
                if id(value) in seen:
                    out.append((chain, "recursive"))
                    continue
                seen = seen | {id(value)}
                out.append((chain, value, value.captures.keyed_snapshot(keyed, seen)))
                continue
            entry = self._entry(chain, value)
            if entry is None:
                return (_Unhashable(),)
            out.append(entry)
        return tuple(out)

    def snapshot(self, _seen=None) -> tuple:
        """A tuple equal to an earlier one only if no captured value changed."""
        out = []
        qnb_module = _qnb_module()
        find = self._globals.get
        for chain, cell in self._readers:
            if cell is None:  # a global (as _root reads it, inline: this is the launch path)
                root = find(chain[0], UNDEFINED)
                if root is UNDEFINED:
                    root = getattr(builtins, chain[0], UNDEFINED)
            else:
                root = self._root(chain[0], cell)
            if root is qnb_module:  # qnb's own names are the language: fixed, not captured
                out.append((chain, root))
                continue
            value = _walk_chain(root, chain)
            if isinstance(value, QnbFunction):
                seen = _seen or set()
                if id(value) in seen:
                    out.append((chain, "recursive"))
                    continue
                seen = seen | {id(value)}
                out.append((chain, value, value.captures.snapshot(seen)))
                continue
            kind = type(value)
            if kind is float:  # the common case of _exact, inline: this is the launch path
                if value != value or value == 0:
                    value = value.hex()
            elif kind not in _EQUAL_MEANS_SAME:  # (those are hashable, and exact as they are)
                value = self._token(chain, value)
                if value is None:
                    return (_Unhashable(),)  # never equal: the slow path reports the error
            out.append((chain, kind, value))
        return tuple(out)

    # The launch memo's hot entry (``Kernel._launch``): where every value the snapshot
    # holds is a root itself (a name read whole, or through the attributes of an object
    # the chain does not walk, ``Tile16.full``: not a module's, an Enum class's, a
    # configuration object's or a named tuple's, and not a func, whose own captures may
    # change) or the qnb module, the
    # snapshot depends only on which objects the names are bound to, so "the same objects
    # as at the last hit" is a cheaper test of "the same snapshot". (What lowering reads
    # past the roots, ``m.cfg.N``, is the launch memo's re-checked reads, on either path.)

    def plain_roots(self) -> tuple | None:
        """One read of the root names (in ``_names`` order), or None where the snapshot
        depends on more than which objects they are."""
        qnb_module = _qnb_module()
        roots = []
        for name, cell, whole in self._names:
            root = self._root(name, cell)
            if root is not qnb_module and (
                isinstance(root, QnbFunction) or (not whole and _walks_through(root))
            ):
                return None
            roots.append(root)
        return tuple(roots)

    def snapshot_of(self, roots: tuple) -> tuple | None:
        """What :meth:`snapshot` gives when the names are bound to ``roots`` (from
        :meth:`plain_roots`), computed from them alone; None where it would be unequal
        to every snapshot."""
        qnb_module = _qnb_module()
        bound = {name: root for (name, _, _), root in zip(self._names, roots)}
        out = []
        for chain, _ in self._readers:
            value = bound[chain[0]]
            if value is qnb_module:
                out.append((chain, value))
                continue
            entry = self._entry(chain, value)  # a plain root: the chain ends at the root
            if entry is None:
                return None
            out.append(entry)
        return tuple(out)

    def _entry(self, chain, value):
        """A snapshot's entry for ``value`` read at ``chain``: equal entries mean the same
        value (a float's sign of zero and NaN kept in its hex form), None where it has no
        such form."""
        kind = type(value)
        if kind is float:
            if value != value or value == 0:
                value = value.hex()
        elif kind not in _EQUAL_MEANS_SAME:
            value = self._token(chain, value)
            if value is None:
                return None
        return (chain, kind, value)

    def roots_check(self, roots: tuple):
        """``same() -> bool``, :meth:`same_roots` of ``roots`` made for a launch to call
        at once: where every root name is a module global (the common kernel), one
        dictionary read and identity test a name, and the full check only where one
        differs (a builtin, a rebound name)."""
        same_roots = self.same_roots
        cells = any(cell is not None for _, cell, _ in self._names)
        if cells or any(root is UNDEFINED for root in roots):  # (not `in`: roots may be arrays)
            return lambda: same_roots(roots)
        find = self._globals.get
        pairs = tuple((name, root) for (name, _, _), root in zip(self._names, roots))

        def same():
            for name, root in pairs:
                if find(name, UNDEFINED) is not root:
                    return same_roots(roots)
            return True

        return same

    def same_roots(self, roots: tuple) -> bool:
        """Whether every root name is still bound to the very object in ``roots``."""
        find = self._globals.get
        for (name, cell, _), root in zip(self._names, roots):
            if cell is None:
                found = find(name, UNDEFINED)
                if found is UNDEFINED:
                    found = getattr(builtins, name, UNDEFINED)
            else:
                found = self._root(name, cell)
            if found is not root:
                return False
        return True

    def _token(self, chain, value):
        """``_exact(value)``, or None if unhashable. A token depends only on immutable
        parts of its value (tuples, floats), so the same object gives the same token
        and a captured tuple costs one identity test while it is not rebound."""
        last = self._tokens.get(chain)
        if last is not None and last[0] is value:
            return last[1]
        if isinstance(value, tuple) and too_deep(value):
            return None  # the slow path reports it (canonical raises QnbCaptureError)
        token = _exact(value)
        try:
            hash(token)
        except TypeError:
            return None
        self._tokens[chain] = (value, token)
        return token


# Types whose ``==`` already means "the same compile-time value" once the types match
# (exactly these types: a subclass's ``==`` and ``hash`` are its own, and may lie).
_EQUAL_MEANS_SAME = frozenset({int, bool, str, type(None), types.ModuleType, types.FunctionType})


def _exact(value):
    """The snapshot's token for a value that is not of ``_EQUAL_MEANS_SAME``'s types: equal
    to another token only when the values have the same canonical form (types and float
    bits at every level, a subclass by its plain value: never its own ``==``, ``hash`` or
    ``repr``), or, for anything else (an object read for its attributes, an intrinsic), when
    they are the very same object.

    ``==`` alone is too loose for a cache: ``0.0 == -0.0``, ``(1,) == (1.0,)`` and
    ``(True,) == (1,)`` although each pair compiles differently, and ``nan != nan``
    would miss the launch memo every time."""
    form = canonical(value)
    if form is None:
        return _Identity(value)
    return _frozen(form)


def _frozen(form):
    """A canonical form as nested tuples (hashable)."""
    if isinstance(form, list):
        return tuple(_frozen(item) for item in form)
    return form


class _Identity:
    """A snapshot token that is equal only to a token of the very same object."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value

    def __eq__(self, other):
        return isinstance(other, _Identity) and other.value is self.value

    def __hash__(self):
        return id(self.value)


class _Unhashable:
    def __eq__(self, other):
        return False

    def __hash__(self):
        return 0


def describe(value) -> str:
    kind = type(value)
    module = kind.__module__
    return kind.__qualname__ if module == "builtins" else f"{module}.{kind.__qualname__}"


def classify(owner: ParsedFunction, chain: tuple[str, ...], value) -> Classified:
    """What a captured value is to the compiler, a :class:`Classified` record (a constant
    with its canonical form, a namespace, an intrinsic, a callable, or undefined). Raises
    QnbCaptureError otherwise.

    A library function read only inside ``qnb.static(...)`` (``sum``, ``math.ceil``,
    ``np.prod``) is a constant named by its qualified name: its result depends only on its
    arguments, which are captured themselves."""
    if value is UNDEFINED:
        return _UNDEFINED_NAME
    if isinstance(value, types.ModuleType):
        return _NAMESPACE
    if is_config_object(value):  # (first: its own __getattr__ may answer any name)
        return Classified(CaptureKind.OBJECT, ["object", object_name(value)])
    if getattr(value, "_qnb_intrinsic", None) is not None or foreign_intrinsic(value):
        return _INTRINSIC
    if is_qnb_callable(value):
        return _CALLABLE
    if any(value is b for b in _BUILTIN_VALUES) and len(chain) == 1:
        return _INTRINSIC
    if getattr(value, "_qnb_annotation", False):
        return _INTRINSIC
    form = canonical(value)
    if form is not None:
        return Classified(CaptureKind.CONST, form)
    name = ".".join(chain)
    if isinstance(value, Raised):
        error = value.error
        raise QnbCaptureError(
            f"kernel {owner.name!r} reads {name!r}, and reading it raised "
            f"{type(error).__name__}: {error}"
        )
    if chain in owner.static_chains and callable(value):
        library = library_name(value)
        if library is not None:
            return Classified(CaptureKind.CONST, ["library", library])
        raise QnbCaptureError(
            f"kernel {owner.name!r} calls {name!r} ({callable_name(value)}) inside "
            f"qnb.static(...); the cache key cannot follow what {name} computes (qnb.static "
            "may call Python's builtins, math and NumPy functions whose result depends on "
            "their arguments alone, which the key names): compute the value outside the "
            "kernel and capture the result, or pass it as a qnb.Template parameter"
        )
    raise QnbCaptureError(
        f"kernel {owner.name!r} reads {name!r} ({callable_name(value)}) from the enclosing "
        f"scope; {capture_hint(value, name)}"
    )


def capture_hint(value, name: str) -> str:
    """What to do about a value a kernel cannot capture (the end of its message)."""
    if isinstance(value, types.MethodType):
        return (
            "a kernel reads constants, not methods: compute the value outside the kernel and "
            "store it in an attribute, or make the helper a @qnb.func"
        )
    if isinstance(value, types.FunctionType | types.BuiltinFunctionType):
        return "decorate it with @qnb.func to call it from a kernel"
    if isinstance(value, list):
        return "make it a tuple (a constant the kernel can bake in), or pass it as an array"
    if isinstance(value, dict):
        return (
            "a dict is not a constant: make it a tuple, or an object (a dataclass, a "
            "SimpleNamespace) whose attributes the kernel reads"
        )
    if isinstance(value, np.ndarray) or any(hasattr(type(value), p) for p in _ARRAY_PROTOCOLS):
        return "pass it as a parameter"
    if issubclass(type(value), tuple):
        for index, item in enumerate(tuple.__iter__(value)):
            if canonical(item) is None:
                return (
                    f"its item [{index}] is {callable_name(item)}, which is no constant: make "
                    "every item a number, str, bool, None, dtype, enum member or tuple of these"
                )
    return (
        "it is neither a compile-time constant (a number, str, bool, None, dtype, enum "
        "member or tuple of these) nor an object whose attributes hold them: pass it as a "
        "parameter (qnb.Template for a compile-time value)"
    )


def callable_name(value) -> str:
    """How a message names what a captured value is."""
    if isinstance(value, types.MethodType):
        return f"a method of {describe(value.__self__)}"
    if isinstance(value, types.FunctionType):
        return "a function"
    if isinstance(value, types.BuiltinFunctionType):
        return "a builtin function"
    if isinstance(value, type):
        return f"the class {value.__module__}.{value.__qualname__}"
    return describe(value)


def object_name(value) -> str:
    """A configuration object's form in the key: its class (the attributes it is read
    for enter the key by their own paths)."""
    if isinstance(value, type):
        return f"class {value.__module__}.{value.__qualname__}"
    return describe(value)


def chain_node(parsed: ParsedFunction, chain: tuple[str, ...]):
    """The AST node where a captured chain is read first (in source order): the name or the
    attribute expression ``cfg.scale`` itself, not another read of the same name."""
    inner = set()
    found = []
    for node in ast.walk(parsed.tree):
        if isinstance(node, ast.Attribute):
            inner.add(id(node.value))
    for node in ast.walk(parsed.tree):
        if id(node) in inner or not isinstance(node, ast.Attribute | ast.Name):
            continue
        parts, base = [], node
        while isinstance(base, ast.Attribute):
            parts.append(base.attr)
            base = base.value
        if isinstance(base, ast.Name) and (base.id, *reversed(parts)) == tuple(chain):
            found.append(node)
    if not found:
        return parsed.tree
    return min(found, key=lambda n: (n.lineno, n.col_offset))


def intrinsic_name(value) -> str:
    """What an intrinsic is, for the cache key when a kernel reaches it under another name
    (``OP = max``, ``F = np.exp``): rebinding ``OP`` to ``min`` must change the key."""
    tag = getattr(value, "_qnb_intrinsic", None) or foreign_intrinsic(value)
    if isinstance(tag, str):
        return tag
    module = getattr(value, "__module__", None) or type(value).__module__
    qualname = getattr(value, "__qualname__", None) or getattr(value, "__name__", None)
    return f"{module}.{qualname}" if qualname else repr(value)


# Library functions whose result does not depend on their arguments alone (files, the
# process, uninitialised memory, random state, attributes of objects the key does not
# hold): a cache key cannot stand for their result.
_IMPURE_NAMES = frozenset(
    {
        "builtins.getattr", "builtins.hasattr", "builtins.setattr", "builtins.delattr",
        "builtins.open", "builtins.input", "builtins.eval", "builtins.exec",
        "builtins.compile", "builtins.__import__", "builtins.globals", "builtins.locals",
        "builtins.vars", "builtins.id", "builtins.hash", "builtins.breakpoint",
        "builtins.help", "builtins.exit", "builtins.quit", "builtins.dir",
        "numpy.load", "numpy.loadtxt", "numpy.genfromtxt", "numpy.fromfile",
        "numpy.fromregex", "numpy.memmap", "numpy.save", "numpy.savez",
        "numpy.savez_compressed", "numpy.savetxt", "numpy.empty", "numpy.empty_like",
    }
)  # fmt: skip


def library_name(value) -> str | None:
    """``module.qualname`` of a function (or class) of Python's builtins, ``math`` or NumPy
    whose result depends on its arguments alone, or None. The name must lead back to this
    very object, so one name never stands for two functions in a cache key."""
    if isinstance(value, np.ufunc):
        module, qualname = "numpy", value.__name__
    else:
        module = getattr(value, "__module__", None)
        qualname = getattr(value, "__qualname__", None) or getattr(value, "__name__", None)
    if not isinstance(module, str) or not isinstance(qualname, str):
        return None
    top = module.partition(".")[0]
    if top not in ("builtins", "math", "numpy") or module.startswith("numpy.random"):
        return None
    name = f"{module}.{qualname}"
    if name in _IMPURE_NAMES:
        return None
    try:
        found = importlib.import_module(module)
        for part in qualname.split("."):
            found = getattr(found, part)
    except (ImportError, AttributeError):
        return None
    return name if found is value else None


_BUILTIN_VALUES = tuple(getattr(builtins, n) for n in KERNEL_BUILTINS)
