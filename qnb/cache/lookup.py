"""The two cache levels in front of a compile, and the record of what happened.

``get_or_compile`` looks a key up in memory (digest → loaded launcher), then on disk
(a verified artifact, loaded by the backend), then compiles and stores. Each lookup
becomes a :class:`CacheEvent`; a miss carries the reason: how its key differs from
the closest earlier key of the same kernel (this process's or the disk's), or
"first compile". A disk hit carries one too, so a notebook re-run against a
persistent cache still says why a kernel changed: how its key differs from the
closest key of the kernel this process has seen, marked "(found on disk)", or
"first launch in this process (found on disk)". The launch fast path calls
``record_memory_hit``, which only appends a tuple, without a lock (no hashing, no
I/O); the hits are counted, and their launchers marked used, in batches, and
``events()`` turns each into an event when read.

The memory level is bounded (``MAX_LAUNCHERS``, contract: 1024): beyond it the least
recently used launcher is dropped, and with it every kernel's launch memo entry that
holds it (kernels register those with :func:`hold`), so nothing keeps its device
buffers alive. ``clear()`` drops them all at once.
"""

from __future__ import annotations

import collections
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from qnb.cache import manifests, store
from qnb.cache.key import CacheKey, Difference, count_differing_components, diff
from qnb.cache.logs import LazyLogger

log = LazyLogger("qnb.cache")

MAX_EVENTS = 10_000
# Launchers kept in memory per process (contract); settable, e.g. by tests.
MAX_LAUNCHERS = 1024
# How many earlier keys per kernel a miss is compared with, per level.
MAX_HISTORY = 64

FIRST_COMPILE = "first compile"
FIRST_LAUNCH = "first launch in this process"
FOUND_ON_DISK = "(found on disk)"


def first_on_backend(backend_name: str) -> str:
    """The reason of a kernel's first compile on a backend it has run on before on
    another: the whole backend and compiler components differ, which says nothing a
    user needs (``differences`` keeps them: ``explain``, CacheView's detail pane)."""
    return f"{FIRST_COMPILE} on {backend_name}"


def _backend_name(components: dict) -> Any:
    backend = components.get("backend")
    return backend.get("name") if isinstance(backend, dict) else backend


def _on_other_backends(candidates: list[dict], key: CacheKey) -> bool:
    """No candidate was compiled for ``key``'s backend."""
    name = _backend_name(key.components)
    return all(_backend_name(components) != name for components in candidates)


@dataclass(slots=True)
class CacheEvent:
    """One cache lookup (contract): ``outcome`` is "memory-hit", "disk-hit" or
    "miss"; for a miss ``reason`` says what changed since the closest earlier key of
    the same kernel (``differences`` lists it), or is "first compile". A disk hit's
    ``reason`` says the same against the keys this process has seen, followed by
    "(found on disk)", or is "first launch in this process (found on disk)"; a memory
    hit has none."""

    kernel: str
    backend: str
    outcome: str
    key: str
    short_key: str
    components: dict
    seconds: float
    reason: str | None = None
    differences: list[Difference] = field(default_factory=list)
    time: float = 0.0

    def __str__(self) -> str:
        text = f"{self.kernel} [{self.backend}] {self.outcome} {self.short_key} in {self.seconds * 1e3:.3f} ms"
        return f"{text}: {self.reason}" if self.reason else text


_lock = threading.RLock()
_memory: collections.OrderedDict[str, Any] = collections.OrderedDict()  # digest → launcher, LRU
# digest → the launch memos holding its launcher: {(id(memo), memo key): weakref to memo}
_holders: dict[str, dict[tuple, weakref.ref]] = {}
_history: dict[str, collections.OrderedDict] = {}  # kernel → digest → components
_events: collections.deque = collections.deque(maxlen=MAX_EVENTS)
_counts = {"memory-hit": 0, "disk-hit": 0, "miss": 0}
_seconds = {"memory-hit": 0.0, "disk-hit": 0.0, "miss": 0.0}
_listeners: list[Callable[[CacheEvent], None]] = []


# ---------------------------------------------------------------------------------
# Events
# ---------------------------------------------------------------------------------


