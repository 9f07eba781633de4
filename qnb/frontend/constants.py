"""Compile-time constants: their one canonical form, and what each form means.

This module is the one owner of the encoding every compile-time value goes through
(captured names, Template values, the values lowering reads past them):

- :func:`canonical` (encode): a JSON-able form, from the value's *plain* parts only. A
  subclass of ``str``, ``int``, ``float`` or ``tuple`` is read through the base type's
  own methods (``str.__str__``, ``int.__int__``, ``tuple.__getitem__`` …), so what its
  class overrides (``__repr__``, ``__eq__``, ``__hash__``, ``__len__``, ``__getitem__``,
  ``__int__``) never reaches a key: ``class Name(str)`` with a constant ``repr`` gives
  ``["str", "ab"]`` and ``["str", "abcd"]``.
- :func:`decode`: the value a compile computes with, made from the form alone, so a
  compile uses exactly what its key holds: a subclass is its plain value, a named tuple
  a named tuple of qnb's own (its fields, none of its class's methods), an enum member
  or class a stand-in of qnb's (:class:`EnumMember`, :class:`EnumClass`) with the
  member's name and plain value and the standard behaviour of its kind (an ``IntEnum``
  member computes as its int). A captured constant's own methods never run at compile
  time, so nothing the key does not hold can change what is compiled.
- :func:`display`: the form as Python writes the value (``2.0``, ``'ab'``, ``(1, 2)``,
  ``Point(x=1, y=2)``, ``<Mode.FAST: 1>``, a dtype as ``str`` prints it: ``f32``,
  ``float32``), never a hex float or a tagged list; every
  display of a key or a reason (events, ``explain``, ``qnb cache``, ``--cache-detail``,
  CacheView) goes through it. ``exact=True`` adds what tells two look-alike forms apart
  (an enum's module), for a reason whose two sides would otherwise read the same.

The forms lowering's reads add (a module, a func, a library function, an attribute that
is missing) are listed in :data:`READ_TAGS`; they are keyed, and shown, here too.
"""

from __future__ import annotations

import collections
import enum
import json

import numpy as np

from qnb.dtypes import DType, as_dtype, is_dtype_like
from qnb.errors import QnbCaptureError

# How deeply tuples may nest in a captured or Template value: far below Python's recursion
# limit and the depth a cache entry on disk may have (``store.MAX_COMPONENT_DEPTH``: each
# tuple level is two JSON levels), so every key qnb writes reads back in a later process.
MAX_TUPLE_DEPTH = 32

# The tags of forms that lowering's reads record besides constants (see qnb.frontend.reads).
READ_TAGS = ("module", "func", "intrinsic", "library", "missing", "undefined", "object")

# NumPy's scalar types, exactly: a subclass of one is no constant (its arithmetic is its own).
_NUMPY_SCALARS = frozenset(
    t for t in set(np.sctypeDict.values()) if issubclass(t, np.bool_ | np.integer | np.floating)
)


def too_deep(value, depth: int = 0) -> bool:
    """True when ``value`` holds tuples nested deeper than ``MAX_TUPLE_DEPTH`` (iteratively:
    a value nested thousands deep must not overflow the stack here either)."""
    stack = [(value, 0)]
    while stack:
        item, level = stack.pop()
        if issubclass(type(item), tuple):
            if level >= MAX_TUPLE_DEPTH:
                return True
            stack.extend((inner, level + 1) for inner in _items(item))
    return False


def nesting_error(what: str) -> QnbCaptureError:
    return QnbCaptureError(
        f"{what} is a tuple nested more than {MAX_TUPLE_DEPTH} levels deep; a compile-time "
        "value cannot nest deeper (flatten it, or pass the data as an array)"
    )


def _items(value: tuple) -> list:
    """A tuple's items as ``tuple`` itself stores them (a subclass's ``__iter__`` or
    ``__getitem__`` never runs)."""
    return [tuple.__getitem__(value, i) for i in range(tuple.__len__(value))]


# ---------------------------------------------------------------------------- encode


def canonical(value):
    """The JSON-able canonical form of a compile-time constant, or None if it is not one.
    A tuple nested deeper than ``MAX_TUPLE_DEPTH`` raises :class:`QnbCaptureError`."""
    if issubclass(type(value), tuple) and too_deep(value):
        raise nesting_error("the value")
    return _canonical(value)


