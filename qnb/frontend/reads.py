"""Compile time: the one way lowering reads a value from a live object.

The cache key is built before lowering, from the names the parser saw (``captured``,
``source``). Lowering then meets values the parser could not see: a module passed to a
``@qnb.func`` (``m.SCALE``), a class bound to a local name, an enum member's property, a
func reached as ``m.h(...)``, whatever a ``qnb.static(...)`` expression touches. Every such
read goes through a :class:`Recorder`, which

- answers a read the key already holds from the key's own snapshot (a compile uses exactly
  the values its key holds, however another thread rebinds them meanwhile);
- answers any other read once per compile (a second read of the same attribute gets the
  first one's value) and records it: where it was read (a path that names the object again
  in a later process: a module by name, a class by module and qualified name, an enum
  member by its class and name, else a captured name it is bound to), and the canonical
  form of what it found (a func by its fingerprint: source and captured values);
- refuses, with :class:`QnbCaptureError`, a read it could not check again (an object it
  cannot name, a value it cannot encode).

The recorded reads enter the key of the compiled entry (see ``Kernel._prepare``), and before
an entry is used they are read again from the live objects and must give the same forms: so
"what was read" and "what was keyed" are one list.
"""

from __future__ import annotations

import enum
import sys
import types

from qnb.errors import QnbCaptureError
from qnb.frontend.capture import (
    UNDEFINED,
    canonical,
    describe,
    foreign_intrinsic,
    intrinsic_name,
    is_qnb_callable,
    library_name,
)

# Values whose attributes depend on the value alone (its canonical form pins its type).
_PLAIN_TYPES = frozenset({int, float, bool, str, type(None), tuple, complex})


class Recorder:
    """The compile-time reads of one compile. ``covered`` maps (id(object), attribute) to
    the value the key's snapshot read there; ``roots(unit)`` gives a unit's captured roots
    (to name an object by a captured name); ``fingerprint(func)`` gives a func's form."""

    def __init__(self, covered=None, roots=None, fingerprint=None):
        self.covered = covered or {}
        self._roots = roots or {}
        self._fingerprint = fingerprint
        self.reads: dict[str, list] = {}  # label -> [path, attribute, form], in read order
        self.checks: list[tuple] = []  # (object, attribute, form): the in-process re-check
        self._done: dict[tuple[int, str], object] = {}
        self._keep: list = []  # the objects read from, so their ids stay theirs

    def attr(self, base, name: str):
        """``getattr(base, name)`` for the compiler (AttributeError if it has none)."""
        found = self.covered.get((id(base), name), _MISSING)
        if found is not _MISSING:
            if found is UNDEFINED:
                raise AttributeError(f"{_short(base)} has no attribute {name!r}")
            return found
        if _value_determined(base, name):
            return getattr(base, name)
        done = self._done.get((id(base), name), _MISSING)
        if done is _MISSING:
            path = self.path_of(base, name)
            try:
                done = getattr(base, name)
            except AttributeError:
                done = UNDEFINED
            form = self.encode(done, path, name)
            label = label_of(path, name)
            self.reads[label] = [path, name, form]
            self.checks.append((base, name, form))
            self._done[(id(base), name)] = done
            self._keep.append(base)
        if done is UNDEFINED:
            raise AttributeError(f"{_short(base)} has no attribute {name!r}")
        return done

    def encode(self, value, path=None, name=""):
        """The canonical form of a value read at compile time (raises QnbCaptureError for
        one the key cannot hold)."""
        return encode(value, self._fingerprint, lambda: label_of(path, name) if path else name)

    def path_of(self, base, name: str) -> list:
        """A JSON path naming ``base`` again in a later process, or QnbCaptureError."""
        path = name_path(base)
        if path is not None:
            return path
        for unit, roots in self._roots.items():
            for root, value in roots.items():
                if value is base:
                    return ["root", unit, root]
        raise QnbCaptureError(
            f"the kernel reads {name!r} of {describe(base)} {_short(base)}, which qnb cannot "
            "find again by name to check it before reusing the compiled kernel (a class "
            "defined inside a function, an object built at run time): bind the value it "
            "holds to a global constant, or pass it as a qnb.Template parameter"
        )


_MISSING = object()


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _value_determined(base, name: str) -> bool:
    """True when ``base.name`` depends on nothing the key does not already hold: the
    language's own objects, and constants whose canonical form fixes their type."""
    kind = type(base)
    if kind in _PLAIN_TYPES:
        return True
    if getattr(base, "_qnb_intrinsic", None) is not None:
        return True
    if isinstance(base, types.ModuleType):
        module = base.__name__
        return module == "qnb" or module.startswith("qnb.")
    if isinstance(base, tuple):  # a named tuple: its fields (in its form); else recorded
        return name in getattr(kind, "_fields", ())
    if isinstance(base, enum.Enum):
        return name in ("name", "value")
    module = getattr(kind, "__module__", "")
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
    try:
        form = canonical(value)
    except QnbCaptureError as err:
        raise QnbCaptureError(f"{where()}: {err.message}") from None
    if form is not None:
        return form
    if isinstance(value, type):
        path = name_path(value)
        return ["class", ".".join(path[1:]) if path else describe(value)]
    library = library_name(value)
    if library is not None:
        return ["library", library]
    raise QnbCaptureError(
        f"the kernel reads {where()} at compile time, which is {describe(value)} {_short(value)}: "
        "not a compile-time constant qnb can key (bind a number, tuple, enum member, module "
        "or class to it, or pass the value as a qnb.Template parameter)"
    )


def name_path(base) -> list | None:
    """["module", name] / ["class", module, qualname] / ["member", module, qualname, name]
    when that name leads back to this very object in this process, else None."""
    if isinstance(base, types.ModuleType):
        name = base.__name__
        return ["module", name] if sys.modules.get(name) is base else None
    if isinstance(base, enum.Enum):
        owner = name_path(type(base))
        if owner is None or type(base).__members__.get(base.name) is not base:
            return None
        return ["member", owner[1], owner[2], base.name]
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


def resolve(path, roots) -> object:
    """The live object a path names (UNDEFINED if it no longer names one)."""
    kind = path[0]
    if kind == "module":
        return sys.modules.get(path[1], UNDEFINED)
    if kind == "class":
        found = _find(path[1], path[2])
        return found if isinstance(found, type) else UNDEFINED
    if kind == "member":
        owner = _find(path[1], path[2])
        members = getattr(owner, "__members__", None) if isinstance(owner, type) else None
        return members.get(path[3], UNDEFINED) if members is not None else UNDEFINED
    if kind == "root":
        return roots.get(path[1], {}).get(path[2], UNDEFINED)
    return UNDEFINED


def label_of(path, name: str) -> str:
    """How a read shows in the key's ``captured`` component: ``read module cfg.SCALE``."""
    return f"read {path[0]} {'.'.join(path[1:])}.{name}"


def recheck(checks) -> bool:
    """True when every (object, attribute, form) still reads as that form (the launch memo's
    check, in this process, against the very objects the compile read)."""
    for base, name, form in checks:
        try:
            value = getattr(base, name)
        except AttributeError:
            value = UNDEFINED
        except Exception:  # noqa: BLE001 - a property that fails now: not the same read
            return False
        try:
            if encode(value, _FINGERPRINTS[0] if _FINGERPRINTS else None) != form:
                return False
        except QnbCaptureError:
            return False
    return True


# Set by qnb.kernel: how a func's fingerprint is computed (source and captured values).
_FINGERPRINTS: list = []
