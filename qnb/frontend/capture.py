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

import builtins
import enum
import importlib
import math
import sys
import types
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from qnb.dtypes import DType, as_dtype, is_dtype_like
from qnb.errors import QnbCaptureError
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
    np.exp: "exp",
    np.log: "log",
    np.sqrt: "sqrt",
    np.abs: "abs",
    np.absolute: "abs",
    np.maximum: "maximum",
    np.minimum: "minimum",
    np.where: "where",
    # math.floor/ceil return ints in Python, so only NumPy's (float) floor/ceil are twins.
    **{getattr(math, name): name for name in ("log2", "sin", "cos", "tanh")},
    **{getattr(np, name): name for name in ("exp2", "log2", "sin", "cos", "tanh", "floor", "ceil")},
}


class CaptureKind(enum.Enum):
    """What a captured value is to the compiler."""

    CONST = "const"  # a compile-time constant: its canonical form enters the key
    NAMESPACE = "namespace"  # a module: the kernel reads its attributes by name
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
    value: object  # the value at the chain's end (as far as modules and enums lead)
    steps: list  # the (object, attribute, value) reads the walk made


def foreign_intrinsic(value) -> str | None:
    try:
        return _FOREIGN_INTRINSICS.get(value)
    except TypeError:  # unhashable
        return None


def is_qnb_callable(value) -> bool:
    """A @qnb.func or kernel: it enters the key by its own source and captures."""
    return isinstance(value, QnbFunction)


def _walk_chain(root, chain: tuple[str, ...]):
    """Follow a chain through modules (and Enum classes) to the value the kernel uses."""
    value = root
    for attr in chain[1:]:
        if _is_namespace(value):
            value = getattr(value, attr, UNDEFINED)
        else:
            break
    return value


