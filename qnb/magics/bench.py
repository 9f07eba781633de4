"""``%qbench``: time a launch expression with warm-up and a device sync after each run.

The first run's cache events say which backends the expression launches on; every
later run then waits for those backends' devices before its clock stops (a launch
with device arrays returns once its work is queued)."""

from __future__ import annotations

import ast
import contextlib
import linecache
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

import qnb
from qnb.backends import registry

TARGET_SECONDS = 0.5
MIN_RUNS, MAX_RUNS = 3, 1000


@dataclass(repr=False)
class BenchResult:
    """What ``%qbench -o`` returns: ``times`` holds every timed run's seconds;
    ``nbytes``/``flops`` are per launch (given, or counted from the kernel's IR by
    ``qnb.cost``; None: unknown); ``estimate`` says what the count found. Its repr is a one-line summary (a notebook shows that, not a thousand times)."""

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

    def __repr__(self) -> str:
        where = f" [{self.backend}]" if self.backend else ""
        rates = [
            f"{value:.3g} {unit}"
            for value, unit in ((self.gbytes_per_second, "GB/s"), (self.gflops, "GFLOP/s"))
            if value is not None
        ]
        return (
            f"<BenchResult {self.expr}{where}: median {_duration(self.median)}"
            f"{''.join(', ' + rate for rate in rates)}; .times: {len(self.times)} runs>"
        )

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


def device_sync(backend_name: str) -> Callable[[], None] | None:
    """How to wait for the work a launch on ``backend_name`` left queued on its device
    (the backend's ``synchronize``); None for cpu, whose launch returns when done."""
    if backend_name == "cpu":
        return None
    try:
        return registry.get(backend_name).synchronize
    except qnb.QnbError:
        return None


def _cupy_sync() -> None:
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
    code = compile(expr, BENCH_FILENAME, "eval", dont_inherit=True)
    # A traceback through the expression shows its text (as it does for a cell's).
    linecache.cache[BENCH_FILENAME] = (len(expr), None, [expr + "\n"], BENCH_FILENAME)
    syncs: list[Callable[[], None]] = []
    backends: list[str] = []  # those the first run launched on (none: no qnb launch)

    def first() -> float:
        """The first run: its cache events name the backends to wait for."""
        seen: list = []
        qnb.cache.add_listener(seen.append)
        try:
            start = time.perf_counter()
            eval(code, namespace)
        finally:
            qnb.cache.remove_listener(seen.append)
        for name in dict.fromkeys(event.backend for event in seen):
            backends.append(name)
            sync = device_sync(name)
            if sync is not None:
                sync()
                syncs.append(sync)
        if not seen:  # no qnb launch: perhaps the user's own CuPy work
            _cupy_sync()
            syncs.append(_cupy_sync)
        return time.perf_counter() - start

    def once() -> float:
        start = time.perf_counter()
        eval(code, namespace)
        for sync in syncs:
            sync()
        return time.perf_counter() - start

    times = []
    if warmup > 0:
        first()
        for _ in range(warmup - 1):
            once()
    else:
        times.append(first())
    if runs > 0:
        times += [once() for _ in range(runs - len(times))]
    else:
        while len(times) < MAX_RUNS and (len(times) < MIN_RUNS or sum(times) < TARGET_SECONDS):
            times.append(once())
    estimate = ""
    if backends and (nbytes is None or flops is None):  # counted for qnb launches only
        counted = _launch_cost(expr, namespace, backends[-1])
        if counted is not None:
            nbytes = counted.bytes if nbytes is None else nbytes
            flops = counted.flops if flops is None else flops
            estimate = f"counted from the IR: {counted}"
    backend = backends[-1] if backends else None
    return BenchResult(expr.strip(), backend, times, nbytes, flops, estimate)


def _launch_cost(expr: str, namespace: dict, backend: str):
    """The FLOPs and bytes of the launch ``expr`` counted from its IR (``qnb.cost``), or
    None where it is not a launch ``k[grid](...)`` / ``k(...)`` this can see."""
    launch, args = _launch_parts(expr, namespace)
    if not isinstance(launch, qnb.Kernel | qnb.Launch):  # e.g. a function that launches
        return None
    try:
        return launch.specialize(*args, backend=backend).cost(args)
    except qnb.QnbError:  # (the timed runs launched it: a refusal here is not the user's)
        return None


def _launch_parts(expr: str, namespace: dict) -> tuple[object, list]:
    """The launch (``k[grid]``, or ``k``) and the arguments (in parameter order) of
    ``k[grid](a, b=b, ...)`` or ``k(a, b)``. Only names, attributes and constants are
    evaluated, and the grid of a kernel's launch (which every timed run evaluated too):
    nothing else with side effects."""
    try:
        tree = ast.parse(expr.strip(), mode="eval").body
    except SyntaxError:
        return None, []
    if not isinstance(tree, ast.Call) or any(k.arg is None for k in tree.keywords):  # **kw
        return None, []
    callee = tree.func.value if isinstance(tree.func, ast.Subscript) else tree.func
    nodes = [callee, *tree.args, *(keyword.value for keyword in tree.keywords)]
    if not all(isinstance(node, ast.Name | ast.Attribute | ast.Constant) for node in nodes):
        return None, []

    def value_of(node):
        code = compile(ast.Expression(node), BENCH_FILENAME, "eval", dont_inherit=True)
        return eval(code, namespace)

    try:
        kernel = value_of(callee)
        if isinstance(tree.func, ast.Subscript) and isinstance(kernel, qnb.Kernel):
            kernel = value_of(tree.func)  # k[grid]: a qnb.Launch
        args = [value_of(node) for node in tree.args]
        keywords = {keyword.arg: value_of(keyword.value) for keyword in tree.keywords}
    except Exception:
        return None, []
    target = kernel.kernel if isinstance(kernel, qnb.Launch) else kernel
    names = getattr(target, "param_names", None)
    if keywords and isinstance(names, list) and set(keywords) <= set(names[len(args) :]):
        args += [keywords.pop(name) for name in names[len(args) :] if name in keywords]
    return kernel, args + list(keywords.values())  # (left over: counted, not ordered)