def _canonical(value):
    kind = type(value)  # (never ``isinstance``: a ``__class__`` property can claim any type)
    if value is None:
        return ["none"]
    if kind in _NUMPY_SCALARS:
        return _numpy_canonical(value)
    if issubclass(kind, np.generic):
        return None  # a subclass of a NumPy scalar type
    if kind is bool:
        return ["bool", value]
    if issubclass(kind, enum.Enum):
        return _member_form(value)
    if issubclass(kind, int):
        return ["int", int.__int__(value)]
    if issubclass(kind, float):
        return ["float", float.hex(float.__float__(value))]
    if issubclass(kind, str):
        return ["str", str.__str__(value)]
    if issubclass(kind, DType):
        return ["dtype", value.name]
    if issubclass(kind, tuple):
        return _tuple_form(value)
    if isinstance(value, type) and issubclass(value, enum.Enum):
        return _enum_class_form(value)
    if is_dtype_like(value):
        try:
            return ["dtype", as_dtype(value).name]
        except TypeError:
            return ["numpy-dtype", str(np.dtype(value))]
    return None


def _tuple_form(value: tuple):
    items = [_canonical(item) for item in _items(value)]
    if any(item is None for item in items):
        return None
    if getattr(type(value), "_fields", None) is None:  # a tuple, or a subclass: its items
        return ["tuple", items]
    fields = _named_fields(value)
    if fields is None:
        return None  # fields that do not name its items: no named tuple qnb can rebuild
    return ["namedtuple", _qualified(type(value)), list(fields), items]


def _named_fields(value: tuple) -> tuple[str, ...] | None:
    """A named tuple's field names, where it declares a valid set for its items."""
    fields = getattr(type(value), "_fields", None)
    if not isinstance(fields, tuple):
        return None
    names = [str.__str__(f) if issubclass(type(f), str) else None for f in fields]
    if len(names) != tuple.__len__(value) or len(set(names)) != len(names):
        return None
    if not all(n and n.isidentifier() and not n.startswith("_") for n in names):
        return None
    return tuple(names)


def _enum_kind(kind: type) -> str | None:
    """How an enum's members compute: as their int, str or float (a mixin), as a flag, or as
    plain members (None where the mixin is another type: qnb has no stand-in for it)."""
    mixin = getattr(kind, "_member_type_", object)
    if mixin is object:
        return "flag" if issubclass(kind, enum.Flag) else "enum"
    if mixin is int:
        return "int"
    if mixin is str:
        return "str"
    if mixin is float:
        return "float"
    return None


def _member_form(member):
    kind = type(member)
    enum_kind = _enum_kind(kind)
    value = object.__getattribute__(member, "_value_")
    name = object.__getattribute__(member, "_name_")
    value_form = _canonical(value)
    if enum_kind is None or value_form is None or not isinstance(name, str):
        return None  # Enum('A', [list]): not a constant; qnb.static(M.value[0]) could read
    return ["enum", f"{_qualified(kind)}.{name}", value_form, enum_kind]


def _enum_class_form(kind: type):
    """An enum class as a value (``len(Mode)``, ``for m in Mode``): keyed by every member."""
    enum_kind = _enum_kind(kind)
    if enum_kind is None:
        return None
    members = []
    for name, member in kind.__members__.items():
        form = _member_form(member)
        if form is None:
            return None
        members.append([name, form[2]])
    return ["enum-class", _qualified(kind), enum_kind, members]


def _qualified(kind: type) -> str:
    return f"{kind.__module__}.{kind.__qualname__}"


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


# ---------------------------------------------------------------------------- decode


def decode(form):
    """The compile-time value a canonical form stands for: what lowering computes with, so
    a compile uses exactly the value its key holds. Raises ValueError for a form that is no
    constant's."""
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
        return named_tuple_class(form[1], tuple(form[2]))(*(decode(item) for item in form[3]))
    if tag == "enum":
        return _interned(form, _new_member)
    if tag == "enum-class":
        return _interned(form, EnumClass)
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


_named_tuple_classes: dict[tuple, type] = {}