def _record(event: CacheEvent) -> CacheEvent:
    with _lock:
        _fold_hits()  # the hits before it come first
        _events.append(event)
        _counts[event.outcome] += 1
        _seconds[event.outcome] += event.seconds
        listeners = tuple(_listeners) if _listeners else ()
    for listener in listeners:
        try:
            listener(event)
        except Exception:  # a broken widget must not break a launch
            log.exception("qnb.cache listener %r failed", listener)
    return event


# Memory hits recorded lock-free (``list.append`` is atomic), not yet in ``_events``,
# the counts or the least-recently-used order; :func:`_fold_hits` moves them there
# before anything reads those (events, stats, an eviction, another event) and whenever
# ``HITS_PENDING`` are waiting.
_pending_hits: list[tuple] = []
HITS_PENDING = 256


def record_memory_hit(
    kernel_name: str, backend_name: str, key: CacheKey, seconds: float
) -> CacheEvent | None:
    """Record a launch that reused its launcher without a lookup (the fast path).

    This runs on every launch, so without listeners it appends a tuple (no lock) and
    ``events()`` builds the CacheEvent when asked; returns the event only when it built
    one (for a listener, which sees every hit as it happens)."""
    if _listeners:
        with _lock:
            _fold_hits()
            if key.digest in _memory:
                _memory.move_to_end(key.digest)
        return _record(_memory_hit_event((kernel_name, backend_name, key, seconds, time.time())))
    _pending_hits.append((kernel_name, backend_name, key, seconds, time.time()))
    if len(_pending_hits) >= HITS_PENDING:
        with _lock:
            _fold_hits()
    return None


def _fold_hits() -> None:
    """Move the pending memory hits into the events, the counts and the LRU order (lock
    held). A hit appended meanwhile by another thread stays pending, in order: the
    slice and its deletion are each one atomic step."""
    count = len(_pending_hits)
    if not count:
        return
    hits = _pending_hits[:count]
    del _pending_hits[:count]
    _events.extend(hits)
    _counts["memory-hit"] += count
    _seconds["memory-hit"] += sum(hit[3] for hit in hits)
    # Least recently used order: each digest moves to the end once, by its last hit.
    recent = dict.fromkeys(hit[2].digest for hit in reversed(hits))
    for digest in reversed(recent):
        if digest in _memory:
            _memory.move_to_end(digest)


def _memory_hit_event(record) -> CacheEvent:
    if type(record) is not tuple:
        return record
    kernel_name, backend_name, key, seconds, when = record
    return CacheEvent(
        kernel_name,
        backend_name,
        "memory-hit",
        key.digest,
        key.short,
        key.components,
        seconds,
        None,
        [],
        when,
    )


def events() -> list[CacheEvent]:
    """The recorded events, oldest first (the last ``MAX_EVENTS``)."""
    with _lock:
        _fold_hits()
        recorded = list(_events)
    return [_memory_hit_event(r) for r in recorded]


def add_listener(listener: Callable[[CacheEvent], None]) -> None:
    """Call ``listener(event)`` for every new event (CacheView uses this)."""
    with _lock:
        if listener not in _listeners:
            _listeners.append(listener)


def remove_listener(listener: Callable[[CacheEvent], None]) -> None:
    with _lock:
        if listener in _listeners:
            _listeners.remove(listener)


def stats() -> dict:
    """Counts and times per outcome, the memory level's size and the disk's."""
    with _lock:
        _fold_hits()
        counts, seconds, in_memory = dict(_counts), dict(_seconds), len(_memory)
    root = store.directory()
    entries, size = store.disk_usage(root)
    return {
        "memory_hits": counts["memory-hit"],
        "disk_hits": counts["disk-hit"],
        "misses": counts["miss"],
        "compile_seconds": seconds["miss"],
        "disk_load_seconds": seconds["disk-hit"],
        "memory_entries": in_memory,
        "disk_entries": entries,
        "disk_bytes": size,
        "disk_max_bytes": store.max_bytes(),
        "directory": str(root),
        "disk_enabled": store.disk_enabled() and store.unusable_reason() is None,
    }


# Bumped by clear(): a kernel's own launch memo is stale once it differs.
generation = [0]


