"""Discover ``benchmarks/bench_*.py`` and run each module's ``main()`` in turn.

    python -m benchmarks                 # all of them
    python -m benchmarks matmul cache    # bench_matmul.py and bench_cache.py
    python -m benchmarks --list

One benchmark that fails is reported and the others still run; the exit status is 1 if
any failed.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent


def discover() -> list[str]:
    """Names (without the ``bench_`` prefix) of the benchmark modules, sorted."""
    return sorted(p.stem.removeprefix("bench_") for p in HERE.glob("bench_*.py"))


def run_one(name: str) -> bool:
    print(f"\n=== {name} " + "=" * max(0, 70 - len(name)), flush=True)
    start = time.perf_counter()
    saved_argv = sys.argv
    # Each module runs as if started alone with no arguments: several read sys.argv for
    # their own options, and must not see this runner's list of names.
    sys.argv = [str(HERE / f"bench_{name}.py")]
    try:
        module = importlib.import_module(f"benchmarks.bench_{name}")
        module.main()
    except Exception:
        traceback.print_exc()
        print(f"--- {name}: FAILED after {time.perf_counter() - start:.1f} s", flush=True)
        return False
    finally:
        sys.argv = saved_argv
    print(f"--- {name}: {time.perf_counter() - start:.1f} s", flush=True)
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks", description=__doc__.split("\n")[0]
    )
    parser.add_argument("names", nargs="*", help="benchmarks to run (default: all)")
    parser.add_argument("--list", action="store_true", help="list the benchmarks and exit")
    args = parser.parse_args(argv)

    available = discover()
    if args.list:
        print("\n".join(available) or "(no benchmarks/bench_*.py yet)")
        return 0
    unknown = [n for n in args.names if n not in available]
    if unknown:
        parser.error(f"unknown benchmark(s) {', '.join(unknown)}; have: {', '.join(available)}")
    chosen = args.names or available
    if not chosen:
        print("no benchmarks/bench_*.py yet: nothing to run")
        return 0
    # Run from any directory: make the repo root importable.
    root = str(HERE.parent)
    if root not in sys.path:
        sys.path.insert(0, root)
    failed = [name for name in chosen if not run_one(name)]
    if failed:
        print(f"\nfailed: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.path.insert(0, str(HERE.parent))
    sys.exit(main())