def _is_namespace(value) -> bool:
    """A module or an Enum class: a chain through it reaches an attribute's value, not
    the object itself (``_walk_chain``)."""
    return isinstance(value, types.ModuleType) or (
        isinstance(value, type) and issubclass(value, enum.Enum)
    )


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
                if isinstance(value, types.ModuleType) or (
                    isinstance(value, type) and issubclass(value, enum.Enum)
                ):
                    found = getattr(value, attr, UNDEFINED)
                    steps.append((value, attr, found))
                    value = found
                else:
                    break
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
    # the chain does not walk, ``Tile16.full`` or ``cfg.N``: not a module's or an Enum
    # class's, and not a func, whose own captures may change) or the qnb module, the
    # snapshot depends only on which objects the names are bound to, so "the same objects
    # as at the last hit" is a cheaper test of "the same snapshot". (What lowering reads
    # past the roots, ``cfg.N``, is the launch memo's re-checked reads, on either path.)

    def plain_roots(self) -> tuple | None:
        """One read of the root names (in ``_names`` order), or None where the snapshot
        depends on more than which objects they are."""
        qnb_module = _qnb_module()
        roots = []
        for name, cell, whole in self._names:
            root = self._root(name, cell)
            if root is not qnb_module and (
                isinstance(root, QnbFunction) or (not whole and _is_namespace(root))
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


# Types whose ``==`` already means "the same compile-time value" once the types match.
_EQUAL_MEANS_SAME = frozenset({int, bool, str, type(None), types.ModuleType, types.FunctionType})
_FLOATS = (float, np.floating)


def _exact(value):
    """The snapshot's token for ``value`` (its type is kept beside it): equal to
    another token only when the values have the same type at every level (inside
    tuples too) and, for floats, the same bits.

    ``==`` alone is too loose for a cache: ``0.0 == -0.0``, ``(1,) == (1.0,)`` and
    ``(True,) == (1,)`` although each pair compiles differently, and ``nan != nan``
    would miss the launch memo every time."""
    if isinstance(value, tuple):  # a named tuple too: its items keep their types
        return tuple([(type(item), _exact(item)) for item in value])
    if isinstance(value, _FLOATS) and (value != value or value == 0):
        # Equal floats other than zeros and NaNs have the same bits; those two are
        # told apart by their exact text (the one canonical() stores).
        return float(value).hex()
    return value


class _Unhashable:
    def __eq__(self, other):
        return False

    def __hash__(self):
        return 0


_NUMPY_NUMBERS = (np.bool_, np.integer, np.floating)


# How deeply tuples may nest in a captured or Template value: far below Python's recursion
# limit and the depth a cache entry on disk may have (``store.MAX_COMPONENT_DEPTH``: each
# tuple level is two JSON levels), so every key qnb writes reads back in a later process.
MAX_TUPLE_DEPTH = 32


def too_deep(value, depth: int = 0) -> bool:
    """True when ``value`` holds tuples nested deeper than ``MAX_TUPLE_DEPTH`` (iteratively:
    a value nested thousands deep must not overflow the stack here either)."""
    stack = [(value, 0)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, tuple):
            if level >= MAX_TUPLE_DEPTH:
                return True
            stack.extend((inner, level + 1) for inner in item)
    return False


def nesting_error(what: str) -> QnbCaptureError:
    return QnbCaptureError(
        f"{what} is a tuple nested more than {MAX_TUPLE_DEPTH} levels deep; a compile-time "
        "value cannot nest deeper (flatten it, or pass the data as an array)"
    )


def canonical(value):
    """The JSON-able canonical form of a compile-time constant, or None if it is not one.

    This is the one encoding of a compile-time value (captured names, Template values,
    the values lowering reads): :func:`decode` turns a form back into the value the
    compiler uses, and :func:`display` shows it; nothing is keyed by ``repr``. A tuple
    nested deeper than ``MAX_TUPLE_DEPTH`` raises :class:`QnbCaptureError`."""
    if isinstance(value, tuple) and too_deep(value):
        raise nesting_error("the value")
    return _canonical(value)


def _canonical(value):
    if value is None:
        return ["none"]
    if isinstance(value, _NUMPY_NUMBERS):
        return _numpy_canonical(value)
    if isinstance(value, bool):
        return ["bool", value]
    if isinstance(value, enum.Enum):
        kind = type(value)
        member_value = _canonical(value.value)
        if member_value is None and value.value is not None:  # Enum('A', [list]): not a
            return None  # constant; qnb.static(M.value[0]) could read what the key lacks
        return ["enum", f"{kind.__module__}.{kind.__qualname__}.{value.name}", member_value]
    if isinstance(value, int):
        return ["int", int(value)]
    if isinstance(value, float):
        return ["float", float(value).hex()]
    if isinstance(value, str):
        return ["str", value]
    if isinstance(value, DType):
        return ["dtype", value.name]
    if is_dtype_like(value):
        try:
            return ["dtype", as_dtype(value).name]
        except TypeError:
            return ["numpy-dtype", str(np.dtype(value))]
    if isinstance(value, tuple):
        items = [_canonical(v) for v in value]
        if any(i is None for i in items):
            return None
        if type(value) is not tuple:  # a named tuple: its fields are read by name
            fields = getattr(type(value), "_fields", None)
            if not isinstance(fields, tuple) or not all(isinstance(f, str) for f in fields):
                return None
            kind = type(value)
            return ["namedtuple", f"{kind.__module__}.{kind.__qualname__}", list(fields), items]
        return ["tuple", items]
    return None


def decode(form):
    """The compile-time value a canonical form stands for: what lowering computes with, so
    a compile uses exactly the value its key holds (a float subclass is its float, a
    named tuple a plain tuple of its items; a NumPy number keeps its type)."""
    tag = form[0]
    if tag == "none":
        return None
    if tag in ("bool", "int", "str"):
        return form[1]
    if tag == "float":
        return float.fromhex(form[1])
    if tag == "tuple":
        return tuple(decode(item) for item in form[1])
    if tag == "namedtuple":
        return tuple(decode(item) for item in form[3])
    if tag == "dtype":
        return as_dtype(form[1])
    if tag == "numpy-dtype":
        return np.dtype(form[1])
    if tag.startswith("np."):
        kind = getattr(np, tag[3:])
        payload = form[1]
        if isinstance(payload, str) and not issubclass(kind, np.longdouble | np.clongdouble):
            return kind(float.fromhex(payload))
        return kind(payload)
    raise ValueError(f"no decoding for a {tag!r} form")


def display(form) -> str:
    """A canonical form as Python writes the value: exact, so two forms never show alike."""
    from qnb.cache.key import _render

    return _render(form)


def _numpy_canonical(value):
    """A NumPy number names its type: ``qnb.static`` computes in that type
    (``np.float32(1.0) + 1e-9 == 1.0``), so it is not the Python number of equal value."""
    tag = "np." + type(value).__name__
    if isinstance(value, np.bool_):
        return [tag, bool(value)]
    if isinstance(value, np.integer):
        return [tag, int(value)]
    if value.itemsize > 8:  # longer than a Python float: its shortest exact decimal text
        return [tag, np.format_float_scientific(value, unique=True)]
    return [tag, float(value).hex()]


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
    if chain in owner.static_chains and callable(value):
        library = library_name(value)
        if library is not None:
            return Classified(CaptureKind.CONST, ["library", library])
        raise QnbCaptureError(
            f"kernel {owner.name!r} uses {name!r} ({describe(value)}) inside qnb.static(...); "
            "only functions of Python's builtins, math and NumPy whose result depends on "
            "their arguments alone can run there (the cache key names them, and cannot "
            "follow what another function computes): compute the value outside the kernel "
            "and capture it, or pass it as a qnb.Template parameter"
        )
    if isinstance(value, types.FunctionType | types.BuiltinFunctionType):
        hint = "decorate it with @qnb.func to call it from a kernel"
    elif isinstance(value, list):
        hint = "make it a tuple (a constant the kernel can bake in), or pass it as an array"
    elif isinstance(value, np.ndarray):
        hint = "pass it as a parameter"
    elif len(chain) > 1 or not isinstance(value, type):
        hint = (
            "bind the value it holds to a global constant, pass it as a parameter "
            "(qnb.Template for a compile-time value), or pass an array"
        )
    else:
        hint = "pass it as a parameter"
    raise QnbCaptureError(
        f"kernel {owner.name!r} reads {name!r} ({describe(value)}) from the enclosing scope; {hint}"
    )


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
