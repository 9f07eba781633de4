"""The kernel cache: in memory per process, and verified entries on disk.

Public API (contract, DESIGN.md "Kernel cache"): :func:`events`, :class:`CacheEvent`,
:func:`stats`, :func:`clear` (it returns a :class:`ClearResult`), :func:`explain`,
:func:`directory`, :class:`CacheWarning`, :func:`add_listener` / :func:`remove_listener`,
:func:`fresh_directory` (an empty cache directory that goes when the process ends).

The kernel layer builds a :class:`CacheKey` from the seven named components and
calls :func:`get_or_compile`; its launch fast path calls :func:`record_memory_hit`.
Environment: ``QNB_CACHE_DIR``, ``QNB_CACHE=0`` (no disk level),
``QNB_ALWAYS_COMPILE=1`` (always compile), ``QNB_CACHE_MAX_BYTES`` (default 1 GiB);
all read at call time.
"""

from __future__ import annotations

from qnb.cache.fresh import fresh_directory
from qnb.cache.key import COMPONENTS, CacheKey, Difference, canonical_json, diff
from qnb.cache.lookup import (
    CacheEvent,
    add_listener,
    clear,
    events,
    get_or_compile,
    record_memory_hit,
    remove_listener,
    stats,
)
from qnb.cache.report import explain
from qnb.cache.store import CacheWarning, ClearResult, directory

__all__ = [
    "COMPONENTS",
    "CacheEvent",
    "CacheKey",
    "CacheWarning",
    "ClearResult",
    "Difference",
    "add_listener",
    "canonical_json",
    "clear",
    "diff",
    "directory",
    "events",
    "explain",
    "fresh_directory",
    "get_or_compile",
    "record_memory_hit",
    "remove_listener",
    "stats",
]
