"""Compile time: the one way lowering reads a value from a live object.

The cache key is built before lowering, from the names the parser saw (``captured``,
``source``). Lowering then meets values the parser could not see: a module passed to a
``@qnb.func`` (``m.SCALE``), a configuration object passed on or bound to a local name
(``c.block.m``), an enum member's property, a func reached as ``m.h(...)``, whatever a
``qnb.static(...)`` expression touches. Every such read goes through a :class:`Recorder`,
which

- answers a read the key already holds from the key's own snapshot (a compile uses exactly
  the values its key holds, however another thread rebinds them meanwhile);
- answers any other read once per compile (a second read of the same attribute gets the
  first one's value) and records it: where it was read (a path that names the object again
  in a later process: a module by name, a class by module and qualified name, an enum
  member by its class and name, else a captured name it is bound to, each followed by the
  attributes read on the way), and the canonical form of what it found (a func by its
  fingerprint: source and captured values);
- refuses, with :class:`QnbCaptureError`, a read it could not check again (an object it
  cannot name, a value it cannot encode).

What lowering computes with is never a live constant: a constant is handed over decoded
from its form (``constants.decode``: a subclass as its plain value, an enum member as
qnb's stand-in), so no method of the user's runs at compile time unkeyed; a configuration
object is handed over as an :class:`ObjectRef`, which lets only its attributes be read
(each read keyed by its path) and refuses every other use.

The recorded reads enter the key of the compiled entry (see ``Kernel._prepare``), and before
an entry is used they are read again from the live objects and must give the same forms: so
"what was read" and "what was keyed" are one list.
"""

from __future__ import annotations

import enum
import sys
import types

from qnb.dtypes import is_dtype_like
from qnb.errors import QnbCaptureError
from qnb.frontend.capture import (
    UNDEFINED,
    Raised,
    callable_name,
    capture_hint,
    describe,
    foreign_intrinsic,
    intrinsic_name,
    is_config_object,
    is_qnb_callable,
    library_name,
)
from qnb.frontend.constants import EnumClass, EnumMember, canonical, decodable, decode

# Values whose attributes depend on the value alone (its canonical form pins its type).
_PLAIN_TYPES = frozenset({int, float, bool, str, type(None), tuple, complex})
_EXACT_TYPES = frozenset({int, float, bool, str, type(None), complex})  # (tuples may hold more)
# How many leading parts of a path name its base object (the rest are attributes read).
_BASE_LENGTH = {"module": 2, "class": 3, "member": 4, "root": 3}


class ObjectRef:
    """A configuration object as lowering holds it: its attributes can be read (through
    the :class:`Recorder`, each read keyed by its path); any other use (a truth value,
    ``len``, a comparison, a call, arithmetic) is a :class:`QnbCaptureError`, since the key
    holds only the attributes read, never the object."""

    __slots__ = ("_qnb_label", "_qnb_object", "_qnb_path")

    def __init__(self, value, path: list, label: str):
        self._qnb_object, self._qnb_path, self._qnb_label = value, path, label

    def __getattr__(self, name):  # (lowering reads attributes through the Recorder only)
        raise AttributeError(name)

    def __repr__(self) -> str:
        return f"<configuration object {self._qnb_label} ({callable_name(self._qnb_object)})>"

    def _qnb_refuse(self, *args, **kwargs):
        label, value = self._qnb_label, self._qnb_object
        raise QnbCaptureError(
            f"the kernel uses {label!r} ({callable_name(value)}) as a value; a configuration "
            f"object is read for its attributes only ({label}.<attribute>, each keyed by its "
            "path and value), and the key holds nothing else of it: read the attribute that "
            "holds the value, or compute the value outside the kernel and pass it as a "
            "qnb.Template parameter"
        )

    def __call__(self, *args, **kwargs):
        label, value = self._qnb_label, self._qnb_object
        raise QnbCaptureError(
            f"the kernel calls {label!r} ({callable_name(value)}) at compile time; qnb cannot "
            "key what its code computes: compute the value outside the kernel and bind it "
            "to an attribute or a global, or pass it as a qnb.Template parameter"
        )

    __hash__ = object.__hash__