def clear(disk: bool = True) -> store.ClearResult:
    """Empty this process's memory level (and forget its events, counts and miss
    history) and, unless ``disk=False``, delete every entry of the disk level, which
    other processes share.

    Returns what was cleared (``memory``: kernels dropped from memory; ``removed``, and
    ``failed``: the disk entries that could not be deleted, with why); a failure on
    disk also gives one CacheWarning."""
    with _lock:
        in_memory = len(_memory)
        generation[0] += 1
        del _pending_hits[:]
        for digest in list(_holders):
            _release(digest)
        _memory.clear()
        _manifests.clear()
        _history.clear()
        _events.clear()
        for outcome in _counts:
            _counts[outcome] = 0
            _seconds[outcome] = 0.0
    if not disk:
        return store.ClearResult(store.directory(), memory=in_memory, disk=False)
    result = store.clear_disk()
    result.memory = in_memory
    if result.failed:
        store.warn(f"qnb kernel cache: {result}")
    return result


# ---------------------------------------------------------------------------------
# The lookup
# ---------------------------------------------------------------------------------


def get_or_compile(
    kernel_name: str,
    backend_name: str,
    key: CacheKey,
    compile: Callable[[], Any],
    load: Callable[[Any], Any],
    origin: str | None = None,
) -> tuple[Any, CacheEvent]:
    """The launcher for ``key``: from memory, else from a verified disk entry, else
    ``load(compile())`` (then stored on disk, with ``origin``, the kernel's "file:line",
    for ``qnb cache list``). Returns it with the lookup's event."""
    start = time.perf_counter()
    forced = store.always_compile()
    if not forced:
        with _lock:
            launcher = _memory.get(key.digest)
        if launcher is not None:
            return launcher, _finish(kernel_name, backend_name, key, "memory-hit", start)

    rejected = None
    if not forced:
        launcher, rejected = _load_from_disk(kernel_name, key, load)
        if launcher is not None:
            reason, differences = disk_hit_reason(kernel_name, key)  # before _remember
            launcher = _remember(kernel_name, key, launcher)
            event = _finish(kernel_name, backend_name, key, "disk-hit", start, reason, differences)
            log.info(
                "loaded %s [%s] from disk in %.1f ms key %s… (%s)",
                kernel_name,
                backend_name,
                event.seconds * 1e3,
                key.short,
                reason,
            )
            return launcher, event

    reason, differences = miss_reason(kernel_name, key, forced=forced, rejected=rejected)
    artifact = compile()
    launcher = load(artifact)
    store.save(kernel_name, backend_name, key, artifact, origin=origin)
    launcher = _remember(kernel_name, key, launcher, replace=forced)
    event = _finish(kernel_name, backend_name, key, "miss", start, reason, differences)
    log.info(
        "compiled %s [%s] in %.1f ms key %s… (%s)",
        kernel_name,
        backend_name,
        event.seconds * 1e3,
        key.short,
        reason,
    )
    return launcher, event


def _load_from_disk(kernel_name: str, key: CacheKey, load: Callable[[Any], Any], root=store.CHECK):
    """``(launcher, None)`` from a verified disk entry the backend loads; else ``(None,
    why the entry was refused)``, or ``(None, None)`` where there is none. An entry the
    backend cannot load is discarded. ``root``: as for ``store.load``."""
    artifact, rejected = store.load(kernel_name, key, root)
    if artifact is None:
        return None, rejected
    try:
        return load(artifact), None
    except Exception as exc:
        rejected = f"the backend could not load it ({type(exc).__name__}: {exc})"
        root = store.usable_directory()
        if root is not None:
            store.discard(store.entry_path(root, kernel_name, key.digest), rejected)
        return None, rejected


def _finish(
    kernel_name, backend_name, key, outcome, start, reason=None, differences=None
) -> CacheEvent:
    seconds = time.perf_counter() - start
    event = CacheEvent(
        kernel_name, backend_name, outcome, key.digest, key.short, key.components, seconds, reason,
        differences or [], time.time(),
    )  # fmt: skip
    return _record(event)


def _remember(kernel_name: str, key: CacheKey, launcher: Any, replace: bool = False) -> Any:
    """Put ``launcher`` in the memory level (another thread's, if it got there
    first, wins unless ``replace``) and note the key in the kernel's history."""
    with _lock:
        _fold_hits()  # the LRU order an eviction follows
        if replace:
            _memory[key.digest] = launcher
        else:
            launcher = _memory.setdefault(key.digest, launcher)
        _memory.move_to_end(key.digest)
        while len(_memory) > max(MAX_LAUNCHERS, 1):
            digest, _ = _memory.popitem(last=False)
            _release(digest)
        seen = _history.setdefault(kernel_name, collections.OrderedDict())
        seen[key.digest] = key.components
        seen.move_to_end(key.digest)
        while len(seen) > MAX_HISTORY:
            seen.popitem(last=False)
    return launcher


