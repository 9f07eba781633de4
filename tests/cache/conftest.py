"""Each cache test gets its own cache directory and an empty memory level."""

import pytest


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    import qnb.cache

    directory = tmp_path / "kernel-cache"
    monkeypatch.setenv("QNB_CACHE_DIR", str(directory))
    for name in ("QNB_CACHE", "QNB_ALWAYS_COMPILE", "QNB_CACHE_MAX_BYTES"):
        monkeypatch.delenv(name, raising=False)
    qnb.cache.clear()
    yield directory
    qnb.cache.clear()