_REFUSED = (  # every other use of a configuration object: a value the key does not hold
    "__bool__",
    "__len__",
    "__iter__",
    "__contains__",
    "__getitem__",
    "__int__",
    "__float__",
    "__index__",
    "__complex__",
    "__eq__",
    "__ne__",
    "__lt__",
    "__le__",
    "__gt__",
    "__ge__",
    "__neg__",
    "__pos__",
    "__abs__",
    "__invert__",
    "__add__",
    "__radd__",
    "__sub__",
    "__rsub__",
    "__mul__",
    "__rmul__",
    "__truediv__",
    "__rtruediv__",
    "__floordiv__",
    "__rfloordiv__",
    "__mod__",
    "__rmod__",
    "__pow__",
    "__rpow__",
    "__matmul__",
    "__rmatmul__",
    "__and__",
    "__rand__",
    "__or__",
    "__ror__",
    "__xor__",
    "__rxor__",
    "__lshift__",
    "__rlshift__",
    "__rshift__",
    "__rrshift__",
    "__format__",
    "__reversed__",
    "__round__",
    "__trunc__",
    "__floor__",
    "__ceil__",
)
for _name in _REFUSED:
    setattr(ObjectRef, _name, ObjectRef._qnb_refuse)
del _name


class Recorder:
    """The compile-time reads of one compile. ``covered`` maps (id(object), attribute) to
    the value the key's snapshot read there; ``roots`` maps each unit to its captured
    roots (to name an object by a captured name); ``fingerprint(func)`` gives a func's form;
    ``root_forms`` maps each unit to the roots the key holds whole (their form), and
    ``upstream(parsed)`` gives a function's unit name and roots (``unit_of`` hands lowering
    those roots as it may compute with them)."""

    def __init__(self, covered=None, roots=None, fingerprint=None, root_forms=None, upstream=None):
        self.covered = covered or {}
        self._roots = roots or {}
        self._fingerprint = fingerprint
        self._root_forms = root_forms or {}
        self._upstream = upstream
        self._kernel_unit = next(iter(self._roots), None)  # (the kernel is read first)
        self.reads: dict[str, list] = {}  # label -> [path, attribute, form], in read order
        self.checks: list[Check] = []  # the in-process re-check of each read
        self._done: dict[tuple[int, str], object] = {}
        self._keep: list = []  # the objects read from, so their ids stay theirs
        self._live: dict[int, tuple] = {}  # id(decoded) -> (decoded, live object, path)
        self._refs: dict[tuple, ObjectRef] = {}
        self._views: dict[str, dict] = {}

    # ------------------------------------------------------------------ roots

    def unit_of(self, parsed) -> tuple[str, dict]:
        """(unit name, captured roots as lowering computes with them): a root the key holds
        whole is its decoded value, a configuration object an :class:`ObjectRef`."""
        name, roots = self._upstream(parsed)
        view = self._views.get(name)
        if view is None:
            view = self._views[name] = self._view(name, roots)
        return name, view

    def _view(self, unit: str, roots: dict) -> dict:
        keyed = self._root_forms.get(unit, {})
        view = {}
        for name, root in roots.items():
            form = keyed.get(name)
            path = ["root", unit, name]
            if form is not None and decodable(form) and not _exact(root):
                view[name] = self._decoded(form, root, name_path(root) or path)
            elif is_config_object(root):
                view[name] = self._ref(root, path)
            else:
                view[name] = root
        return view

    # ------------------------------------------------------------------ reads

    def attr(self, base, name: str):
        """``getattr(base, name)`` for the compiler (AttributeError if it has none)."""
        if isinstance(base, ObjectRef):
            return self._read(base._qnb_object, name, base._qnb_path)
        live = self._live.get(id(base))
        if live is not None and live[0] is base:  # a decoded value, read from what it holds
            if _decided_by_form(base, name):
                return _form_attribute(base, name)
            return self._read(live[1], name, live[2])
        if _decided_by_form(base, name) or _value_determined(base, name):
            return _form_attribute(base, name)
        if isinstance(base, EnumMember | EnumClass) or hasattr(type(base), "_qnb_form_name"):
            raise AttributeError(  # (a Template value: it is its canonical value alone)
                f"{_short(base)} has no attribute {name!r} (qnb computes with a "
                "compile-time value's canonical value: its class's own attributes are not read)"
            )
        return self._read(base, name, None)

    def _read(self, base, name: str, path: list | None):
        """A read of a live object's attribute: answered from the key's snapshot where it
        holds it, else read once and recorded (``path`` names ``base``; None: found by
        :meth:`path_of` where needed)."""
        found = self.covered.get((id(base), name), _MISSING)
        if found is not _MISSING:
            if found is UNDEFINED:
                raise AttributeError(f"{_short(base)} has no attribute {name!r}")
            return self._lowering_value(found, base, path, name)
        done = self._done.get((id(base), name), _MISSING)
        if done is _MISSING:
            path = path if path is not None else self.path_of(base, name)
            try:
                done = getattr(base, name)
            except AttributeError:
                done = UNDEFINED
            except Exception as exc:  # noqa: BLE001 - the user's property
                done = Raised(exc)
            if not is_config_object(done):  # (an object read on: its own reads are keyed)
                label = self.label_of(path, name)
                form = self.encode(done, path, name)
                self.reads[label] = [path, name, form]
                anchor = resolve(path[: _BASE_LENGTH[path[0]]], self._roots)
                self.checks.append(Check(anchor, [*path_attrs(path), name], form))
            self._done[(id(base), name)] = (done, path)
            self._keep.append(base)
        else:
            done, path = done
        if done is UNDEFINED:
            raise AttributeError(f"{_short(base)} has no attribute {name!r}")
        return self._lowering_value(done, base, path, name)

    def _lowering_value(self, value, base, path, name):
        """What lowering computes with for ``value``, read as ``base.name`` (``path``
        names ``base``, or is None)."""
        if isinstance(value, Raised):
            error = value.error
            where = self.label_of(path, name) if path is not None else name
            raise QnbCaptureError(
                f"reading {where!r} at compile time raised {type(error).__name__}: {error}"
            )
        if is_config_object(value):
            found = name_path(value)
            if found is None:
                found = [*(path if path is not None else self.path_of(base, name)), name]
            return self._ref(value, found)
        if _exact(value):
            return value
        try:
            form = canonical(value)
        except QnbCaptureError:
            form = None
        if form is None:
            return value  # a module, a func, an intrinsic: as it is
        here = name_path(value)
        if here is None:
            named = path if path is not None else self._path_or_none(base)
            here = None if named is None else [*named, name]
        return self._decoded(form, value, here)

    def _path_or_none(self, base):
        try:
            return self.path_of(base, "")
        except QnbCaptureError:
            return None

    def _decoded(self, form, live, path):
        """The value a form decodes to, linked to the live object it came from (for the
        reads its form does not decide: an enum member's property, a named tuple's method)."""
        decoded = decode(form)
        if path is not None and type(decoded) not in _PLAIN_TYPES:
            self._live[id(decoded)] = (decoded, live, path)
            self._keep.append(decoded)
        return decoded

    def _ref(self, value, path: list) -> ObjectRef:
        key = (id(value), tuple(path))
        ref = self._refs.get(key)
        if ref is None:
            ref = self._refs[key] = ObjectRef(value, path, spelled(path, self._kernel_unit))
            self._keep.append(value)
        return ref

    # ------------------------------------------------------------------ naming

    def encode(self, value, path=None, name=""):
        """The canonical form of a value read at compile time (raises QnbCaptureError for
        one the key cannot hold)."""
        return encode(value, self._fingerprint, lambda: self.label_of(path, name) if path else name)

    def label_of(self, path, name: str | None) -> str:
        """How a read shows in the key's ``captured`` component: a read of a captured name's
        attributes as the captured chain would (``cfg.block.m``, ``mod:f.cfg.scale`` in a
        func), any other as ``read module m.SCALE``."""
        parts = [*path[1:], *([name] if name else [])]
        if path[0] == "root":
            unit, rest = parts[0], parts[1:]
            text = ".".join(rest)
            return text if unit == self._kernel_unit else f"{unit}.{text}"
        return f"read {path[0]} {'.'.join(parts)}"

    def path_of(self, base, name: str, whole: bool = False) -> list:
        """A JSON path naming ``base`` again in a later process, or QnbCaptureError."""
        path = name_path(base)
        if path is not None:
            return path
        for unit, roots in self._roots.items():
            for root, value in roots.items():
                if value is base:
                    return ["root", unit, root]
        what = f"the value {name!r}" if whole else f"{name!r} of {describe(base)} {_short(base)}"
        raise QnbCaptureError(
            f"the kernel reads {what}, which qnb cannot find again by name to check it before "
            "reusing the compiled kernel (a class defined inside a function, an object built "
            "at run time): bind the value it holds to a global constant, or pass it as a "
            "qnb.Template parameter"
        )


