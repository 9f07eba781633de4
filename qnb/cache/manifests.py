"""Read manifests: which compile-time reads a kernel's lowering made, per pre-key.

``<kernel>-<pre-key digest>.reads``, beside the entries: for a kernel whose lowering read
compile-time values past its pre-lowering key (see ``qnb.frontend.reads``), the lists of
reads (label, path, attribute) its compiles made, and the digests of the entries those
compiles stored. A later process reads those paths' current values and so forms the full
key of the entry it may load; the entry's own components hold the values.

A manifest is only an index of its entries: it counts toward ``QNB_CACHE_MAX_BYTES`` and
goes when eviction has removed the last entry it lists (:func:`drop_orphans`), so a kernel
relaunched with ever new values leaves no trail of manifests behind its evicted entries.
"""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path
from typing import Any

from qnb.cache import store
from qnb.cache.key import canonical_json
from qnb.cache.logs import LazyLogger

log = LazyLogger("qnb.cache")

MANIFEST_SUFFIX = ".reads"
MAX_MANIFEST_BYTES = 1 << 20
MAX_MANIFEST_SETS = 64
MAX_MANIFEST_ENTRIES = 256  # digests listed per manifest (the newest)
_MANIFEST_NAME = re.compile(r"[A-Za-z0-9_.]{1,80}-[0-9a-f]{64}\.reads")
_DIGEST = re.compile(r"[0-9a-f]{64}")


def manifest_path(root: Path, kernel_name: str, pre_digest: str) -> Path:
    return root / f"{store.sanitise(kernel_name)}-{pre_digest}{MANIFEST_SUFFIX}"


def is_manifest_name(name: str) -> bool:
    return _MANIFEST_NAME.fullmatch(name) is not None


def _read(path: Path) -> dict | None:
    """A manifest file's JSON object; None when it is not a regular file qnb wrote (never
    blocks, never follows a link)."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_MANIFEST_BYTES:
            return None
        with os.fdopen(fd, "rb") as handle:
            fd = None
            data = handle.read(MAX_MANIFEST_BYTES + 1)
    except OSError:
        return None
    finally:
        if fd is not None:
            os.close(fd)
    try:
        manifest = json.loads(data)
    except (ValueError, RecursionError):
        return None
    return manifest if isinstance(manifest, dict) else None


def load_manifest(kernel_name: str, pre_digest: str, root: Path | None = store.CHECK) -> list:
    """The read lists stored for a pre-key (each ``[[label, path, attribute], ...]``);
    [] when there is none, or it is not a regular file qnb wrote. ``root`` as for
    ``store.load``."""
    if root is store.CHECK:
        root = store.usable_directory()
    if root is None:
        return []
    manifest = _read(manifest_path(root, kernel_name, pre_digest))
    if manifest is None or manifest.get("pre_key") != pre_digest:
        return []
    sets = manifest.get("reads")
    if not isinstance(sets, list):
        return []
    return [s for s in sets[:MAX_MANIFEST_SETS] if _is_read_list(s)]


def _entries(manifest: dict) -> list[str] | None:
    """The entry digests a manifest lists; None for one that lists none (an older qnb's)."""
    entries = manifest.get("entries")
    if not isinstance(entries, list):
        return None
    return [d for d in entries if isinstance(d, str) and _DIGEST.fullmatch(d)]


def _is_read_list(reads: Any) -> bool:
    if not isinstance(reads, list) or not reads:
        return False
    for read in reads:
        if not (isinstance(read, list) and len(read) == 3):
            return False
        label, path, attr = read
        if not isinstance(label, str) or not isinstance(attr, str):
            return False
        if not isinstance(path, list) or not path or not all(isinstance(p, str) for p in path):
            return False
    return True


def save_manifest(kernel_name: str, pre_digest: str, reads: list, entry: str | None = None) -> None:
    """Add one read list to a pre-key's manifest, and ``entry`` (the digest of the entry
    those reads keyed) to the entries it lists (atomically; a failure only costs a compile
    in a later process)."""
    root = store.usable_directory()
    if root is None:
        return
    final = manifest_path(root, kernel_name, pre_digest)
    manifest = _read(final) or {}
    if manifest.get("pre_key") != pre_digest:
        manifest = {}
    sets = [s for s in manifest.get("reads", [])[:MAX_MANIFEST_SETS] if _is_read_list(s)]
    entries = _entries(manifest) or []
    if reads in sets and (entry is None or entry in entries):
        return
    if reads not in sets:
        sets = [reads, *sets][:MAX_MANIFEST_SETS]
    if entry is not None and entry not in entries:
        entries = [entry, *entries][:MAX_MANIFEST_ENTRIES]
    data = canonical_json({"pre_key": pre_digest, "reads": sets, "entries": entries})
    try:
        store.write_atomically(root, final, data.encode("utf-8"))
    except OSError as exc:
        log.debug("cannot write %s: %s", final, exc)


def drop_orphans(root: Path, names: set[str]) -> list[Path]:
    """Delete each manifest in ``root`` none of whose entries is left (``names``: the file
    names in the directory now); a manifest of an older qnb, which lists no entries, goes
    when no entry of its kernel is left. Returns what was deleted."""
    kernels_left = {name.rsplit("-", 1)[0] for name in names if store.is_entry_name(name)}
    deleted = []
    for name in sorted(names):
        if not is_manifest_name(name):
            continue
        path = root / name
        manifest = _read(path)
        entries = None if manifest is None else _entries(manifest)
        kernel = name.rsplit("-", 1)[0]
        if entries is None:
            orphan = kernel not in kernels_left
        else:
            orphan = not any(f"{kernel}-{digest}{store.SUFFIX}" in names for digest in entries)
        if orphan:
            try:
                found = os.lstat(path)
                if stat.S_ISREG(found.st_mode):
                    path.unlink()
                    deleted.append(path)
            except OSError:
                continue
    return deleted
