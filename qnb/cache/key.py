"""The cache key: an ordered set of named components, each hashed and kept in full.

A key is only as good as what it leaves out. The library whose stale cache started
qnb hashed a kernel's source but not the constants it captured, so two different
compiled kernels shared one key. Here every input that can change the artifact is a
named component (``COMPONENTS``); each is hashed on its own, so a miss can say which
component changed and how (:func:`diff`), and the full values are kept so an entry on
disk can be re-verified against the key it claims.

Hashing uses a canonical JSON text: sorted keys, fixed separators, ASCII escapes and
floats written by ``repr`` (exact and round-tripping), so ``1``, ``1.0`` and ``True``
never collide and the digest is the same in every process. No ``hash()``, ``id()`` or
address ever enters a key.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

# The components, in key order (contract: DESIGN.md "Kernel cache").
COMPONENTS = ("qnb", "source", "captured", "signature", "backend", "compiler", "options")

# Components whose value is a dict of named entries (all of them, in keys qnb builds);
# diff() reports those entry by entry and any other value whole.
DICT_COMPONENTS = frozenset(COMPONENTS)


class _Absent:
    """The value of an entry that exists on one side of a diff only."""

    _instance = None

    def __new__(cls):
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "<absent>"

    __str__ = __repr__


ABSENT = _Absent()


def canonical_json(value: Any) -> str:
    """The one text a JSON-able value hashes as.

    Raises TypeError for anything that is not plain JSON data (or that would be
    silently conflated by JSON, such as a dict with non-string keys)."""
    _check_json_data(value)
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=True
    )


def _check_json_data(value: Any, path: str = "value") -> None:
    # bool is a subclass of int and float formatting is exact, so the primitive types
    # are safe as they are; containers are walked so nothing falls through to str().
    if value is None or isinstance(value, (bool, int, str)):
        return
    if isinstance(value, float):
        return
    if isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            _check_json_data(item, f"{path}[{i}]")
        return
    if isinstance(value, dict):
        for k, item in value.items():
            if not isinstance(k, str):
                raise TypeError(f"cache key {path} has a non-string key {k!r}")
            _check_json_data(item, f"{path}[{k!r}]")
        return
    raise TypeError(f"cache key {path} is a {type(value).__name__}, not JSON data: {value!r}")


def sha256_hex(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class CacheKey:
    """A kernel-cache key: ``components`` (name → JSON-able value, in ``COMPONENTS``
    order), ``component_digests`` (name → sha256 hex), ``digest`` (sha256 hex over
    the ordered component digests) and ``short`` (its first 12 hex digits)."""

    __slots__ = ("component_digests", "components", "digest", "short")

    def __init__(self, components: Mapping[str, Any]):
        unknown = [name for name in components if name not in COMPONENTS]
        missing = [name for name in COMPONENTS if name not in components]
        if unknown or missing:
            raise ValueError(
                f"a cache key needs exactly the components {', '.join(COMPONENTS)}"
                + (f"; unknown: {', '.join(unknown)}" if unknown else "")
                + (f"; missing: {', '.join(missing)}" if missing else "")
            )
        texts = {name: canonical_json(components[name]) for name in COMPONENTS}
        # Keep the values as JSON gives them back, so a key built in memory and the
        # same key read from disk compare equal (tuples become lists, and so on).
        self.components: dict[str, Any] = {name: json.loads(texts[name]) for name in COMPONENTS}
        self.component_digests: dict[str, str] = {
            name: sha256_hex(texts[name]) for name in COMPONENTS
        }
        combined = "\n".join(f"{name}={self.component_digests[name]}" for name in COMPONENTS)
        self.digest: str = sha256_hex(combined)
        self.short: str = self.digest[:12]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CacheKey) and other.digest == self.digest

    def __hash__(self) -> int:  # for use in sets/dicts; never part of a key
        return hash(self.digest)

    def __repr__(self) -> str:
        return f"<CacheKey {self.short}>"


@dataclass(frozen=True)
class Difference:
    """One way two keys differ: ``component`` and, for dict-valued components, the
    entry ``name`` (None otherwise); ``old``/``new`` are the values (``ABSENT`` when
    the entry exists on one side only)."""

    component: str
    name: str | None
    old: Any
    new: Any

    @property
    def label(self) -> str:
        return self.component if self.name is None else f"{self.component}.{self.name}"

    def __str__(self) -> str:
        if self.component == "source":
            return f"{self.label}: {describe_text_change(self.old, self.new)}"
        old, new = render_value(self.old), render_value(self.new)
        if old == new:  # two forms that read alike (an enum of another module): say how
            old, new = render_value(self.old, exact=True), render_value(self.new, exact=True)
        return f"{self.label}: {old} → {new}"


def _components_of(key: CacheKey | Mapping[str, Any]) -> Mapping[str, Any]:
    return key.components if isinstance(key, CacheKey) else key


def diff(old: CacheKey | Mapping[str, Any], new: CacheKey | Mapping[str, Any]) -> list[Difference]:
    """How ``new`` differs from ``old``, component by component (in key order) and,
    for dict-valued components, entry by entry: ``name`` first (a backend switch
    reads ``backend.name: wgpu → cpu`` before the adapter details that follow from
    it), then the others sorted."""
    old_components, new_components = _components_of(old), _components_of(new)
    differences: list[Difference] = []
    for component in COMPONENTS:
        before = old_components.get(component, ABSENT)
        after = new_components.get(component, ABSENT)
        if _same(before, after):
            continue
        if component in DICT_COMPONENTS and isinstance(before, dict) and isinstance(after, dict):
            for name in sorted(set(before) | set(after), key=_entry_order):
                entry_before, entry_after = before.get(name, ABSENT), after.get(name, ABSENT)
                if not _same(entry_before, entry_after):
                    differences.append(Difference(component, name, entry_before, entry_after))
        else:
            differences.append(Difference(component, None, before, after))
    return differences


def _entry_order(name: str) -> tuple[bool, str]:
    return name != "name", name


def count_differing_components(old: Mapping[str, Any], new: Mapping[str, Any]) -> tuple[int, int]:
    """(components that differ, entries that differ): the "distance" used to find the
    closest earlier key. It counts what :func:`diff` lists, comparing values with
    :func:`same_json` rather than hashing them (a disk hit measures it against up to
    ``MAX_HISTORY`` keys)."""
    components = entries = 0
    for component in COMPONENTS:
        before = old.get(component, ABSENT)
        after = new.get(component, ABSENT)
        if _equal(before, after):
            continue
        components += 1
        if component in DICT_COMPONENTS and isinstance(before, dict) and isinstance(after, dict):
            entries += sum(
                not _equal(before.get(name, ABSENT), after.get(name, ABSENT))
                for name in before.keys() | after.keys()
            )
        else:
            entries += 1
    return components, entries


def _equal(a: Any, b: Any) -> bool:
    if a is ABSENT or b is ABSENT:
        return a is b
    return same_json(a, b)


def same_json(a: Any, b: Any) -> bool:
    """Exact equality of two JSON values, types included (``1``, ``1.0`` and ``True`` differ),
    so equal values have equal canonical JSON; cheaper than hashing both."""
    kind = type(a)
    if kind is not type(b):
        return False
    if kind is dict:
        return a.keys() == b.keys() and all(same_json(a[k], b[k]) for k in a)
    if kind is list:
        return len(a) == len(b) and all(same_json(x, y) for x, y in zip(a, b))
    return a == b


def _same(a: Any, b: Any) -> bool:
    if a is ABSENT or b is ABSENT:
        return a is b
    try:
        return canonical_json(a) == canonical_json(b)
    except TypeError:
        return False


# ---------------------------------------------------------------------------------
# Rendering values for people
# ---------------------------------------------------------------------------------


def render_value(value: Any, exact: bool = False) -> str:
    """A short readable form of a component value: a compile-time value's form as Python
    writes the value (``qnb.frontend.constants.display``: ``["float", "0x1.4p+1"]`` →
    ``2.5``, ``["str", "ab"]`` → ``'ab'``), anything else as JSON data reads. ``exact``:
    what tells two look-alike forms apart too (see ``Difference``)."""
    if value is ABSENT:
        return ABSENT
    text = _render(value, exact)
    return text if len(text) <= 200 else text[:197] + "..."


def _render(value: Any, exact: bool = False) -> str:
    if value is None:
        return "None"
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return value
    if isinstance(value, (list, tuple)):
        from qnb.frontend import constants  # (the one owner of the forms: shown its way)

        if constants.is_form(list(value)):
            return constants.display(list(value), exact)
        return "[" + ", ".join(_render(item, exact) for item in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_render(v, exact)}" for k, v in sorted(value.items())) + "}"
    return repr(value)


def describe_text_change(old: Any, new: Any) -> str:
    """ "text changed at line N: 'old line' → 'new line'" (not the whole text)."""
    if not isinstance(old, str) or not isinstance(new, str):
        return f"{_summarise_text(old)} → {_summarise_text(new)}"
    old_lines, new_lines = old.splitlines(), new.splitlines()
    for number in range(max(len(old_lines), len(new_lines))):
        before = old_lines[number] if number < len(old_lines) else None
        after = new_lines[number] if number < len(new_lines) else None
        if before != after:
            return (
                f"text changed at line {number + 1}: {_quote_line(before)} → {_quote_line(after)}"
            )
    return "text changed (whitespace at the end)"


def _quote_line(line: str | None) -> str:
    if line is None:
        return "<no line>"
    line = line.strip()
    return repr(line if len(line) <= 80 else line[:77] + "...")


def _summarise_text(value: Any) -> str:
    if isinstance(value, str):
        count = len(value.splitlines())
        return f"text of {count} line{'s' if count != 1 else ''}"
    return render_value(value)
