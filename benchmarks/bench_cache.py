"""What the kernel cache buys, measured in fresh processes.

1. Time to first result of a suite of ≥ 20 different kernels (tests/suite.py, else 24
   generated variants) in a fresh process, with an
   empty cache directory (cold: every kernel compiles) and again with the directory the
   cold run filled (warm: every kernel loads from disk), per available backend.
2. The qnb-side work a warm start skips (lower + compile + store) against what it does
   (key + verified read), per kernel, in one process; cuda is measured too where NVRTC is
   installed, since compiling needs no GPU.
3. The launch overhead of a memory hit: a trivial kernel launched through ``k[1](x)``
   against calling its launcher directly, in µs and as a ratio; the cost of
   ``qnb.cache.record_memory_hit`` alone; and qnb's own work per launch alone ("qnb
   alone": the same launch with the launcher swapped for a no-op), which is what a fast
   device launch, e.g. CUDA's few µs, would see on top of it.

Run: ``python benchmarks/bench_cache.py`` (``main()`` prints the tables).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ROUNDS = 3

# Six kernel bodies × four captured constants = 24 kernels with distinct keys.
BODIES = [
    "t = t * SCALE + 1.0",
    "t = qnb.exp(t) - SCALE",
    "t = t @ t + SCALE",
    "t = qnb.where(t > SCALE, t, -t)",
    "t = qnb.maximum(t, t.T) * SCALE",
    "t = qnb.sqrt(qnb.abs(t)) + t * SCALE",
]
SCALES = [0.5, 1.5, 2.0, 3.25]


def kernels_source(bodies, scales) -> tuple[list[str], list[str]]:
    """The source of one kernel per body and captured constant (``k0``, ``k1`` … each
    reading its own ``SCALE_n``), and their names: the suites of bench_cache and
    bench_warm."""
    parts, names = [], []
    for body in bodies:
        for scale in scales:
            n = len(names)
            names.append(f"k{n}")
            parts.append(
                textwrap.dedent(
                    f"""
                    SCALE_{n} = {scale!r}


                    @qnb.kernel
                    def k{n}(x: qnb.Array[qnb.f32, 2], y: qnb.Array[qnb.f32, 2]):
                        i = qnb.program_id(0)
                        t = qnb.Tile16.load(x, i * 16, 0)
                        {body.replace("SCALE", f"SCALE_{n}")}
                        t.store(y, i * 16, 0)
                    """
                )
            )
    return parts, names


def suite_source() -> str:
    """A module defining kernels ``k0 … k23``, each reading its own captured constant."""
    kernels, names = kernels_source(BODIES, SCALES)
    parts = ["import qnb\n", *kernels]
    parts.append(f"\nKERNELS = [{', '.join(names)}]\n")
    parts.append(
        textwrap.dedent(
            """

            @qnb.kernel
            def trivial(x: qnb.Array[qnb.f32, 2]):
                x[0, 0] = 1.0
            """
        )
    )
    return "".join(parts)


FIRST_RESULTS = """
import json, sys, time
start = time.perf_counter()
import numpy as np
import qnb
qnb.set_backend(sys.argv[1])
if sys.argv[2] == "tests":
    from tests import suite
    runs = []
    for case in suite.CASES:
        dtype = np.float32 if np.float32 in case.dtypes else case.dtypes[0]
        runs.append((case.kernel, case.make, dtype))
else:
    import cache_suite
    def make(rng, dtype):
        x = np.linspace(0.0, 1.0, 32 * 16, dtype=np.float32).reshape(32, 16)
        return 2, [x, np.zeros_like(x)]
    runs = [(kernel, make, np.float32) for kernel in cache_suite.KERNELS]
imported = time.perf_counter()
rng = np.random.default_rng(0)
skipped = 0
for kernel, make, dtype in runs:
    grid, args = make(rng, dtype)
    try:
        kernel[grid](*args)
    except qnb.BackendError:  # e.g. an i32/f64-only case on WGSL
        skipped += 1
done = time.perf_counter()
outcomes = [event.outcome for event in qnb.cache.events()]
print(json.dumps({"import": imported - start, "first_results": done - imported,
                  "process": done - start, "outcomes": outcomes, "skipped": skipped}))
"""


OVERHEAD = """
import json, sys, time
import numpy as np
import qnb
qnb.set_backend(sys.argv[1])
from cache_suite import trivial

x = np.zeros((16, 16), np.float32)
trivial[1](x)
trivial[1](x)
launcher = qnb.cache.lookup.memory_launcher(qnb.cache.events()[-1].key)
assert launcher is not None

