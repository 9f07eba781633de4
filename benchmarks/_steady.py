"""Steady-state timing for ``benchmarks/bench_peers.py``: warm a callable up until its
first calls' cost (tracing, compiling, caching) is gone, then time several callables in
paired, interleaved rounds, so that drift and the other sessions' load hit all alike."""

from __future__ import annotations

import statistics
import time

WINDOW = 3  # the last timings that must agree before a callable counts as warm
TOLERANCE = 0.25  # how far apart (max / min - 1) those timings may be
MAX_CALLS = 30
MAX_SECONDS = 20.0  # of warm-up, for a tool whose every call takes seconds
ROUND_SECONDS = 0.02  # each timing repeats a call about this long, for µs-scale launches
MAX_CALLS_A_TIMING = 5000


def warm_up(fn, window=WINDOW, tolerance=TOLERANCE, max_calls=MAX_CALLS, max_seconds=MAX_SECONDS):
    """Call ``fn`` until its last ``window`` timings agree within ``tolerance`` (the first
    call never among them), or ``max_calls`` calls or ``max_seconds`` have passed; the
    seconds of each call, in order."""
    timings = []
    began = time.perf_counter()
    while True:
        start = time.perf_counter()
        fn()
        timings.append(time.perf_counter() - start)
        last = timings[-window:]
        if len(timings) > window and max(last) <= (1 + tolerance) * min(last):
            break
        if len(timings) >= max_calls or time.perf_counter() - began > max_seconds:
            break
    return timings


def calls_a_timing(timings):
    """How many calls one timing makes so that it lasts about ``ROUND_SECONDS``, from the
    warm timings (the last ``WINDOW``)."""
    warm = statistics.median(timings[-WINDOW:])
    return max(1, min(MAX_CALLS_A_TIMING, int(ROUND_SECONDS / max(warm, 1e-7))))


def paired_rounds(fns, rounds):
    """``{name: [seconds a call, one per round]}`` for each of ``fns`` (``{name: fn}``),
    each warmed up first, then timed in ``rounds`` rounds, every round timing each one in
    turn (the order rotating from round to round)."""
    calls = {name: calls_a_timing(warm_up(fn)) for name, fn in fns.items()}
    names = list(fns)
    out = {name: [] for name in names}
    for r in range(rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            fn, count = fns[name], calls[name]
            start = time.perf_counter()
            for _ in range(count):
                fn()
            out[name].append((time.perf_counter() - start) / count)
    return out


def ratio_summary(times, baseline):
    """(median, lowest, highest) of the round-by-round ratios ``times / baseline``."""
    ratios = [t / b for t, b in zip(times, baseline)]
    return statistics.median(ratios), min(ratios), max(ratios)
