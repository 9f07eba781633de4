"""A cache directory another account could write is refused: one warning, memory only.

Its entries' checksums are no defence (anyone can recompute a sha256), so a planted
entry in a directory that is not the user's own, or that group or others may write,
must never load. Real ownership: the tests run as root where they can, and chown."""

from __future__ import annotations

import json
import os
import stat
import warnings

import numpy as np
import pytest
from cache_fakes import qnb_cache_in_turn

import qnb
import qnb.cache
from qnb.cache import CacheWarning, store
from qnb.cache.report import explain_disk

OTHER_UID = 54321
SCALE = 2.0


def _scaled(o: qnb.Array[qnb.f32, 1]):
    o[0] = SCALE


def _launch() -> float:
    out = np.zeros(4, np.float32)
    with qnb.backend("cpu"):
        qnb.kernel(_scaled)(out)  # a new kernel object: no launch memo
    return float(out[0])


def _planted_entry(cache_dir) -> tuple[str, bytes]:
    """(file name, bytes) of the entry for SCALE=2 whose kernel writes 666: what another
    account can make, as every check a load does is recomputable."""
    global SCALE
    try:
        SCALE = 666.0
        _launch()
        (evil,) = cache_dir.glob("*.json")
        evil_entry = json.loads(evil.read_text())
        evil.unlink()
        SCALE = 2.0
        _launch()
        (honest,) = cache_dir.glob("*.json")
    finally:
        SCALE = 2.0
    entry = json.loads(honest.read_text())
    for field in ("payload", "binary", "payload_sha256", "size"):
        entry[field] = evil_entry[field]
    return honest.name, json.dumps(entry).encode()


@pytest.fixture
def planted(cache_dir, monkeypatch):
    name, data = _planted_entry(cache_dir)
    qnb.cache.clear()
    # in the user's own private directory the plant works: that is the attack
    (cache_dir / name).write_bytes(data)
    assert _launch() == 666.0
    qnb.cache.clear()
    monkeypatch.setattr(store, "_unusable", {})
    monkeypatch.setattr(store, "_warned_unusable", False)
    return name, data


def _shared(tmp_path, name, data, make_shared):
    shared = tmp_path / "shared-cache"
    shared.mkdir(mode=0o700)
    (shared / name).write_bytes(data)
    make_shared(shared)
    return shared


def _another_owner(path):
    if os.geteuid() != 0:
        pytest.skip("only root can give a directory to another account")
    os.chown(path, OTHER_UID, OTHER_UID)


def _group_writable(path):
    os.chmod(path, 0o770)


def _world_writable(path):
    os.chmod(path, 0o703)


def _sticky_world_writable(path):  # like /tmp: others still add their own files
    os.chmod(path, 0o1777)


SHARED = {
    "another-owner": _another_owner,
    "group-writable": _group_writable,
    "world-writable": _world_writable,
    "sticky-world-writable": _sticky_world_writable,
}


def _restore(path):
    os.chown(path, os.geteuid(), os.getegid())
    os.chmod(path, 0o700)


@pytest.mark.parametrize("kind", list(SHARED))
def test_a_directory_another_account_can_write_is_refused(planted, tmp_path, monkeypatch, kind):
    shared = _shared(tmp_path, *planted, SHARED[kind])
    monkeypatch.setenv("QNB_CACHE_DIR", str(shared))
    try:
        with pytest.warns(CacheWarning, match="caching in memory only") as caught:
            assert _launch() == 2.0  # compiled here, never the planted 666
            assert _launch() == 2.0
        assert len(caught) == 1
        assert "could plant kernels" in str(caught[0].message)
        outcomes = [event.outcome for event in qnb.cache.events()]
        assert outcomes == ["miss", "memory-hit"]
        assert sorted(p.name for p in shared.iterdir()) == [planted[0]]  # nothing written
        assert qnb.cache.stats()["disk_enabled"] is False
        assert "could plant kernels" in explain_disk("_scaled")
        with pytest.warns(CacheWarning, match="not touching it"):
            result = qnb.cache.clear()  # memory only: another account's files stay
        assert result.removed == 0 and (shared / planted[0]).exists()
    finally:
        _restore(shared)


@pytest.mark.parametrize("kind", ["another-owner", "group-writable", "world-writable"])
def test_qnb_cache_refuses_to_read_a_shared_directory(planted, tmp_path, kind):
    shared = _shared(tmp_path, *planted, SHARED[kind])
    try:
        listed, explained, stats, cleared = qnb_cache_in_turn(
            shared, ["list"], ["explain", "_scaled"], ["stats"], ["clear"]
        )
        assert listed.returncode == 1 and listed.stdout == ""
        assert listed.stderr.startswith(f"qnb cache: not reading {shared}: ")
        assert "could plant kernels" in listed.stderr and "Traceback" not in listed.stderr
        assert explained.returncode == 1 and "not reading" in explained.stderr
        assert stats.returncode == 0 and "disk cache off: " in stats.stdout
        assert "could plant kernels" in stats.stdout
        assert cleared.returncode == 1 and "not touching it" in cleared.stderr
        assert (shared / planted[0]).exists()
    finally:
        _restore(shared)


def test_the_directory_qnb_creates_is_private_at_every_level(tmp_path, monkeypatch):
    top = tmp_path / "made"
    monkeypatch.setenv("QNB_CACHE_DIR", str(top / "by" / "qnb"))
    monkeypatch.setattr(store, "_unusable", {})
    old = os.umask(0)  # the most permissive umask: every level would be 0o777
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", CacheWarning)
            assert _launch() == 2.0
    finally:
        os.umask(old)
        qnb.cache.clear()
    for level in (top, top / "by", top / "by" / "qnb"):
        assert stat.S_IMODE(os.stat(level).st_mode) == 0o700, level


def test_a_private_directory_of_the_users_is_used(cache_dir):
    cache_dir.mkdir(mode=0o755)  # read-only for others is fine
    with warnings.catch_warnings():
        warnings.simplefilter("error", CacheWarning)
        _launch()
    assert len(list(cache_dir.glob("*.json"))) == 1