def per_call(fn, n):
    best = float("inf")
    for _ in range(7):
        t = time.perf_counter()
        for _ in range(n):
            fn()
        best = min(best, (time.perf_counter() - t) / n)
    return best

n = int(sys.argv[2])
grid, args = (1, 1, 1), [x]
launch = per_call(lambda: trivial[1](x), n)
direct = per_call(lambda: launcher(grid, args), n)
key = qnb.cache.CacheKey({name: {} for name in qnb.cache.COMPONENTS})
record = per_call(lambda: qnb.cache.record_memory_hit("trivial", "cpu", key, 0.0), n)
hits = sum(event.outcome == "memory-hit" for event in qnb.cache.events())
# qnb's own work per launch, alone: the memoised launcher swapped for a no-op.
for prepared in trivial._memo.values():
    prepared.launcher = lambda grid, args: None
own = per_call(lambda: trivial[1](x), n)
print(json.dumps({"launch": launch, "direct": direct, "record": record, "hits": hits,
                  "own": own}))
"""


QNB_SIDE = """
import json, sys, time
import numpy as np
from qnb.backends import registry
from qnb.backends.base import Options
from qnb.cache import CacheKey, store
from tests import suite

name = sys.argv[1]
backend = registry.get(name)
compile_artifact = backend.compile
if name == "cuda" and not backend.info().available:  # NVRTC runs without a GPU
    def compile_artifact(ir, options):
        return backend.compile_for_arch(ir, options, arch="sm_90")
reference = registry.get("cpu")  # for the key's backend/compiler components only
rng = np.random.default_rng(0)
cold = warm = 0.0
count = 0
for case in suite.CASES:
    dtype = np.float32 if np.float32 in case.dtypes else case.dtypes[0]
    _, args = case.make(rng, dtype)
    kernel = case.kernel
    signature = kernel._signature(args)[0]
    resolved = kernel._resolve()
    components = kernel._key_components(reference, signature, resolved.captured, resolved.sources)
    components["backend"] = {"name": name}
    start = time.perf_counter()  # cold: key, lower, compile, store
    key = CacheKey(components)
    ir = kernel._lower(signature, resolved)
    try:
        artifact = compile_artifact(ir, Options())
    except Exception as exc:  # e.g. f64 on WGSL
        continue
    store.save(kernel.name, name, key, artifact)
    middle = time.perf_counter()  # warm: key, verified read
    key = CacheKey(components)
    loaded, why = store.load(kernel.name, key)
    end = time.perf_counter()
    assert loaded is not None and loaded.text == artifact.text, why
    cold += middle - start
    warm += end - middle
    count += 1
