"""Cache events as text and rows: shared by ``CacheView`` and the magics (no widgets here)."""

from __future__ import annotations

import time

VALUE_CHARS = 120


def short(value) -> str:
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= VALUE_CHARS else text[: VALUE_CHARS - 1] + "\u2026"


def kernel_name(event) -> str:
    return str(getattr(event.kernel, "name", event.kernel))


def component_text(name: str, value) -> str:
    """A key component as the cache shows it (compile-time values as Python writes them,
    never their tagged forms: ``qnb.cache.key.render_value``)."""
    if name == "source" and isinstance(value, dict):  # unit -> source text: too long to show
        return ", ".join(
            f"{unit} ({len(str(text).splitlines())} lines)" for unit, text in value.items()
        )
    from qnb.cache.key import render_value

    return short(render_value(value))


def outcome_text(event) -> str:
    """ "compiled in 12.3 ms" / "loaded from disk in 1.2 ms" / "memory hit"."""
    ms = (event.seconds or 0.0) * 1e3
    if event.outcome == "miss":
        return f"compiled in {ms:.1f} ms"
    if event.outcome == "disk-hit":
        return f"loaded from disk in {ms:.1f} ms"
    return "memory hit"


def status_line(event, name: str | None = None) -> str:
    """One line per kernel, as ``%%qkernel`` prints it."""
    return (
        f"{name or kernel_name(event)}: {outcome_text(event)} [{event.backend}] "
        f"key {event.short_key}"
    )


def event_record(number: int, event) -> dict:
    """The JSON-able row ``CacheView`` shows for one ``qnb.cache.CacheEvent``."""
    stamp = getattr(event, "time", None)
    return {
        "n": number,
        "time": time.strftime("%H:%M:%S", time.localtime(stamp)) if stamp else "",
        "kernel": kernel_name(event),
        "backend": str(event.backend),
        "outcome": str(event.outcome),
        "ms": round((event.seconds or 0.0) * 1e3, 3),
        "short_key": str(getattr(event, "short_key", "") or ""),
        "reason": str(event.reason) if event.reason else "",
        "count": 1,  # consecutive memory hits of one kernel share a row
    }


def event_detail(event, components: bool = True) -> str:
    """For a miss (and for a disk hit: why it was not in memory), its reason component
    by component; then the key's components."""
    lines = [f"{kernel_name(event)} [{event.backend}] {event.outcome}, key {event.short_key}"]
    if event.outcome == "miss":
        differences = list(getattr(event, "differences", None) or [])
        if differences and str(event.reason).startswith("first compile on "):
            lines.append(f"reason: {event.reason}")
            lines.append("the closest earlier entry (another backend) differs in:")
            lines.extend(f"  {short(str(d))}" for d in differences)
        elif differences:
            lines.append("changed since the closest earlier entry:")
            lines.extend(f"  {short(str(d))}" for d in differences)
        else:
            lines.append(f"reason: {event.reason or 'first compile'}")
    else:
        level = "memory" if event.outcome == "memory-hit" else "disk"
        lines.append(f"served from the {level} cache: every key component matched")
        if event.outcome == "disk-hit" and getattr(event, "reason", None):
            differences = list(getattr(event, "differences", None) or [])
            if differences:  # why it was not in memory: what changed in this process
                lines.append("not in memory: changed since the closest key this process has seen:")
                lines.extend(f"  {short(str(d))}" for d in differences)
            else:
                lines.append(f"not in memory: {event.reason}")
    if components and getattr(event, "components", None):
        lines.append("key components:")
        lines.extend(
            f"  {name}: {component_text(name, value)}" for name, value in event.components.items()
        )
    return "\n".join(lines)
