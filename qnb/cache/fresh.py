"""``qnb.cache.fresh_directory()``: a new, empty cache directory for one process."""

from __future__ import annotations


def fresh_directory(prefix: str = "qnb-cache-") -> str:
    """A new, empty, private directory (mode 0700) for a kernel cache, deleted when this
    process ends, however it ends (a notebook kernel killed at shutdown too). Point qnb
    at it with ``os.environ["QNB_CACHE_DIR"] = qnb.cache.fresh_directory()``: a demo or
    a test then starts from an empty cache and leaves nothing behind."""
    import tempfile  # (here, not at import: a warm start never needs them)

    from qnb.cleanup import remove_when_process_ends

    path = tempfile.mkdtemp(prefix=prefix)
    remove_when_process_ends(path)
    return path