print(json.dumps({"kernels": count, "cold": cold, "warm": warm}))
"""


def qnb_side(backend: str, suite_dir: str) -> dict:
    """In one process: the work a warm start skips (lower + compile + store) against the
    work it does (key + verified read), for the tests suite."""
    with tempfile.TemporaryDirectory(prefix="qnb-bench-cache-") as cache_dir:
        return _python(QNB_SIDE, [backend], _env(suite_dir, cache_dir))


def nvrtc_available() -> bool:
    try:
        from qnb.backends import cuda

        cuda.nvrtc_version()
        cuda.include_dirs()
    except Exception:
        return False
    return True


def _python(code: str, args: list[str], env: dict) -> dict:
    result = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, timeout=900
    )
    if result.returncode != 0:
        raise RuntimeError(f"benchmark process failed:\n{result.stderr[-3000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def _env(suite_dir: str, cache_dir: str) -> dict:
    env = dict(os.environ)
    env["QNB_CACHE_DIR"] = cache_dir
    runtime = Path(suite_dir, "xdg-runtime")  # Mesa wants a private runtime dir
    runtime.mkdir(mode=0o700, exist_ok=True)
    env.setdefault("XDG_RUNTIME_DIR", str(runtime))
    env["PYTHONPATH"] = os.pathsep.join([suite_dir, str(REPO), env.get("PYTHONPATH", "")])
    for name in ("QNB_CACHE", "QNB_ALWAYS_COMPILE"):
        env.pop(name, None)
    return env


def available_backends() -> list[str]:
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    import qnb

    return [b.name for b in qnb.backends() if b.available]


def first_results(backend: str, suite_dir: str, suite: str) -> dict:
    """Median cold and warm timings over ROUNDS fresh cache directories."""
    cold, warm = [], []
    for _ in range(ROUNDS):
        with tempfile.TemporaryDirectory(prefix="qnb-bench-cache-") as cache_dir:
            env = _env(suite_dir, cache_dir)
            cold_run = _python(FIRST_RESULTS, [backend, suite], env)
            warm_run = _python(FIRST_RESULTS, [backend, suite], env)
        assert "disk-hit" not in cold_run["outcomes"], cold_run["outcomes"]
        assert "miss" not in warm_run["outcomes"], warm_run["outcomes"]
        cold.append(cold_run)
        warm.append(warm_run)

    def median(runs, field):
        return statistics.median(run[field] for run in runs)

    return {
        "kernels": cold[0]["outcomes"].count("miss"),
        "cold": median(cold, "first_results"),
        "warm": median(warm, "first_results"),
        "cold_process": median(cold, "process"),
        "warm_process": median(warm, "process"),
    }


def overhead(backend: str, suite_dir: str, n: int = 2000) -> dict:
    with tempfile.TemporaryDirectory(prefix="qnb-bench-cache-") as cache_dir:
        return _python(OVERHEAD, [backend, str(n)], _env(suite_dir, cache_dir))


def which_suite() -> str:
    """ "tests" (the shared tile suite, tests/suite.py) when it has at least 20 kernels,
    else "generated" (the 24 variants above)."""
    try:
        if str(REPO) not in sys.path:
            sys.path.insert(0, str(REPO))
        from tests import suite

        return "tests" if len({id(case.kernel) for case in suite.CASES}) >= 20 else "generated"
    except Exception:
        return "generated"


def main() -> None:
    backends = [b for b in available_backends() if b != "cuda" or os.environ.get("QNB_BENCH_CUDA")]
    suite = which_suite()
    with tempfile.TemporaryDirectory(prefix="qnb-bench-suite-") as suite_dir:
        Path(suite_dir, "cache_suite.py").write_text(suite_source())
        print(
            f"Time to first result of every kernel of the {suite} suite in a fresh process: cold "
            f"(empty cache dir) vs warm (the dir the cold run filled); median of {ROUNDS}.\n"
            "launches = first launch of each kernel, after imports; process = python start to last result"
        )
        print(
            f"{'backend':<8} {'kernels':>7} {'cold launches':>14} {'warm launches':>14} {'ratio':>7}   "
            f"{'cold process':>13} {'warm process':>13} {'ratio':>7}"
        )
        for backend in backends:
            r = first_results(backend, suite_dir, suite)
            print(
                f"{backend:<8} {r['kernels']:>7} {r['cold'] * 1e3:>12.1f}ms {r['warm'] * 1e3:>12.1f}ms "
                f"{r['cold'] / r['warm']:>6.1f}x   {r['cold_process'] * 1e3:>11.1f}ms "
                f"{r['warm_process'] * 1e3:>11.1f}ms {r['cold_process'] / r['warm_process']:>6.1f}x"
            )
        print()
        print(
            "qnb-side work per suite kernel (tests suite, one process): cold = key + lower + "
            "compile + store; warm = key + verified read.\n"
            "cuda compiles with NVRTC for sm_90 here (no GPU needed for this part)."
        )
        print(f"{'backend':<8} {'kernels':>7} {'cold/kernel':>12} {'warm/kernel':>12} {'ratio':>7}")
        side = list(backends)
        if "cuda" not in side and nvrtc_available():
            side.append("cuda")
        for backend in side:
            q = qnb_side(backend, suite_dir)
            n = max(q["kernels"], 1)
            print(
                f"{backend:<8} {q['kernels']:>7} {q['cold'] / n * 1e3:>10.2f}ms "
                f"{q['warm'] / n * 1e3:>10.2f}ms {q['cold'] / q['warm']:>6.1f}x"
            )
        print()
        print("Memory-hit launch of a trivial kernel vs calling its launcher directly (best of 7)")
        print(
            f"{'backend':<8} {'k[1](x)':>10} {'launcher':>10} {'overhead':>10} {'ratio':>7} "
            f"{'record_memory_hit':>18} {'qnb alone':>10}"
        )
        for backend in backends:
            o = overhead(backend, suite_dir, n=2000 if backend == "cpu" else 200)
            print(
                f"{backend:<8} {o['launch'] * 1e6:>8.2f}µs {o['direct'] * 1e6:>8.2f}µs "
                f"{(o['launch'] - o['direct']) * 1e6:>8.2f}µs {o['launch'] / o['direct']:>6.2f}x "
                f"{o['record'] * 1e6:>16.2f}µs {o['own'] * 1e6:>8.2f}µs"
            )


if __name__ == "__main__":
    main()