_MISSING = object()


def _short(value) -> str:
    try:
        text = repr(value)
    except Exception:  # noqa: BLE001 - the user's __repr__
        text = f"<{describe(value)}>"
    return text if len(text) <= 60 else text[:57] + "..."


def spelled(path, kernel_unit=None) -> str:
    """How a message names the object a path leads to (``cfg.block``, ``m.cfg``)."""
    if path[0] == "root":
        text = ".".join(path[2:])
        return text if path[1] == kernel_unit else f"{path[1]}.{text}"
    if path[0] == "class":
        return ".".join([f"{path[1]}.{path[2]}", *path[3:]])
    return ".".join(path[1:])


def _exact(value) -> bool:
    """A constant that is its own decoded value: a number, str, bool or None of exactly
    that type, a NumPy number or dtype, a qnb dtype (lowering takes it as it is)."""
    return type(value) in _EXACT_TYPES or _value_determined_object(value) or is_dtype_like(value)


def _decided_by_form(value, name: str) -> bool:
    """Whether a decoded value's attribute follows from its form: a plain value's, a
    named tuple's fields and tuple methods, an enum member's name and value, an enum
    class's members."""
    kind = type(value)
    if kind in _PLAIN_TYPES:
        return True
    if getattr(kind, "_qnb_form_name", None) is not None:  # qnb's named tuple of a form
        return name in kind._fields or hasattr(tuple, name) or name in _NAMED_TUPLE_METHODS
    if isinstance(value, EnumMember):
        return name in ("name", "value", "_name_", "_value_")
    if isinstance(value, EnumClass):
        return name in value.__members__ or name in ("__members__", "__name__", "__qualname__")
    return False


