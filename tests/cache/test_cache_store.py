"""The disk level: round trips, rejection of bad entries, LRU bound, settings."""

import base64
import json
import os
import stat

import pytest
from cache_fakes import FakeBackend, expected_binary, make_key

import qnb.cache
from qnb.cache import CacheWarning, store


def entry_files(directory):
    return sorted(p for p in directory.iterdir() if p.suffix == ".json")


@pytest.mark.parametrize("binary_size", [0, 1, 300_000])
def test_round_trip_text_and_binary(cache_dir, binary_size):
    key = make_key()
    writer = FakeBackend(binary_size)
    _, event = writer.get(key)
    assert event.outcome == "miss" and writer.compiles == 1
    (path,) = entry_files(cache_dir)
    assert path.name == f"k-{key.digest}.json"

    artifact, rejected = store.load("k", key)
    assert rejected is None
    assert artifact.text == writer.loads[0].text
    assert artifact.binary == expected_binary(key.digest, binary_size)

    # A new process would find it: empty the memory level only.
    qnb.cache.lookup._memory.clear()
    reader = FakeBackend(binary_size)
    launcher, event = reader.get(key)
    assert event.outcome == "disk-hit" and reader.compiles == 0
    assert launcher((1, 1, 1), []) == key.digest


def test_entry_holds_everything_the_contract_names(cache_dir):
    key = make_key()
    FakeBackend(8).get(key, name="my.kernel<locals>")
    (path,) = entry_files(cache_dir)
    assert path.name == f"my.kernel_locals_-{key.digest}.json"
    entry = json.loads(path.read_text())
    assert entry["schema"] == store.SCHEMA
    assert entry["digest"] == key.digest
    assert entry["kernel"] == "my.kernel<locals>" and entry["backend"] == "fake"
    assert entry["components"] == key.components
    assert base64.b64decode(entry["binary"]) == expected_binary(key.digest, 8)
    assert json.loads(entry["payload"])["digest"] == key.digest
    assert entry["payload_sha256"] == store.payload_checksum(
        entry["payload"], expected_binary(key.digest, 8)
    )
    assert entry["created"] > 0 and entry["size"] > 0


def test_directory_is_created_private(cache_dir):
    assert qnb.cache.directory() == cache_dir
    FakeBackend().get(make_key())
    assert stat.S_IMODE(cache_dir.stat().st_mode) == 0o700


def _flip_a_payload_bit(data: bytes) -> bytes:
    index = data.index(b"// kernel for") + 5
    return data[:index] + bytes([data[index] ^ 0x01]) + data[index + 1 :]


def _retag_schema(data: bytes) -> bytes:
    entry = json.loads(data)
    entry["schema"] = 999
    return json.dumps(entry).encode()


def _edit_components(data: bytes) -> bytes:
    entry = json.loads(data)  # claims the key but its components say otherwise
    entry["components"]["captured"]["use_alias"] = ["bool", True]
    return json.dumps(entry).encode()


def _edit_payload_and_fix_nothing(data: bytes) -> bytes:
    entry = json.loads(data)
    entry["payload"] = entry["payload"].replace("compiled", "tampered")
    return json.dumps(entry).encode()


def _bad_base64(data: bytes) -> bytes:
    entry = json.loads(data)
    entry["binary"] = "!!!not base64!!!"
    return json.dumps(entry).encode()


