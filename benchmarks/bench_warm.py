"""Warm starts: 20 kernels in a fresh process, warm disk cache against an empty one.

Each round makes an empty ``QNB_CACHE_DIR``, runs a fresh process that launches 20
different kernels once each (cold: every kernel compiles, and on wgpu the driver compiles
every pipeline), then a second fresh process on the directory the first one filled
(warm). Times are from the parent's spawn to the process's last result ("process") and
for the 20 first launches after the kernels are defined ("launches", what bench_cache
calls first results), medians of ``ROUNDS``; the ratio is cold / warm. The phases of the warm process say what a warm start still pays:
interpreter + imports, the backend's device, and the 20 first launches. Python's
bytecode cache is on (in a private prefix), as for an installed qnb.

    python -m benchmarks warm                  # cpu and wgpu (where available)
    QNB_BENCH_QUICK=1 python -m benchmarks warm
    python benchmarks/bench_warm.py --profile wgpu   # cProfile of one warm process
    python benchmarks/bench_warm.py --baseline ../main [cpu|wgpu]   # before/after

``--baseline CHECKOUT`` runs the same rounds with the qnb of another checkout too,
interleaved round by round (so both see the same load), and prints its rows beside
this one's.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as a script: benchmarks.bench_cache and qnb from here
    sys.path.insert(0, str(REPO))
ROUNDS = 3 if os.environ.get("QNB_BENCH_QUICK") == "1" else 5

# bench_cache's six bodies and four more, × two captured constants: 20 kernels with
# distinct keys, all f32 (every backend runs them), from elementwise to a product and a
# row softmax.
MORE_BODIES = [
    "t = qnb.exp(t - t.max(axis=1, keepdims=True)) * SCALE",
    "t = t - t.sum(axis=0, keepdims=True) * SCALE",
    "t = qnb.tanh(t * SCALE) @ t",
    "t = qnb.minimum(t, SCALE) + qnb.floor(t)",
]
SCALES = [0.5, 2.0]


def suite_source() -> str:
    """A module defining ``KERNELS``: 20 kernels, each reading its own captured constant."""
    from benchmarks.bench_cache import BODIES, kernels_source

    kernels, names = kernels_source([*BODIES, *MORE_BODIES], SCALES)
    parts = ["import qnb\n", *kernels]
    parts.append(f"\nKERNELS = [{', '.join(names)}]\n")
    return "".join(parts)


PROCESS = """
import json, sys, time
start = time.perf_counter()
import numpy as np
import qnb
imported = time.perf_counter()
qnb.set_backend(sys.argv[1])
import warm_suite
defined = time.perf_counter()
x = np.linspace(-1.0, 1.0, 32 * 16, dtype=np.float32).reshape(32, 16)
y = np.zeros_like(x)
warm_suite.KERNELS[0][2](x, y)
first = time.perf_counter()
for kernel in warm_suite.KERNELS[1:]:
    kernel[2](x, y)
done = time.perf_counter()
outcomes = [event.outcome for event in qnb.cache.events()]
print(json.dumps({"import": imported - start, "define": defined - imported,
                  "first": first - defined, "rest": done - first, "launches": done - defined,
                  "outcomes": outcomes}))