_NAMED_TUPLE_METHODS = ("_fields", "_asdict", "_replace", "_make", "_field_defaults")


def _form_attribute(value, name: str):
    """A decided attribute (an enum class's member by its name, whatever else the
    stand-in holds under that name)."""
    if isinstance(value, EnumClass) and name in value.__members__:
        return value.__members__[name]
    return getattr(value, name)


def _value_determined(base, name: str) -> bool:
    """True when ``base.name`` depends on nothing the key does not already hold: the
    language's own objects, and NumPy's and qnb's values (a dtype, a NumPy scalar)."""
    if getattr(base, "_qnb_intrinsic", None) is not None:
        return True
    if isinstance(base, types.ModuleType):
        module = base.__name__
        return module == "qnb" or module.startswith("qnb.")
    return _value_determined_object(base)


def _value_determined_object(value) -> bool:
    if isinstance(value, types.ModuleType | type):
        return False
    module = getattr(type(value), "__module__", "") or ""
    return module == "numpy" or module.startswith("qnb.")  # NumPy scalars, dtypes


def encode(value, fingerprint=None, where=lambda: "the value"):
    if value is UNDEFINED:
        return ["missing"]
    if isinstance(value, types.ModuleType):
        return ["module", value.__name__]
    if is_qnb_callable(value):
        parsed = value.parsed  # its source (for the key's `source`) and what it reaches
        digest = fingerprint(value) if fingerprint is not None else None
        return ["func", parsed.qualname, parsed.source, digest]
    if getattr(value, "_qnb_intrinsic", None) is not None or foreign_intrinsic(value):
        return ["intrinsic", intrinsic_name(value)]
    if isinstance(value, Raised):
        error = value.error
        raise QnbCaptureError(
            f"reading {where()} at compile time raised {type(error).__name__}: {error}"
        )
    try:
        form = canonical(value)
    except QnbCaptureError as err:
        raise QnbCaptureError(f"{where()}: {err.message}") from None
    if form is not None:
        return form
    library = library_name(value)
    if library is not None:
        return ["library", library]
    raise QnbCaptureError(
        f"the kernel reads {where()} at compile time, which is {callable_name(value)} "
        f"{_short(value)}; {capture_hint(value, where())}"
    )


def name_path(base) -> list | None:
    """["module", name] / ["class", module, qualname] / ["member", module, qualname, name]
    when that name leads back to this very object in this process, else None."""
    if isinstance(base, types.ModuleType):
        name = base.__name__
        return ["module", name] if sys.modules.get(name) is base else None
    if isinstance(base, enum.Enum):
        owner = name_path(type(base))
        if owner is None or type(base).__members__.get(base._name_) is not base:
            return None
        return ["member", owner[1], owner[2], base._name_]
    if isinstance(base, type):
        module, qualname = getattr(base, "__module__", None), getattr(base, "__qualname__", "")
        if not isinstance(module, str) or not isinstance(qualname, str) or "<" in qualname:
            return None
        return ["class", module, qualname] if _find(module, qualname) is base else None
    return None


