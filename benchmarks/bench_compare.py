"""``qnb.compare``, measured against what it replaces: running the kernel once on each backend.

Baseline: for each backend (cpu, then wgpu on this machine; cuda too where a GPU is
present), copy the arguments and launch the kernel once. ``qnb.compare`` does that and
then compares every stored array (aim: at most 3x the baseline when the backends agree).
Where they differ it also traces the first differing program on cpu and runs it again in
the GPU's probe build (that row is reported, not aimed at). Kernels are compiled (the
probe build too) before timing; each time is the median of several runs, side by side.

Run: ``python benchmarks/bench_compare.py`` (``main()`` prints the table).
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import qnb  # noqa: E402
from qnb import Tile16  # noqa: E402
from tests import suite  # noqa: E402

RUNS = 7


@qnb.kernel
def cancel(x, out):
    i = qnb.program_id(0)
    t = Tile16.load(x, i * 16, 0)
    v = (t + 1e8) - 1e8  # lavapipe reassociates this to t; NumPy gives 0
    v.store(out, i * 16, 0)


def _case(name):
    return next(c for c in suite.CASES if c.name == name)


def _cases():
    rng = np.random.default_rng(0)
    matmul = _case("tiled_matmul")
    grid, args = matmul.make(rng, np.float32)
    yield "suite tiled_matmul 48x40 @ 40x48", matmul.kernel, grid, args
    n = 256
    a, b = (rng.uniform(-1, 1, (n, n)).astype(np.float32) for _ in range(2))
    yield f"tiled_matmul {n}x{n}", matmul.kernel, (n // 16, n // 16), [a, b, np.zeros_like(a)]
    chol = _case("cholesky_offsets")
    grid, args = chol.make(rng, np.float32)
    yield "suite cholesky_offsets (4 programs)", chol.kernel, grid, args
    x = rng.uniform(0.5, 1.0, (64 * 16, 16)).astype(np.float32)
    yield "cancel (differs: probe re-run included)", cancel, (64,), [x, np.zeros_like(x)]


def _median(fn) -> float:
    fn()  # warm: compile, load, fill caches
    times = []
    for _ in range(RUNS):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _each_backend_once(kernel, grid, args, backends):
    def run():
        for name in backends:
            copies = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
            with qnb.backend(name):
                kernel[grid](*copies)

    return run


def main() -> None:
    backends = [b.name for b in qnb.backends() if b.available]
    print(f"backends: {', '.join(backends)}; median of {RUNS} runs, compiled first")
    if len(backends) < 2:
        print("only cpu here: nothing to compare")
        return
    rows = []
    for label, kernel, grid, args in _cases():
        grid = tuple(grid) if isinstance(grid, tuple) else (grid,)
        launch = kernel[grid]
        baseline = _median(_each_backend_once(kernel, grid, args, backends))
        compared = _median(lambda launch=launch, args=args: qnb.compare(launch, *args))
        equal = qnb.compare(launch, *args).equal
        rows.append((label, equal, baseline, compared))
    width = max(len(r[0]) for r in rows)
    print(f"{'kernel':{width}}  {'equal':5}  {'each once':>10}  {'compare':>10}  ratio")
    for label, equal, baseline, compared in rows:
        print(
            f"{label:{width}}  {equal!s:5}  {baseline * 1e3:8.2f} ms  {compared * 1e3:8.2f} ms"
            f"  {compared / baseline:.2f}x"
        )


if __name__ == "__main__":
    main()