def hold(digest: str, memo, memo_key) -> None:
    """Note that ``memo[memo_key]`` (a kernel's launch memo: any mapping that takes a
    weak reference) holds the launcher of ``digest``: when the memory level drops that
    launcher, the entry goes too. Held by a weak reference: a kernel the user no longer
    has is not kept alive."""
    with _lock:
        if digest not in _memory:  # dropped already (another thread filled the level)
            memo.pop(memo_key, None)
            return
        _holders.setdefault(digest, {})[(id(memo), memo_key)] = weakref.ref(memo)


def _release(digest: str) -> None:
    """Drop every launch memo entry holding the launcher of ``digest`` (lock held)."""
    for (_, memo_key), ref in _holders.pop(digest, {}).items():
        memo = ref()
        if memo is not None:
            memo.pop(memo_key, None)


def miss_reason(
    kernel_name: str,
    key: CacheKey,
    forced: bool = False,
    rejected: str | None = None,
    force: str | None = None,
) -> tuple[str, list[Difference]]:
    """Why ``key`` missed: its differences from the closest earlier key of the same
    kernel (fewest differing components), or "first compile"."""
    if rejected is not None:
        return f"the disk entry was discarded: {rejected}", []
    candidates = _earlier_keys(kernel_name, key.digest)
    if not candidates:
        return FIRST_COMPILE, []
    differences = _closest_differences(candidates, key)
    if _on_other_backends(candidates, key):
        return first_on_backend(_backend_name(key.components)), differences
    if differences:
        return "; ".join(str(d) for d in differences), differences
    if forced:
        return force or "QNB_ALWAYS_COMPILE=1 forces a compile", []
    return "an entry with this key was cached earlier and is gone (cleared or evicted)", []


def disk_hit_reason(kernel_name: str, key: CacheKey) -> tuple[str, list[Difference]]:
    """Why ``key`` was not in memory but on disk: its differences from the closest key
    of the same kernel this process has seen (the disk's entries are not asked: the
    hit itself is one), or "first launch in this process"; marked "(found on disk)"."""
    with _lock:
        seen = list(reversed(_history.get(kernel_name, {}).values()))
    if not seen:
        return f"{FIRST_LAUNCH} {FOUND_ON_DISK}", []
    differences = _closest_differences(seen, key)
    if _on_other_backends(seen, key):
        name = _backend_name(key.components)
        return f"first launch on {name} in this process {FOUND_ON_DISK}", differences
    if differences:
        return f"{'; '.join(str(d) for d in differences)} {FOUND_ON_DISK}", differences
    return f"seen earlier in this process, no longer in memory {FOUND_ON_DISK}", []


def _closest_differences(candidates: list[dict], key: CacheKey) -> list[Difference]:
    """How ``key`` differs from the closest candidate (fewest differing components,
    then entries; the most recent first among equals)."""
    closest = min(candidates, key=lambda item: count_differing_components(item, key.components))
    return diff(closest, key)


def _earlier_keys(kernel_name: str, digest: str) -> list[dict]:
    """Earlier keys of this kernel, most recent first: this process's, then the disk's."""
    with _lock:
        seen = list(reversed(_history.get(kernel_name, {}).items()))
    candidates = [components for _, components in seen]
    known = {d for d, _ in seen}
    if store.usable_directory() is not None:
        for info in store.list_entries(kernel_name, limit=MAX_HISTORY):
            if info.digest not in known:
                candidates.append(info.components)
    return candidates


def memory_launcher(digest: str) -> Any | None:
    """The launcher the memory level holds for ``digest``, if any."""
    with _lock:
        return _memory.get(digest)


# ---------------------------------------------------------------------------------
# Kernels whose lowering reads compile-time values past the pre-lowering key
# ---------------------------------------------------------------------------------

_manifests: dict[str, list[list]] = {}  # pre-key digest -> read lists seen in this process