def _find(module: str, qualname: str):
    found = sys.modules.get(module)
    for part in qualname.split("."):
        found = getattr(found, part, None) if found is not None else None
    return found


def path_attrs(path) -> list:
    """The attributes a path reads past the object its kind names."""
    return list(path[_BASE_LENGTH.get(path[0], len(path)) :])


def resolve(path, roots) -> object:
    """The live object a path names (UNDEFINED if it no longer names one)."""
    kind = path[0]
    if kind == "module":
        found = sys.modules.get(path[1], UNDEFINED)
    elif kind == "class":
        found = _find(path[1], path[2])
        found = found if isinstance(found, type) else UNDEFINED
    elif kind == "member":
        owner = _find(path[1], path[2])
        members = getattr(owner, "__members__", None) if isinstance(owner, type) else None
        found = members.get(path[3], UNDEFINED) if members is not None else UNDEFINED
    elif kind == "root" and len(path) >= 3:
        found = roots.get(path[1], {}).get(path[2], UNDEFINED)
    else:
        return UNDEFINED
    return _walk(found, path_attrs(path))


def _walk(value, attrs):
    """``value.a.b…`` (UNDEFINED where an attribute is missing or reading it fails)."""
    for attr in attrs:
        if value is UNDEFINED:
            return UNDEFINED
        try:
            value = getattr(value, attr)
        except Exception:  # noqa: BLE001 - gone, or a property that fails now
            return UNDEFINED
    return value


class Check:
    """One read to re-check before a compiled kernel is reused in this process: the
    object its path names (``anchor``), the attributes read from it, the form found.

    A func found there is re-checked by identity and the snapshot of its own captured
    names (the same object with the same captured values has the same fingerprint), so a
    launch does not recompute a func's fingerprint each time."""

    __slots__ = ("anchor", "attrs", "form", "_func")

    def __init__(self, anchor, attrs: list, form):
        self.anchor, self.attrs, self.form = anchor, attrs, form
        self._func = None
        if form[0] == "func":
            value = _walk(anchor, attrs)
            if is_qnb_callable(value):
                self._func = (value, value.captures.snapshot())

    def holds(self) -> bool:
        value = self.anchor
        last = len(self.attrs) - 1
        for index, attr in enumerate(self.attrs):
            try:
                value = getattr(value, attr)
            except AttributeError:
                if index < last:
                    return False
                value = UNDEFINED
            except Exception:  # noqa: BLE001 - a property that fails now: not the same read
                return False
        func = self._func
        if func is not None and value is func[0] and value.captures.snapshot() == func[1]:
            return True
        try:
            form = encode(value, _FINGERPRINTS[0] if _FINGERPRINTS else None)
        except QnbCaptureError:
            return False
        if form != self.form:
            return False
        if is_qnb_callable(value):
            self._func = (value, value.captures.snapshot())
        return True


def recheck(checks) -> bool:
    """True when every read still gives its form (the launch memo's check, in this
    process, from the very objects the compile's paths named)."""
    return all(check.holds() for check in checks)


def evaluate(reads, roots, fingerprint):
    """The recorded reads' forms now (label → form, and their :class:`Check` records), for
    a lookup of the entry they keyed; None when a path no longer names an object or a
    value can no longer be keyed."""
    forms, checks = {}, []
    for label, path, attr in reads:
        base = resolve(path, roots)
        if base is UNDEFINED:
            return None
        try:
            value = getattr(base, attr)
        except AttributeError:
            value = UNDEFINED
        except Exception:  # noqa: BLE001 - a property failing now: compile and report
            return None
        try:
            form = encode(value, fingerprint)
        except QnbCaptureError:
            return None
        forms[label] = form
        anchor = resolve(path[: _BASE_LENGTH.get(path[0], len(path))], roots)
        checks.append(Check(anchor, [*path_attrs(path), attr], form))
    return forms, checks


# Set by qnb.kernel: how a func's fingerprint is computed (source and captured values).
_FINGERPRINTS: list = []
