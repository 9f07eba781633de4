"""What the benchmarks share: a median wall time, two calls timed alternately, and a plain
text table."""

from __future__ import annotations

import statistics
import time


def median_time(fn, repeat=5, warmup=1) -> float:
    """The median of ``repeat`` timed calls of ``fn`` (seconds), after ``warmup`` calls."""
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def alternated(first, second, repeats: int) -> tuple[list[float], list[float]]:
    """Each one's seconds over ``repeats`` rounds, timed alternately (first, second, first,
    …) after one call of each, so that drift hits both alike."""
    first()
    second()
    times = ([], [])
    for _ in range(repeats):
        for fn, out in zip((first, second), times):
            start = time.perf_counter()
            fn()
            out.append(time.perf_counter() - start)
    return times


def table(title, header, rows) -> None:
    print(f"\n{title}")
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
    print("  ".join(str(h).ljust(w) for h, w in zip(header, widths)))
    for row in rows:
        print("  ".join(str(x).ljust(w) for x, w in zip(row, widths)))
