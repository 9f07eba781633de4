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

from pathlib import Path
from typing import Any

from qnb.cache import store
from qnb.cache.key import canonical_json
from qnb.cache.logs import LazyLogger

log = LazyLogger("qnb.cache")

MAX_MANIFEST_SETS = 64
MAX_MANIFEST_ENTRIES = 256  # digests listed per manifest (the newest)


def manifest_path(root: Path, kernel_name: str, pre_digest: str) -> Path:
    return root / f"{store.sanitise(kernel_name)}-{pre_digest}{store.MANIFEST_SUFFIX}"


def load_manifest(kernel_name: str, pre_digest: str, root: Path | None = store.CHECK) -> list:
    """The read lists stored for a pre-key (each ``[[label, path, attribute], ...]``);
    [] when there is none, or it is not a regular file qnb wrote. ``root`` as for
    ``store.load``."""
    if root is store.CHECK:
        root = store.usable_directory()
    if root is None:
        return []
    manifest = store.read_manifest(manifest_path(root, kernel_name, pre_digest))
    if manifest is None or manifest.get("pre_key") != pre_digest:
        return []
    sets = manifest.get("reads")
    if not isinstance(sets, list):
        return []
    return [s for s in sets[:MAX_MANIFEST_SETS] if _is_read_list(s)]


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
    manifest = store.read_manifest(final) or {}
    if manifest.get("pre_key") != pre_digest:
        manifest = {}
    sets = [s for s in manifest.get("reads", [])[:MAX_MANIFEST_SETS] if _is_read_list(s)]
    entries = store.manifest_entries(manifest) or []
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
