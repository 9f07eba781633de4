"""``qnb cache list|stats|clear|explain NAME``: the disk store from a shell."""

from __future__ import annotations

import argparse
import os
import sys
import time

from qnb.cache import store
from qnb.cache.report import explain_disk


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="qnb cache", description="Inspect the qnb kernel cache on disk."
    )
    commands = parser.add_subparsers(dest="command", metavar="{list,stats,clear,explain}")
    commands.add_parser("list", help="one line per entry, most recently used first")
    commands.add_parser("stats", help="directory, entries, size and bound")
    commands.add_parser("clear", help="delete every entry")
    explain = commands.add_parser("explain", help="a kernel's entries and why each key differs")
    explain.add_argument("name", help="kernel name (or the last part of its qualified name)")
    return parser


def _size(count: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if count < 1024 or unit == "GiB":
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1024
    return str(count)


def defined_at(info: store.EntryInfo) -> str:
    """Where the entry's kernel was defined: the file (or notebook cell) and line of the
    def that compiled it, else (an entry an older qnb wrote) the module its key names."""
    if info.origin:
        return info.origin
    units = info.components.get("source")
    if isinstance(units, dict):
        for unit in units:  # "module:qualname"; the kernel's own unit comes first
            module, _, qualname = unit.partition(":")
            if qualname.split("#")[0].rsplit(".", 1)[-1] == info.kernel.rsplit(".", 1)[-1]:
                return f"module {module}"
    return "?"


def disk_state(root) -> str:
    """ "on", or "off" and why, as a launch in a new process would find it."""
    if not store.disk_enabled():
        return f"off (QNB_CACHE={os.environ.get('QNB_CACHE', '')})"
    why = store.directory_problem(root)
    return "on" if why is None else f"off: {why} (kernels are cached in memory only)"


def run(argv: list[str], out=None, err=None) -> int:
    """Run one ``qnb cache`` command; returns the exit status."""
    out = out or sys.stdout
    err = err or sys.stderr
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse has printed the usage
        return int(exc.code or 0)
    root = store.directory()
    refused = store.refusal(root)
    if refused is not None and args.command in (None, "list", "explain"):
        print(f"qnb cache: not reading {root}: {refused}", file=err)
        return 1
    if args.command in (None, "list"):
        infos = store.list_entries(root=root)
        if not infos:
            print(f"no entries in {root}", file=out)
            return 0
        width = max(len("kernel"), *(len(info.kernel) for info in infos))
        print(
            f"{'kernel':<{width}}  backend  key           size       last used            defined at",
            file=out,
        )
        for info in infos:
            used = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(info.last_used))
            print(
                f"{info.kernel:<{width}}  {info.backend:<7}  {info.short}  {_size(info.file_size):>9}  {used}  {defined_at(info)}",
                file=out,
            )
        return 0
    if args.command == "stats":
        entries, size = store.disk_usage(root)
        print(f"directory  {root}", file=out)
        print(f"disk cache {disk_state(root)}", file=out)
        print(f"entries    {entries}", file=out)
        print(f"size       {_size(size)} of {_size(store.max_bytes())}", file=out)
        return 0
    if args.command == "clear":
        result = store.clear_disk(root)
        if result.failed:
            print(f"qnb cache clear: {result}", file=err)
            return 1
        print(result, file=out)
        return 0
    if args.command == "explain":
        text = explain_disk(args.name)
        print(text, file=out)
        return 0 if not text.startswith("no entries") else 1
    parser.print_usage(file=out)
    return 2


if __name__ == "__main__":  # as `qnb cache ...`, which also ends quietly on a closed pipe
    from qnb.console import run_quietly

    raise SystemExit(run_quietly(lambda: run(sys.argv[1:])))
