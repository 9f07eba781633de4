"""The CUDA prelude: qnb's device helpers as real ``.cuh`` files shipped with the package.

The renderer reads each file's text (:func:`prelude_text`) and splices it into the kernel's
source, so the CUDA a user sees (``kernel.source``, ``%%qkernel``, the artifact) is the
whole translation unit, compiled by NVRTC and by cuda-host's g++ alike with no include
path. :func:`prelude_digest` hashes the bytes of every file for the cache key, so an
edited ``.cuh`` can never reuse a cubin built from the old one.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

NAMES = ("common", "f16", "atomics", "wmma")


def prelude_dir() -> Path:
    """Where the ``.cuh`` files are read from: ``QNB_CUDA_PRELUDE_DIR`` if set (a copy to
    try an edit in), else this package's own folder."""
    return Path(os.environ.get("QNB_CUDA_PRELUDE_DIR") or Path(__file__).parent)


def prelude_text(name: str) -> str:
    """The text of ``<name>.cuh``, without its final newline."""
    return (prelude_dir() / f"{name}.cuh").read_text(encoding="utf-8").rstrip("\n")


def prelude_digest() -> str:
    """A hash of every prelude file's bytes, in :data:`NAMES` order."""
    h = hashlib.sha256()
    for name in NAMES:
        h.update(name.encode() + b"\0" + (prelude_dir() / f"{name}.cuh").read_bytes() + b"\0")
    return h.hexdigest()[:16]
