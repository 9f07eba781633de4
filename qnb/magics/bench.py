"""``%qbench``: time a launch expression with warm-up and a device sync after each run."""

from __future__ import annotations

import ast
import contextlib
import linecache
import statistics
import sys
import time
from dataclasses import dataclass

import qnb

TARGET_SECONDS = 0.5
MIN_RUNS, MAX_RUNS = 3, 1000


@dataclass
class BenchResult:
    """What ``%qbench -o`` returns. ``nbytes``/``flops`` are per launch (None: unknown);
    ``estimate`` says how they were found."""

    expr: str
    backend: str | None
    times: list[float]
    nbytes: float | None = None
    flops: float | None = None
    estimate: str = ""

    @property
    def median(self) -> float:
        return statistics.median(self.times)

    @property
    def gbytes_per_second(self) -> float | None:
        return self.nbytes / self.median / 1e9 if self.nbytes and self.median > 0 else None

    @property
    def gflops(self) -> float | None:
        return self.flops / self.median / 1e9 if self.flops and self.median > 0 else None

    def __str__(self) -> str:
        where = f" [{self.backend}]" if self.backend else ""
        text = (
            f"{self.expr}{where}: median {_duration(self.median)} over {len(self.times)} "
            f"runs (min {_duration(min(self.times))})"
        )
        if self.gbytes_per_second is not None:
            text += f", {self.gbytes_per_second:.3g} GB/s"
        if self.gflops is not None:
            text += f", {self.gflops:.3g} GFLOP/s"
        if self.estimate:
            text += f"\n  ({self.estimate})"
        return text


def _duration(seconds: float) -> str:
    if seconds >= 1:
        return f"{seconds:.3g} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.3g} ms"
    return f"{seconds * 1e6:.3g} µs"


def synchronize() -> None:
    """Wait for queued device work. Launches with NumPy arrays already wait (results are
    copied back); CuPy arrays on the cuda backend need the device synchronised."""
    sync = getattr(qnb, "synchronize", None)
    if callable(sync):
        sync()
    cupy = sys.modules.get("cupy")
    if cupy is not None:
        with contextlib.suppress(Exception):  # no device: nothing ran there
            cupy.cuda.runtime.deviceSynchronize()


BENCH_FILENAME = "<qbench>"  # the timed expression's frames show under this name


def bench(
    expr: str,
    namespace: dict,
    runs: int = 0,
    warmup: int = 2,
    nbytes: float | None = None,
    flops: float | None = None,
) -> BenchResult:
    code = compile(expr, BENCH_FILENAME, "eval")
    # A traceback through the expression shows its text (as it does for a cell's).
    linecache.cache[BENCH_FILENAME] = (len(expr), None, [expr + "\n"], BENCH_FILENAME)
    events_before = len(qnb.cache.events())

    def once() -> float:
        start = time.perf_counter()
        eval(code, namespace)
        synchronize()
        return time.perf_counter() - start

    for _ in range(max(0, warmup)):
        once()
    times = []
    if runs > 0:
        times = [once() for _ in range(runs)]
    else:
        while len(times) < MAX_RUNS and (len(times) < MIN_RUNS or sum(times) < TARGET_SECONDS):
            times.append(once())
    backend = None
    recent = qnb.cache.events()[events_before:]
    if recent:
        backend = recent[-1].backend
    estimate = ""
    if nbytes is None or flops is None:
        kernel, args = _launch_parts(expr, namespace)
        arrays = [a for a in args if hasattr(a, "nbytes") and hasattr(a, "shape")]
        if nbytes is None and arrays:
            nbytes = float(sum(a.nbytes for a in arrays))
            estimate = "bytes: each array argument read or written once"
        if flops is None and arrays and _has_matmul(kernel, args):
            flops, how = _matmul_flops(arrays)
            if how:
                estimate = "; ".join(filter(None, [estimate, how]))
    return BenchResult(expr.strip(), backend, times, nbytes, flops, estimate)


def _launch_parts(expr: str, namespace: dict) -> tuple[object, list]:
    """The kernel and arguments of a launch ``k[grid](a, b, ...)`` or ``k(a, b)``,
    evaluating only names, attributes and constants (nothing with side effects)."""
    try:
        tree = ast.parse(expr.strip(), mode="eval").body
    except SyntaxError:
        return None, []
    if not isinstance(tree, ast.Call):
        return None, []
    simple = (ast.Name, ast.Attribute, ast.Constant)
    callee = tree.func.value if isinstance(tree.func, ast.Subscript) else tree.func
    if not isinstance(callee, simple) or not all(isinstance(a, simple) for a in tree.args):
        return None, []
    try:
        kernel, *args = (
            eval(compile(ast.Expression(node), "<qbench>", "eval"), namespace)
            for node in [callee, *tree.args]
        )
    except Exception:
        return None, []
    return kernel, args


def _has_matmul(kernel, args) -> bool:
    """Whether the kernel's IR (``kernel.source("ir", *args)``) has a matrix product."""
    try:
        text = kernel.source("ir", *args).lower()
    except Exception:  # not a kernel, or its IR cannot be rendered for these arguments
        return False
    return "matmul" in text or "mma" in text


def _matmul_flops(arrays) -> tuple[float | None, str]:
    """2·M·N·K when three 2-D arguments have the shapes of C[M,N] = A[M,K] @ B[K,N]."""
    mats = [a for a in arrays if len(a.shape) == 2]
    for a in mats:
        for b in mats:
            for c in mats:
                if a is b or b is c or a is c:
                    continue
                (m, k), (k2, n), (m2, n2) = a.shape, b.shape, c.shape
                if k == k2 and m == m2 and n == n2:
                    return 2.0 * m * n * k, (
                        f"flops: 2·{m}·{n}·{k}, from the shapes of a matrix product"
                    )
    return None, ""