def with_reads(pre_key: CacheKey, forms: dict) -> CacheKey:
    """The full key: ``pre_key`` with the recorded reads' forms added to ``captured``
    (``pre_key`` itself when lowering read nothing past it)."""
    if not forms:
        return pre_key
    components = dict(pre_key.components)
    components["captured"] = {**components["captured"], **forms}
    # A func reached through a read (``m.h``): its source is part of ``source`` too.
    sources = {
        label.removeprefix("read "): form[2]
        for label, form in forms.items()
        if isinstance(form, list) and len(form) == 4 and form[0] == "func"
    }
    if sources:
        components["source"] = {**components["source"], **sources}
    return CacheKey(components)


def get_or_compile_reading(
    kernel_name: str,
    backend_name: str,
    pre_key: CacheKey,
    compile: Callable[[], tuple[Any, dict]],
    load: Callable[[Any], Any],
    evaluate: Callable[[list], tuple[dict, list] | None],
    origin: str | None = None,
    force: str | None = None,
) -> tuple[Any, CacheEvent, CacheKey, list]:
    """``get_or_compile`` for a key built before lowering (``pre_key``), when lowering may
    read more (see ``qnb.frontend.reads``).

    ``compile()`` gives (artifact, reads), reads being label → [path, attribute, form] in
    the order lowering made them; the entry is stored under ``pre_key`` plus those forms,
    and the read list is noted for ``pre_key`` (in memory and on disk). A lookup takes each
    read list noted for ``pre_key``, has ``evaluate(reads)`` read those paths again from the
    live objects (→ (label → form, checks), or None when one no longer resolves), and
    looks up the full key that gives. Lowering is a function of the pre-key's values and of
    the values it reads, so an entry found this way was compiled from the very values
    the live objects hold. Returns (launcher, event, full key, checks: (object, attribute,
    form) for the launch memo to re-check). ``origin`` is as for ``get_or_compile``.
    ``force``: why this lookup compiles whatever the cache holds (a kernel's own
    ``no_cache``; ``QNB_ALWAYS_COMPILE=1`` forces every lookup), said as the reason."""
    start = time.perf_counter()
    forced = force is not None or store.always_compile()
    rejected = None
    if not forced:
        with _lock:
            known = list(_manifests.get(pre_key.digest, ()))
        root = store.usable_directory()  # (once for the manifest and the entries)
        for reads in manifests.load_manifest(kernel_name, pre_key.digest, root):
            if reads not in known:
                known.append(reads)
        for reads in known or [[]]:
            found = evaluate(reads) if reads else ({}, [])
            if found is None:
                continue
            forms, checks = found
            key = with_reads(pre_key, forms)
            with _lock:
                launcher = _memory.get(key.digest)
            if launcher is not None:
                event = _finish(kernel_name, backend_name, key, "memory-hit", start)
                return launcher, event, key, checks
            launcher, why = _load_from_disk(kernel_name, key, load, root)
            rejected = rejected or why
            if launcher is None:
                continue
            reason, differences = disk_hit_reason(kernel_name, key)
            launcher = _remember(kernel_name, key, launcher)
            _note_reads(pre_key.digest, reads)
            event = _finish(kernel_name, backend_name, key, "disk-hit", start, reason, differences)
            return launcher, event, key, checks

    artifact, recorded = compile()
    reads = [[label, path, attr] for label, (path, attr, _) in recorded.items()]
    key = with_reads(pre_key, {label: form for label, (_, _, form) in recorded.items()})
    reason, differences = miss_reason(
        kernel_name, key, forced=forced, rejected=rejected, force=force
    )
    launcher = load(artifact)
    store.save(kernel_name, backend_name, key, artifact, origin=origin)
    if reads:
        _note_reads(pre_key.digest, reads)
        manifests.save_manifest(kernel_name, pre_key.digest, reads, key.digest)
    launcher = _remember(kernel_name, key, launcher, replace=forced)
    event = _finish(kernel_name, backend_name, key, "miss", start, reason, differences)
    log.info("compiled %s [%s] key %s… (%s)", kernel_name, backend_name, key.short, reason)
    return launcher, event, key, None


def _note_reads(pre_digest: str, reads: list) -> None:
    with _lock:
        known = _manifests.setdefault(pre_digest, [])
        if reads not in known:
            known.insert(0, reads)
            del known[manifests.MAX_MANIFEST_SETS :]
