"""What the benchmarks share: a median wall time and a plain text table."""

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


def table(title, header, rows) -> None:
    print(f"\n{title}")
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
    print("  ".join(str(h).ljust(w) for h, w in zip(header, widths)))
    for row in rows:
        print("  ".join(str(x).ljust(w) for x, w in zip(row, widths)))