"""


def _env(suite_dir: str, cache_dir: str, repo: Path = REPO) -> dict:
    env = dict(os.environ)
    env["QNB_CACHE_DIR"] = cache_dir
    runtime = Path(suite_dir, "xdg-runtime")  # Mesa wants a private runtime dir
    runtime.mkdir(mode=0o700, exist_ok=True)
    env.setdefault("XDG_RUNTIME_DIR", str(runtime))
    env["PYTHONPATH"] = os.pathsep.join([suite_dir, str(repo), env.get("PYTHONPATH", "")])
    for name in ("QNB_CACHE", "QNB_ALWAYS_COMPILE", "MESA_SHADER_CACHE_DIR"):
        env.pop(name, None)
    # Python's own bytecode cache, as an installed qnb has it (CI sets
    # PYTHONDONTWRITEBYTECODE, which would make both runs compile qnb's modules again).
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(Path(suite_dir, "pycache"))
    return env


def _run(backend: str, env: dict, profile: bool = False) -> dict:
    command = [sys.executable]
    if profile:
        command += ["-m", "cProfile", "-s", "cumulative"]
    spawned = time.perf_counter()
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as script:
        script.write(PROCESS)
    try:
        result = subprocess.run(
            [*command, script.name, backend], capture_output=True, text=True, env=env, timeout=900
        )
    finally:
        os.unlink(script.name)
    elapsed = time.perf_counter() - spawned
    if result.returncode != 0:
        raise RuntimeError(f"benchmark process failed:\n{result.stderr[-3000:]}")
    if profile:
        return {"profile": result.stdout}
    record = json.loads(result.stdout.strip().splitlines()[-1])
    record["process"] = elapsed
    return record


FIELDS = ("process", "launches", "import", "define", "first", "rest")


def measure(backend: str, suite_dir: str, repos: tuple[Path, ...] = (REPO,)) -> list[dict]:
    """Per checkout in ``repos`` (its qnb imported first), medians over ROUNDS of a cold
    and a warm process on one fresh cache directory (after an untimed run that fills
    Python's bytecode cache); the checkouts take turns within each round."""
    for repo in repos:
        with tempfile.TemporaryDirectory(prefix="qnb-bench-warm-") as cache_dir:
            _run(backend, _env(suite_dir, cache_dir, repo))
    runs = [([], []) for _ in repos]
    for _ in range(ROUNDS):
        for repo, (cold, warm) in zip(repos, runs):
            with tempfile.TemporaryDirectory(prefix="qnb-bench-warm-") as cache_dir:
                env = _env(suite_dir, cache_dir, repo)
                cold_run = _run(backend, env)
                warm_run = _run(backend, env)
            assert cold_run["outcomes"].count("miss") == 20, cold_run["outcomes"]
            assert warm_run["outcomes"].count("disk-hit") == 20, warm_run["outcomes"]
            cold.append(cold_run)
            warm.append(warm_run)
    return [
        {
            "cold": {f: statistics.median(r[f] for r in cold) for f in FIELDS},
            "warm": {f: statistics.median(r[f] for r in warm) for f in FIELDS},
            "spread": {f: _spread(cold, warm, f) for f in ("process", "launches")},
            "warm_rounds": warm,
        }
        for cold, warm in runs
    ]


def _spread(cold: list[dict], warm: list[dict], field: str) -> tuple[float, float]:
    """The lowest and highest cold / warm ratio of one round (a round's cold and warm
    processes run back to back, so they saw about the same load)."""
    ratios = [c[field] / w[field] for c, w in zip(cold, warm)]
    return min(ratios), max(ratios)


def profile(backend: str, suite_dir: str) -> str:
    """cProfile (cumulative) of a warm process, after a cold one filled the directory."""
    with tempfile.TemporaryDirectory(prefix="qnb-bench-warm-") as cache_dir:
        env = _env(suite_dir, cache_dir)
        _run(backend, env)
        _run(backend, env)
        return _run(backend, env, profile=True)["profile"]


def _speedup(backend: str, before: list[dict], after: list[dict]) -> str:
    """The warm process of the baseline against this checkout's, round by round (the two
    ran one after the other in each round): median and range of before / after."""
    parts = []
    for field in ("process", "launches", "first", "rest"):
        ratios = [b[field] / a[field] for b, a in zip(before, after)]
        parts.append(
            f"{field} {statistics.median(ratios):.2f}x [{min(ratios):.2f}-{max(ratios):.2f}]"
        )
    return f"  warm {backend}, before / after by round: " + ", ".join(parts)


def available_backends() -> list[str]:
    import qnb

    return [b.name for b in qnb.backends() if b.available and b.name in ("cpu", "wgpu")]


def _row(label: str, r: dict) -> str:
    c, w = r["cold"], r["warm"]
    spread = {f: "[{:.1f}-{:.1f}]".format(*r["spread"][f]) for f in r["spread"]}
    return (
        f"{label:<14} {c['process'] * 1e3:>11.0f}ms {w['process'] * 1e3:>11.0f}ms "
        f"{c['process'] / w['process']:>5.1f}x {spread['process']:>11}   "
        f"{c['launches'] * 1e3:>12.0f}ms "
        f"{w['launches'] * 1e3:>12.0f}ms {c['launches'] / w['launches']:>5.1f}x "
        f"{spread['launches']:>11}   "
        f"{w['import'] * 1e3:>10.0f}ms {w['define'] * 1e3:>5.0f}ms "
        f"{w['first'] * 1e3:>5.0f}ms {w['rest'] * 1e3:>6.0f}ms"
    )


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    repos: tuple[Path, ...] = (REPO,)
    if argv[:1] == ["--baseline"]:
        repos = (Path(argv[1]).resolve(), REPO)
        argv = argv[2:]
    with tempfile.TemporaryDirectory(prefix="qnb-bench-suite-") as suite_dir:
        Path(suite_dir, "warm_suite.py").write_text(suite_source())
        if argv[:1] == ["--profile"]:
            text = profile(argv[1] if len(argv) > 1 else "cpu", suite_dir)
            print("\n".join(text.splitlines()[:60]))
            return
        print(
            f"20 kernels in a fresh process: cold (empty cache dir) vs warm (the dir the cold "
            f"run filled), medians of {ROUNDS}.\nprocess = spawn to last result; launches = "
            "the 20 first launches, after imports and the kernels' definitions (as "
            "bench_cache's 'first results').\nwarm phases: import numpy + qnb, define "
            "(set_backend, decorating 20 kernels), the first launch, the 19 others; "
            "rounds = the lowest and highest ratio of one round's cold and warm processes"
        )
        if len(repos) > 1:
            print(f"baseline: {repos[0]} (rounds interleaved with this checkout's)")
        print(
            f"{'backend':<14} {'cold process':>13} {'warm process':>13} {'ratio':>6} "
            f"{'rounds':>11}   {'cold launches':>14} {'warm launches':>14} {'ratio':>6} "
            f"{'rounds':>11}   "
            f"{'warm: import':>12} {'define':>7} {'first':>7} {'19 more':>8}"
        )
        for backend in argv or available_backends():
            results = measure(backend, suite_dir, repos)
            labels = [backend] if len(repos) == 1 else [f"{backend} before", f"{backend} after"]
            for label, r in zip(labels, results):
                print(_row(label, r))
            if len(results) > 1:
                print(_speedup(backend, results[0]["warm_rounds"], results[-1]["warm_rounds"]))


if __name__ == "__main__":
    main()
