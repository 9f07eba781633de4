"""Lowering cost: every kernel of the test corpus (``tests/suite.py`` and
``tests/shape_cases.py``, at every dtype and shape the tests run) lowered to IR in one process.

    python -m benchmarks.bench_lower            # a table
    python -m benchmarks.bench_lower --json     # {"kernels", "lower", "digest"}

``lower`` is the median over rounds (``best``: the least) of the CPU time to lower the
whole corpus once (the kernels are resolved and their signatures taken before the clock
starts); ``digest``
hashes the JSON of every IR lowered, so two trees that lower alike print the same one.
"""

from __future__ import annotations

import hashlib
import json
import statistics
import sys
import time

import numpy as np

from benchmarks._timing import table


def corpus() -> list:
    """(name, kernel, signature, resolved) for each kernel of the corpus."""
    from tests import shape_cases, suite

    rng = np.random.default_rng(0)
    found = []
    for case in suite.CASES:
        for dtype in case.dtypes:
            _, args = case.make(rng, dtype)
            found.append((case.name, case.kernel, args))
    for case, dtype, shape in shape_cases.params():
        _, args = case.make(rng, dtype, shape)
        found.append((case.name, case.kernel, args))
    prepared = []
    for name, kernel, args in found:
        signature = kernel._signature(args)[0]
        prepared.append((name, kernel, signature, kernel._resolve()))
    return prepared


def lower_all(prepared) -> list:
    return [kernel._lower(signature, resolved) for _, kernel, signature, resolved in prepared]


def measure(rounds: int = 7) -> dict:
    from qnb import ir

    prepared = corpus()
    lowered = lower_all(prepared)
    digest = hashlib.sha256()
    for kernel_ir in lowered:
        digest.update(json.dumps(ir.kernel_to_json(kernel_ir), sort_keys=True).encode())
    samples = []
    for _ in range(rounds):
        start = time.process_time()  # CPU time: less disturbed by other work on the machine
        lower_all(prepared)
        samples.append(time.process_time() - start)
    return {
        "kernels": len(prepared),
        "lower": statistics.median(samples),
        "best": min(samples),
        "digest": digest.hexdigest()[:16],
    }


def main() -> None:
    result = measure()
    if "--json" in sys.argv:
        print(json.dumps(result))
        return
    table(
        "Lowering every kernel of the test corpus (CPU time, median of 7 rounds)",
        ["kernels", "whole corpus", "per kernel", "IR digest"],
        [
            [
                result["kernels"],
                f"{result['lower'] * 1e3:.1f}ms",
                f"{result['lower'] / result['kernels'] * 1e3:.3f}ms",
                result["digest"],
            ]
        ],
    )


if __name__ == "__main__":
    main()