CORRUPTIONS = {
    "deeply-nested": lambda data: b"[" * 100_000 + b"]" * 100_000,
    "truncated": lambda data: data[: len(data) // 2],
    "empty": lambda data: b"",
    "bit-flip": _flip_a_payload_bit,
    "garbage": lambda data: os.urandom(len(data)),
    "not-utf8": lambda data: b"\xff\xfe" + data,
    "json-array": lambda data: b"[1, 2, 3]",
    "wrong-schema": _retag_schema,
    "components-edited": _edit_components,
    "payload-edited": _edit_payload_and_fix_nothing,
    "bad-base64": _bad_base64,
}


@pytest.mark.parametrize("corruption", sorted(CORRUPTIONS))
def test_corrupt_entry_is_rejected_with_a_warning_and_recompiled(cache_dir, corruption):
    key = make_key()
    FakeBackend(64).get(key)
    (path,) = entry_files(cache_dir)
    path.write_bytes(CORRUPTIONS[corruption](path.read_bytes()))

    qnb.cache.lookup._memory.clear()
    backend = FakeBackend(64)
    with pytest.warns(CacheWarning, match="discarding"):
        launcher, event = backend.get(key)
    assert event.outcome == "miss" and backend.compiles == 1
    assert event.reason.startswith("the disk entry was discarded")
    # Only the freshly compiled artifact was ever loaded.
    assert [a.text["marker"] for a in backend.loads] == ["compiled"]
    assert launcher((1, 1, 1), []) == key.digest
    # The bad file was replaced by a valid one.
    artifact, rejected = store.load("k", key)
    assert rejected is None and artifact.text["marker"] == "compiled"


def test_entry_written_for_another_key_is_rejected(cache_dir):
    mine, other = (
        make_key(captured_use_alias=["bool", False]),
        make_key(captured_use_alias=["bool", True]),
    )
    FakeBackend().get(other)
    (path,) = entry_files(cache_dir)
    # Someone copies (or a collision-prone scheme would map) the other entry to my name.
    path.rename(cache_dir / f"k-{mine.digest}.json")
    qnb.cache.lookup._memory.clear()
    backend = FakeBackend()
    with pytest.warns(CacheWarning, match="another key"):
        _, event = backend.get(mine)
    assert event.outcome == "miss" and backend.compiles == 1
    assert [a.text["digest"] for a in backend.loads] == [mine.digest]


def test_verify_never_loads_a_bad_entry_directly(cache_dir):
    key = make_key()
    FakeBackend().get(key)
    (path,) = entry_files(cache_dir)
    path.write_bytes(b'{"schema": 1')
    with pytest.warns(CacheWarning):
        artifact, rejected = store.load("k", key)
    assert artifact is None and "JSON" in rejected
    assert not path.exists()


def test_lru_eviction_keeps_the_directory_under_the_bound(cache_dir, monkeypatch):
    backend = FakeBackend(10_000)
    keys = [make_key(captured_n=["int", n]) for n in range(8)]
    backend.get(keys[0])
    entry_size = entry_files(cache_dir)[0].stat().st_size
    monkeypatch.setenv("QNB_CACHE_MAX_BYTES", str(entry_size * 3 + entry_size // 2))

    t = 1_000_000_000
    for key in keys[1:3]:
        backend.get(key)
    for n, key in enumerate(keys[:3]):  # a known use order: 0, 1, 2
        os.utime(cache_dir / f"k-{key.digest}.json", (t + n, t + n))
    # A disk hit on entry 0 makes it the most recently used.
    qnb.cache.lookup._memory.clear()
    assert backend.get(keys[0])[1].outcome == "disk-hit"

    backend.get(keys[3])  # four entries > bound: the least recently used (1) goes
    names = {p.name for p in entry_files(cache_dir)}
    assert names == {f"k-{keys[i].digest}.json" for i in (0, 2, 3)}
    backend.get(keys[4])
    names = {p.name for p in entry_files(cache_dir)}
    assert names == {f"k-{keys[i].digest}.json" for i in (0, 3, 4)}
    total = sum(p.stat().st_size for p in entry_files(cache_dir))
    assert total <= entry_size * 3 + entry_size // 2


def test_an_entry_larger_than_the_bound_is_still_kept(cache_dir, monkeypatch):
    monkeypatch.setenv("QNB_CACHE_MAX_BYTES", "10")
    FakeBackend(1000).get(make_key())
    assert len(entry_files(cache_dir)) == 1


def test_qnb_cache_0_disables_the_disk_level(cache_dir, monkeypatch):
    monkeypatch.setenv("QNB_CACHE", "0")
    backend = FakeBackend()
    key = make_key()
    assert backend.get(key)[1].outcome == "miss"
    assert backend.get(key)[1].outcome == "memory-hit"  # the memory level still works
    assert not cache_dir.exists() or entry_files(cache_dir) == []
    qnb.cache.lookup._memory.clear()
    assert backend.get(key)[1].outcome == "miss" and backend.compiles == 2
    assert qnb.cache.stats()["disk_enabled"] is False


def test_qnb_always_compile_forces_compiles(cache_dir, monkeypatch):
    backend = FakeBackend()
    key = make_key()
    backend.get(key)
    monkeypatch.setenv("QNB_ALWAYS_COMPILE", "1")
    _, event = backend.get(key)
    assert event.outcome == "miss" and backend.compiles == 2
    assert event.reason == "QNB_ALWAYS_COMPILE=1 forces a compile"
    monkeypatch.delenv("QNB_ALWAYS_COMPILE")
    assert backend.get(key)[1].outcome == "memory-hit"


def test_clear_empties_memory_and_disk(cache_dir):
    backend = FakeBackend()
    backend.get(make_key())
    assert entry_files(cache_dir)
    qnb.cache.clear()
    assert entry_files(cache_dir) == []
    assert qnb.cache.events() == []
    assert backend.get(make_key())[1].outcome == "miss"


def test_clear_without_disk_keeps_the_entries_and_says_so(cache_dir):
    backend = FakeBackend()
    backend.get(make_key())
    result = qnb.cache.clear(disk=False)
    assert (result.memory, result.removed, result.disk) == (1, 0, False)
    assert str(result) == (
        "cleared this process's memory level (1 compiled kernel, its events and counts); "
        f"the disk cache in {cache_dir} is kept"
    )
    assert len(entry_files(cache_dir)) == 1 and qnb.cache.events() == []
    assert backend.get(make_key())[1].outcome == "disk-hit"
    result = qnb.cache.clear()
    assert (result.memory, result.removed) == (1, 1)
    assert str(result).endswith(f"; removed 1 entry from {cache_dir}")


def test_an_entry_the_backend_cannot_load_is_discarded_and_recompiled(cache_dir):
    key = make_key()
    FakeBackend().get(key)
    qnb.cache.lookup._memory.clear()
    backend = FakeBackend()
    attempts = []

    def load(artifact):
        attempts.append(artifact)
        if len(attempts) == 1:
            raise RuntimeError("driver refuses this binary")
        return backend.load_for(key)(artifact)

    with pytest.warns(CacheWarning, match="could not load it"):
        _, event = qnb.cache.get_or_compile("k", "fake", key, backend.compile_for(key), load)
    assert event.outcome == "miss" and backend.compiles == 1 and len(attempts) == 2
    assert "driver refuses" in event.reason
