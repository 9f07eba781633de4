"""The ``qnb`` command: ``qnb doctor`` and ``qnb cache list|stats|clear|explain NAME``.

Everything heavy (backends, wgpu, CuPy) is imported inside the command that needs it, so
``qnb --help`` stays instant and a missing optional package is reported, never fatal.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
from collections.abc import Sequence
from importlib import metadata

from qnb.console import run_quietly

CACHE_ACTIONS = ("list", "stats", "clear", "explain")

# Distribution names shown by `qnb doctor` when installed (none of them is required).
OPTIONAL_PACKAGES = (
    "wgpu",
    "cupy-cuda13x",
    "cupy-cuda12x",
    "cupy",
    "nvidia-cuda-nvrtc",
    "nvidia-cuda-nvrtc-cu12",
    "ipywidgets",
    "anywidget",
    "jupyterlab",
)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``qnb`` console script and of ``python -m qnb``."""
    parser = _build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    return run_quietly(lambda: args.handler(args))


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="qnb",
        description="qnb: tile kernels in Python (tiles of any power-of-two shape), compiled to "
        "CUDA C++ and WGSL, with a NumPy reference backend.",
    )
    parser.add_argument("--version", action="version", version=f"qnb {_qnb_version()}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    doctor = commands.add_parser(
        "doctor", help="show backends, devices, versions and the kernel cache directory"
    )
    doctor.add_argument("--json", action="store_true", help="print one JSON object instead")
    doctor.set_defaults(handler=_doctor)

    cache = commands.add_parser(
        "cache",
        help="inspect or clear the on-disk kernel cache",
        description="list (the default): entries on disk; stats: counts and sizes; clear: delete every "
        "entry; explain NAME: the cache key components of kernel NAME and why it last missed.",
    )
    cache.add_argument("action", nargs="?", default="list", choices=CACHE_ACTIONS)
    cache.add_argument("rest", nargs=argparse.REMAINDER, help="arguments of the action")
    cache.set_defaults(handler=_cache)
    return parser


# ---- qnb cache -------------------------------------------------------------------------


def _cache(args: argparse.Namespace) -> int:
    if args.action == "explain" and not args.rest:
        print("qnb cache explain: give a kernel name (qnb cache explain NAME)", file=sys.stderr)
        return 2
    from qnb.cache import cli as cache_cli

    return int(cache_cli.run([args.action, *args.rest]) or 0)


# ---- qnb doctor ------------------------------------------------------------------------


def _doctor(args: argparse.Namespace) -> int:
    report = {
        "backends": _backend_records(),
        "auto": _auto_choice(),
        "versions": _versions(),
        "cache": _cache_directory_report(),
    }
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        _print_doctor(report)
    return 0


def _backend_records() -> list[dict]:
    try:
        import qnb

        records = qnb.backends()
    except Exception as exc:  # doctor reports a broken install instead of crashing on it
        reason = f"qnb.backends() failed: {exc!r}"
        return [{"name": "?", "available": False, "device": "none", "reason": reason}]
    return [
        {
            "name": r.name,
            "available": bool(r.available),
            "device": str(r.device),
            "reason": r.reason,
            **({"limits": _wgpu_limits()} if r.name == "wgpu" and r.available else {}),
        }
        for r in records
    ]


def _wgpu_limits() -> str:
    """What the wgpu device can take: f16, and the largest array one binding holds."""
    from qnb.backends import get

    dev = get("wgpu")._dev()
    f16 = "shader-f16" if dev.has_f16 else "no shader-f16 (f16 kernels refused)"
    return f"{f16}; arrays up to {dev.max_binding / 2**20:.0f} MiB each"


def _auto_choice() -> str:
    """The backend "auto" (the default) picks on this machine."""
    try:
        from qnb.backends import registry

        return registry.current_name()
    except Exception as exc:  # noqa: BLE001 - doctor reports, never crashes
        return f"? ({exc!r})"


def _versions() -> dict[str, str]:
    versions = {
        "python": f"{platform.python_version()} ({sys.executable})",
        "platform": platform.platform(),
        "qnb": _qnb_version(),
        "numpy": _distribution_version("numpy") or "missing",
    }
    for name in OPTIONAL_PACKAGES:
        version = _distribution_version(name)
        if version:
            versions[name] = version
    nvrtc = _nvrtc_runtime_version()
    if nvrtc:
        versions["NVRTC (loaded)"] = nvrtc
    return versions


def _qnb_version() -> str:
    from qnb._version import __version__

    return __version__


def _distribution_version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def _nvrtc_runtime_version() -> str | None:
    """The NVRTC library CuPy actually loads (works without a GPU); None when absent."""
    try:
        from cupy.cuda import nvrtc

        major, minor = nvrtc.getVersion()
    except Exception:  # no CuPy, or no loadable NVRTC: doctor shows the package list instead
        return None
    return f"{major}.{minor}"


def _cache_directory_report() -> dict:
    """The cache settings as the library reads them (its own parsing and directory
    check), so doctor says what a launch will do."""
    from qnb.cache import store

    directory = store.directory()
    problem = store.directory_problem(directory)
    environment = {
        name: os.environ[name]
        for name in ("QNB_CACHE", "QNB_ALWAYS_COMPILE", "QNB_CACHE_MAX_BYTES")
        if name in os.environ
    }
    size = environment.get("QNB_CACHE_MAX_BYTES")
    return {
        "directory": str(directory),
        "exists": directory.is_dir(),
        "writable": problem is None,
        "problem": problem,
        "disk_level_wanted": store.disk_enabled(),
        "disk_cache_enabled": store.disk_enabled() and problem is None,
        "always_compile": store.always_compile(),
        "max_bytes": store.DEFAULT_MAX_BYTES if not size else store.parse_max_bytes(size),
        "environment": environment,
    }


def _print_doctor(report: dict) -> None:
    print("Backends")
    for b in report["backends"]:
        state = "available" if b["available"] else f"unavailable: {b['reason']}"
        print(f"  {b['name']:<5} {state}")
        print(f"        device: {b['device']}")
        if "limits" in b:
            print(f"        limits: {b['limits']}")
    print(f"  auto  picks {report['auto']} (cuda, then a hardware wgpu adapter, then cpu)")
    print("\nVersions")
    width = max(len(k) for k in report["versions"])
    for name, version in report["versions"].items():
        print(f"  {name:<{width}}  {version}")
    cache = report["cache"]
    environment = cache["environment"]
    print("\nKernel cache")
    print(f"  directory  {cache['directory']}")
    if not cache["writable"]:
        state = f"NOT usable: {cache['problem']}; kernels are cached in memory only"
    elif cache["exists"]:
        state = "exists, writable"
    else:
        state = "not created yet, writable (made at the first compile)"
    print(f"  state      {state}")
    if cache["disk_cache_enabled"]:
        disk = "on"
    elif not cache["disk_level_wanted"]:
        disk = f"off (QNB_CACHE={environment.get('QNB_CACHE')})"
    else:
        disk = "off (the directory is not usable)"
    print(f"  disk level {disk}")
    if cache["max_bytes"] is None:
        raw = environment["QNB_CACHE_MAX_BYTES"]
        bound = f"QNB_CACHE_MAX_BYTES={raw!r} is not a number of bytes: ignored (1 GiB)"
    else:
        bound = f"{cache['max_bytes']:,} bytes"
    print(f"  size bound {bound}")
    if cache["always_compile"]:
        print(f"  QNB_ALWAYS_COMPILE={environment['QNB_ALWAYS_COMPILE']}: every launch compiles")


if __name__ == "__main__":
    sys.exit(main())