def named_tuple_class(qualname: str, fields: tuple[str, ...]) -> type:
    """qnb's own named tuple class for a form's name and fields (one per pair): its fields
    read by name and index, and nothing of the user's class."""
    found = _named_tuple_classes.get((qualname, fields))
    if found is None:
        found = collections.namedtuple(qualname.rsplit(".", 1)[-1], fields)
        found.__qualname__ = qualname.rsplit(".", 1)[-1]
        found._qnb_form_name = qualname
        _named_tuple_classes[(qualname, fields)] = found
    return found


# Decoded enum stand-ins, one per form: ``MODE is Mode.FAST`` folds as in Python however
# the two were reached. (Bounded: a process that meets ever new enum forms forgets old ones.)
_INTERNED: dict[str, object] = {}
_MAX_INTERNED = 1 << 16


def _interned(form, make):
    text = json.dumps(form, sort_keys=True, separators=(",", ":"))
    found = _INTERNED.get(text)
    if found is None:
        if len(_INTERNED) >= _MAX_INTERNED:
            _INTERNED.clear()
        found = _INTERNED[text] = make(form)
    return found


class _MemberType(type):
    """The class of a decoded enum member: it holds that member only, so it refuses what
    would need the enum's other members (they are not in the member's key)."""

    def _refuse(cls, *args):
        raise QnbCaptureError(
            "qnb keys an enum member by its own name and value, not by its class's other "
            "members; to count or iterate the enum, read the enum class itself (len(Mode), "
            "for m in qnb.static(Mode)), which enters the key with every member"
        )

    __len__ = __iter__ = __contains__ = __getitem__ = __call__ = _refuse


class EnumMember(metaclass=_MemberType):
    """An enum member as a compile computes with it: ``name``, ``value`` (plain) and the
    behaviour of its kind (``_qnb_form``: its canonical form)."""

    def _set(self, form, value):
        self._qnb_form, self.name, self.value = form, form[1].rsplit(".", 1)[-1], value
        self._value_, self._name_ = value, self.name
        self._qnb_enum = form[1].rsplit(".", 2)[-2] if form[1].count(".") >= 1 else form[1]

    def __repr__(self) -> str:
        return f"<{self._qnb_enum}.{self.name}: {self.value!r}>"

    def __str__(self) -> str:
        return f"{self._qnb_enum}.{self.name}"

    def __reduce__(self):
        raise TypeError("a decoded enum member is not pickled")


class _PlainMember(EnumMember):
    __hash__ = object.__hash__  # one object per form: equal means the same member


class _FlagMember(_PlainMember):
    def __bool__(self) -> bool:
        return bool(self.value)


class _IntMember(EnumMember, int):
    __repr__ = EnumMember.__repr__


class _StrMember(EnumMember, str):
    __repr__ = EnumMember.__repr__


class _FloatMember(EnumMember, float):
    __repr__ = EnumMember.__repr__


_MEMBER_TYPES = {"enum": _PlainMember, "flag": _FlagMember, "int": _IntMember,
                 "str": _StrMember, "float": _FloatMember}  # fmt: skip


def _new_member(form) -> EnumMember:
    value = decode(form[2])
    cls = _MEMBER_TYPES[form[3]]
    member = object.__new__(cls) if cls in (_PlainMember, _FlagMember) else cls.__new__(cls, value)
    member._set(form, value)
    return member


