"""The CUDA prelude: qnb's device helpers as real ``.cuh`` files shipped with the package.

The renderer reads each file's text (:func:`prelude_text`) and splices it into the kernel's
source, so the CUDA a user sees (``kernel.source``, ``%%qkernel``, the artifact) is the
whole translation unit, compiled by NVRTC and by cuda-host's g++ alike with no include
path. :func:`prelude_digest` hashes the bytes of every file for the cache key, so an
edited ``.cuh`` can never reuse a cubin built from the old one.
"""

from __future__ import annotations

import functools
import hashlib
import os
from pathlib import Path

NAMES = ("common", "f16", "atomics", "wmma")


def prelude_dir() -> Path:
    """Where the ``.cuh`` files are read from: ``QNB_CUDA_PRELUDE_DIR`` if set (a copy to
    try an edit in), else this package's own folder."""
    return Path(os.environ.get("QNB_CUDA_PRELUDE_DIR") or Path(__file__).parent)


@functools.cache
def _snapshot() -> tuple[dict[str, str], str]:
    """Every prelude file's text and the hash of their bytes, read together once per
    process: the renderer's text and the cache key's digest always come from the same
    bytes (a file edited while a process runs is seen by the next process, never as new
    text under the old key)."""
    h = hashlib.sha256()
    texts = {}
    for name in NAMES:
        data = (prelude_dir() / f"{name}.cuh").read_bytes()
        h.update(name.encode() + b"\0" + data + b"\0")
        texts[name] = data.decode("utf-8").rstrip("\n")
    return texts, h.hexdigest()[:16]


def prelude_text(name: str) -> str:
    """The text of ``<name>.cuh``, without its final newline."""
    return _snapshot()[0][name]


def prelude_digest() -> str:
    """A hash of every prelude file's bytes, in :data:`NAMES` order."""
    return _snapshot()[1]
