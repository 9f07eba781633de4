"""Text that explains a kernel's cache keys: ``qnb.cache.explain`` and ``qnb cache explain``."""

from __future__ import annotations

import hashlib
import time
from typing import Any

from qnb.cache import lookup, store
from qnb.cache.key import COMPONENTS, CacheKey, diff, render_value


def kernel_name_of(kernel_or_name: Any) -> str:
    """The name a kernel is cached under: a string as is, else its ``name`` (or
    ``__qualname__`` / ``__name__``)."""
    if isinstance(kernel_or_name, str):
        return kernel_or_name
    for attribute in ("name", "__qualname__", "__name__"):
        value = getattr(kernel_or_name, attribute, None)
        if isinstance(value, str):
            return value
    raise TypeError(
        f"explain() needs a kernel or a kernel name, not {type(kernel_or_name).__name__}"
    )


def matches(recorded: str, asked: str) -> bool:
    """``asked`` names ``recorded`` exactly or as its last dotted part(s)."""
    return recorded == asked or recorded.endswith("." + asked)


def render_component(name: str, value: Any) -> str:
    if name == "source" and isinstance(value, dict):
        parts = []
        for unit, text in sorted(value.items()):
            if isinstance(text, str):
                lines = len(text.splitlines())
                sha = hashlib.sha256(text.encode("utf-8")).hexdigest()[:8]
                parts.append(f"{unit}: {lines} line{'s' if lines != 1 else ''} (sha256 {sha})")
            else:
                parts.append(f"{unit}: {render_value(text)}")
        return "{" + ", ".join(parts) + "}"
    return render_value(value)


def describe_key(components: dict, indent: str = "  ") -> list[str]:
    key = CacheKey(components)
    width = max(len(name) for name in COMPONENTS)
    return [
        f"{indent}{name:<{width}}  {key.component_digests[name][:12]}  {render_component(name, components[name])}"
        for name in COMPONENTS
    ]


def _clock(timestamp: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(timestamp))


def explain(kernel_or_name: Any) -> str:
    """This process's view: the kernel's last key component by component and the
    history of its misses and disk hits with reasons (a notebook re-run against a
    persistent cache loads its changed kernels from disk rather than compiling them);
    falls back to the disk's entries."""
    name = kernel_name_of(kernel_or_name)
    recorded = [event for event in lookup.events() if matches(event.kernel, name)]
    if not recorded:
        disk = explain_disk(name)
        return f"kernel {name!r}: no cache events in this process\n{disk}"
    last = recorded[-1]
    lines = [f"kernel {last.kernel!r} [{last.backend}]: last key {last.short_key} ({last.outcome})"]
    lines += describe_key(last.components)
    misses = sum(event.outcome == "miss" for event in recorded)
    from_disk = sum(event.outcome == "disk-hit" for event in recorded)
    hits = len(recorded) - misses
    summary = f"{misses} miss{'es' if misses != 1 else ''} and {hits} hit{'s' if hits != 1 else ''}"
    if from_disk:
        summary += f" ({from_disk} from disk)"
    lines.append(f"{summary} in this process")
    for event in recorded:
        if event.outcome != "memory-hit":  # a disk hit's reason ends "(found on disk)"
            lines.append(
                f"  {_clock(event.time)}  {event.short_key}  [{event.backend}]  {event.reason}"
            )
            if event.differences and str(event.reason).startswith("first "):
                # a first compile on this backend: the other backend's key, in full
                lines += [f"      {difference}" for difference in event.differences]
    return "\n".join(lines)


def explain_disk(name: str) -> str:
    """The disk's view: each entry of the kernel, oldest first, and how its key
    differs from the closest earlier entry."""
    refused = store.refusal(store.directory())
    if refused is not None:
        return f"not reading the cache directory {store.directory()}: {refused}"
    infos = [
        info for info in store.list_entries(root=store.directory()) if matches(info.kernel, name)
    ]
    if not infos:
        return f"no entries for kernel {name!r} in {store.directory()}"
    infos.sort(key=lambda info: info.created)
    lines = [
        f"{len(infos)} entr{'y' if len(infos) == 1 else 'ies'} for kernel {name!r} in {store.directory()}:"
    ]
    for index, info in enumerate(infos):
        earlier = [other for other in infos[:index] if other.kernel == info.kernel]
        if earlier:
            closest = min(
                reversed(earlier),
                key=lambda other: len(
                    {d.component for d in diff(other.components, info.components)}
                ),
            )
            differences = diff(closest.components, info.components)
            reason = "; ".join(str(d) for d in differences) or "same key"
            backend = info.components.get("backend", {}).get("name")
            if all(other.components.get("backend", {}).get("name") != backend for other in earlier):
                reason = lookup.first_on_backend(backend)
        else:
            differences, reason = [], lookup.FIRST_COMPILE
        lines.append(f"  {_clock(info.created)}  {info.short}  [{info.backend}]  {reason}")
        if reason.startswith(lookup.FIRST_COMPILE + " on "):
            lines += [f"      {difference}" for difference in differences]
    lines.append(f"last entry {infos[-1].short}:")
    lines += describe_key(infos[-1].components, indent="    ")
    return "\n".join(lines)