class EnumClass:
    """An enum class as a compile computes with it (``len(Mode)``, ``for m in Mode``,
    ``Mode.FAST``, ``Mode(1)``, ``Mode['FAST']``): its members, decoded, in their order."""

    def __init__(self, form):
        self._qnb_form = form
        qualname, kind, members = form[1], form[2], form[3]
        self.__qualname__ = qualname.rsplit(".", 1)[-1]
        self.__name__ = self.__qualname__.rsplit(".", 1)[-1]
        self.__members__: dict[str, EnumMember] = {}
        self._qnb_order: list[EnumMember] = []
        for name, value_form in members:
            member = decode(["enum", f"{qualname}.{name}", value_form, kind])
            alias = next((m for m in self._qnb_order if _same_value(m.value, member.value)), None)
            if alias is not None:  # an alias: the name of the member it repeats
                member = alias
            else:
                self._qnb_order.append(member)
            self.__members__[name] = member

    def __iter__(self):
        return iter(self._qnb_order)

    def __len__(self) -> int:
        return len(self._qnb_order)

    def __contains__(self, item) -> bool:
        return any(
            item is m or (type(m) is not _PlainMember and m == item) for m in self._qnb_order
        )

    def __getitem__(self, name):
        return self.__members__[name]

    def __call__(self, value):
        for member in self._qnb_order:
            if _same_value(member.value, value):
                return member
        raise ValueError(f"{value!r} is not a valid {self.__qualname__}")

    def __getattr__(self, name):
        members = self.__dict__.get("__members__", {})
        if name in members:
            return members[name]
        raise AttributeError(f"enum {self.__qualname__} has no attribute {name!r}")

    def __repr__(self) -> str:
        return f"<enum {self.__qualname__!r}>"


def _same_value(a, b) -> bool:
    return type(a) is type(b) and canonical(a) == canonical(b)


# ---------------------------------------------------------------------------- display


def display(form, exact: bool = False) -> str:
    """A canonical form (or a read's form) as Python writes the value it stands for.
    ``exact``: also what tells apart two forms that read the same (an enum's module)."""
    try:
        return _display(form, exact)
    except (TypeError, ValueError, IndexError, KeyError, AttributeError, OverflowError):
        return _as_list(form)


def _display(form, exact: bool) -> str:
    tag = form[0]
    if tag in ("module", "library", "intrinsic", "func", "object", "missing", "undefined"):
        return _display_read(form, exact)
    if tag == "class":  # (an older read's form: a class by name)
        return f"<class {form[1]!r}>"
    if tag == "tuple":
        items = [_display(item, exact) for item in form[1]]
        return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"
    if tag == "namedtuple":
        name = form[1] if exact else form[1].rsplit(".", 1)[-1]
        fields = ", ".join(f"{f}={_display(i, exact)}" for f, i in zip(form[2], form[3]))
        return f"{name}({fields})"
    if tag == "enum":
        name = form[1] if exact else ".".join(form[1].rsplit(".", 2)[-2:])
        kind = f" ({form[3]})" if exact and len(form) > 3 and form[3] != "enum" else ""
        return f"<{name}: {_display(form[2], exact)}{kind}>"
    if tag == "enum-class":
        name = form[1] if exact else form[1].rsplit(".", 1)[-1]
        members = ", ".join(f"{n}={_display(v, exact)}" for n, v in form[3])
        kind = f" ({form[2]})" if exact and form[2] != "enum" else ""
        return f"<enum {name!r}: {members}{kind}>"
    if tag in ("dtype", "numpy-dtype"):  # as qnb and NumPy print a dtype: f32, float32
        return str(form[1])
    return repr(decode(form))


def _display_read(form, exact: bool) -> str:
    tag = form[0]
    if tag == "module":
        return f"<module {form[1]!r}>"
    if tag in ("library", "intrinsic"):
        return str(form[1])
    if tag == "func":
        digest = f" {form[3][:12]}" if exact and len(form) > 3 and form[3] else ""
        return f"<qnb.func {form[1]}{digest}>"
    if tag == "object":
        return f"<{form[1]} object>"
    if tag == "missing":
        return "<no such attribute>"
    return "<undefined>"


def _as_list(value) -> str:
    if isinstance(value, list):
        return "[" + ", ".join(_as_list(v) for v in value) + "]"
    return repr(value)


def decodable(form) -> bool:
    """Whether a form is a constant's (:func:`decode` gives its value), not a read's."""
    return form[0] not in READ_TAGS and form[0] != "class"


def is_form(value) -> bool:
    """Whether a JSON value looks like a canonical (or read) form: ``[tag, …]``."""
    return (
        isinstance(value, list)
        and bool(value)
        and isinstance(value[0], str)
        and (value[0] in _TAGS or value[0].startswith("np."))
    )


_TAGS = frozenset(
    {"none", "bool", "int", "float", "str", "tuple", "namedtuple", "enum", "enum-class",
     "dtype", "numpy-dtype", "class", *READ_TAGS}
)  # fmt: skip
