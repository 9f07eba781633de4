"""The kernel cache: in memory per process, and verified entries on disk.

Public API (contract, DESIGN.md "Kernel cache"): :func:`events`, :class:`CacheEvent`,
:func:`stats`, :func:`clear` (it returns a :class:`ClearResult`), :func:`explain`,
:func:`directory`, :class:`CacheWarning`, :func:`add_listener` / :func:`remove_listener`,
:func:`fresh_directory` (an empty cache directory that goes when the process ends).

The kernel layer builds a :class:`CacheKey` from the seven named components and
calls :func:`get_or_compile` (or :func:`get_or_compile_reading`, for a kernel whose
lowering reads compile-time values past its captured names); its launch memo is held by
:func:`hold` and emptied when ``generation[0]`` (the count of :func:`clear` calls) moves;
its launch fast path calls :func:`always_compile` and :func:`record_memory_hit`. It uses
no other module of this package.
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
    generation,
    get_or_compile,
    get_or_compile_reading,
    hold,
    record_memory_hit,
    remove_listener,
    stats,
)
from qnb.cache.report import explain
from qnb.cache.store import CacheWarning, ClearResult, always_compile, directory

__all__ = [
    "COMPONENTS",
    "CacheEvent",
    "CacheKey",
    "CacheWarning",
    "ClearResult",
    "Difference",
    "add_listener",
    "always_compile",
    "canonical_json",
    "clear",
    "diff",
    "directory",
    "events",
    "explain",
    "fresh_directory",
    "generation",
    "get_or_compile",
    "get_or_compile_reading",
    "hold",
    "record_memory_hit",
    "remove_listener",
    "stats",
]
