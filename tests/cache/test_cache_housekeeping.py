"""What the disk level shows, counts, evicts and clears: only qnb's own entries, never
a traceback for a malformed one, and failures said once and plainly."""

from __future__ import annotations

import errno
import inspect
import io
import json
import logging
import os
import warnings
from pathlib import Path

import numpy as np
import pytest
from cache_fakes import FakeBackend, make_key

import qnb
import qnb.cache
from qnb.cache import CacheWarning, cli, store


def write_entry(cache_dir, edit=None, key=None):
    """Compile one entry for kernel "k" and apply ``edit(entry_dict)`` to its file
    (``edit`` may also return raw bytes to write instead)."""
    key = key or make_key()
    FakeBackend().get(key)
    path = cache_dir / f"k-{key.digest}.json"
    if edit is not None:
        entry = json.loads(path.read_text())
        replaced = edit(entry)
        path.write_bytes(replaced if isinstance(replaced, bytes) else json.dumps(entry).encode())
    qnb.cache.lookup._memory.clear()
    return path


def cache_command(*argv) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    status = cli.run(list(argv), out=out, err=err)
    return status, out.getvalue(), err.getvalue()


def _set(field, value):
    def edit(entry):
        entry[field] = value

    return edit


MALFORMED = {
    "deeply-nested": lambda entry: b"[" * 100_000 + b"]" * 100_000,
    "no-components": _set("components", {}),
    "components-missing-one": lambda entry: entry["components"].pop("options"),
    "components-not-hashing-to-the-name": lambda entry: entry["components"]["captured"].update(
        use_alias=["bool", True]
    ),
    "components-nested-deeply": lambda entry: entry["components"]["captured"].update(
        use_alias=json.loads("[" * 500 + "]" * 500)
    ),
    "kernel-not-a-string": _set("kernel", {"a": 1}),
    "digest-not-a-string": _set("digest", 5),
}


@pytest.mark.parametrize("malformed", sorted(MALFORMED))
def test_list_and_explain_skip_a_malformed_entry(cache_dir, malformed):
    write_entry(cache_dir, MALFORMED[malformed])
    good = make_key(captured_use_alias=["bool", True])
    FakeBackend().get(good, name="k")

    status, out, err = cache_command("list")
    assert status == 0 and err == ""
    assert good.short in out and out.count("\n") == 2  # the header and the good entry

    status, out, err = cache_command("explain", "k")
    assert status == 0 and err == ""
    assert out.startswith(f"1 entry for kernel 'k' in {cache_dir}")
    assert good.short in out
    assert "1 entry for kernel 'k'" in qnb.cache.report.explain_disk("k")


@pytest.mark.parametrize("created", [1e300, -1e300, float("nan"), "yesterday", True, None])
def test_an_unshowable_creation_time_falls_back_to_the_files_time(cache_dir, created):
    path = write_entry(cache_dir, _set("created", created))
    (info,) = store.list_entries(root=cache_dir)
    assert info.created == path.stat().st_mtime
    status, out, _ = cache_command("explain", "k")
    assert status == 0 and info.short in out


def test_a_deeply_nested_entry_is_discarded_with_one_warning(cache_dir):
    key = make_key()
    write_entry(cache_dir, MALFORMED["deeply-nested"], key=key)
    backend = FakeBackend()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _, event = backend.get(key)
    assert [str(w.message) for w in caught if w.category is CacheWarning] == [
        f"qnb kernel cache: discarding k-{key.digest}.json: not a cache entry "
        "(JSON nested too deeply); recompiling"
    ]
    assert event.outcome == "miss" and backend.compiles == 1


def _fill(o: qnb.Array[qnb.f32, 1]):
    o[0] = 1.0


def test_a_discarded_entry_is_reported_at_the_users_launch_line(cache_dir):
    out = np.zeros(4, np.float32)
    with qnb.backend("cpu"):
        qnb.kernel(_fill)(out)
        (path,) = cache_dir.glob("*.json")
        path.write_text("not json")
        qnb.cache.lookup._memory.clear()
        fresh = qnb.kernel(_fill)  # no launch memo either: this launch reads the disk
        with pytest.warns(CacheWarning, match="discarding") as caught:
            line = inspect.currentframe().f_lineno + 1
            fresh(out)
    assert (caught[0].filename, caught[0].lineno) == (__file__, line)


def test_an_unusable_directory_is_reported_at_the_users_launch_line(tmp_path, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("QNB_CACHE_DIR", str(blocker))
    monkeypatch.setattr(store, "_unusable", {})
    monkeypatch.setattr(store, "_warned_unusable", False)
    qnb.cache.lookup._memory.clear()
    out = np.zeros(4, np.float32)
    with qnb.backend("cpu"), pytest.warns(CacheWarning, match="not a directory") as caught:
        line = inspect.currentframe().f_lineno + 1
        qnb.kernel(_fill)(out)
    assert (caught[0].filename, caught[0].lineno) == (__file__, line)


def test_files_that_are_not_entries_are_never_counted_evicted_or_cleared(cache_dir, monkeypatch):
    FakeBackend().get(make_key())
    foreign = {
        "settings.json": "{}",
        "other-data.json": "{}",
        "notes-0123.json": "{}",
        ".hidden.tmp": "x",
        "download.tmp": "x",
    }
    for name, text in foreign.items():
        (cache_dir / name).write_text(text)
        os.utime(cache_dir / name, (0, 0))  # older than any stale-temp age
    stale_temp = cache_dir / f".k-{'a' * 38}.abcd_123.tmp"  # left by a crashed writer
    stale_temp.write_text("x")
    os.utime(stale_temp, (0, 0))

    stats = qnb.cache.stats()
    assert stats["disk_entries"] == 1
    assert stats["disk_bytes"] == sum(p.stat().st_size for p in cache_dir.glob("k-*.json"))

    monkeypatch.setenv("QNB_CACHE_MAX_BYTES", "0")
    FakeBackend().get(make_key(captured_use_alias=["bool", True]))  # evicts all but itself
    assert len(list(cache_dir.glob("k-*.json"))) == 1
    assert not stale_temp.exists()
    assert {p.name for p in cache_dir.iterdir() if not p.name.startswith("k-")} == set(foreign)

    result = qnb.cache.clear()
    assert result.removed == 1 and result.failed == []
    assert {p.name for p in cache_dir.iterdir()} == set(foreign)


def _an_entry_that_cannot_be_removed(cache_dir) -> Path:
    """A directory with an entry's name: unlink fails for it, even as root."""
    blocked = cache_dir / f"k-{'f' * 64}.json"
    blocked.mkdir(parents=True)
    return blocked


def test_clear_says_what_it_could_not_remove(cache_dir):
    FakeBackend().get(make_key())
    blocked = _an_entry_that_cannot_be_removed(cache_dir)
    with pytest.warns(CacheWarning, match=f"could not remove 1 entry: {blocked.name}"):
        result = qnb.cache.clear()
    assert result.removed == 1
    assert [(path, why) for path, why in result.failed] == [(blocked, os.strerror(errno.EISDIR))]
    assert qnb.cache.events() == []  # the memory level is cleared all the same

    status, out, err = cache_command("clear")
    assert status == 1 and out == ""
    assert f"could not remove 1 entry: {blocked.name}: Is a directory" in err
    blocked.rmdir()


def test_clear_of_a_missing_directory_removes_nothing_and_succeeds(cache_dir):
    assert not cache_dir.exists()
    status, out, err = cache_command("clear")
    assert status == 0 and out.startswith("removed 0 entries") and err == ""


def test_an_invalid_size_bound_is_reported_once(cache_dir, monkeypatch, caplog):
    monkeypatch.setattr(store, "_warned_max_bytes", set())
    for value in ("abc", "-5"):
        monkeypatch.setenv("QNB_CACHE_MAX_BYTES", value)
        with caplog.at_level(logging.WARNING, logger="qnb.cache"):
            for n in range(3):
                qnb.cache.stats()
                FakeBackend().get(make_key(captured_n=["int", n]))
        assert store.max_bytes() == store.DEFAULT_MAX_BYTES
    warned = [r.getMessage() for r in caplog.records if "QNB_CACHE_MAX_BYTES" in r.getMessage()]
    assert len(warned) == 2 and "'abc'" in warned[0] and "'-5'" in warned[1]


@pytest.mark.parametrize("value", ["0", "off", "false", "no", " OFF "])
def test_stats_says_the_disk_level_is_off_as_the_library_does(cache_dir, monkeypatch, value):
    monkeypatch.setenv("QNB_CACHE", value)
    assert not store.disk_enabled()
    status, out, _ = cache_command("stats")
    assert status == 0 and f"disk cache off (QNB_CACHE={value})" in out


def test_stats_says_why_an_unusable_directory_is_off(tmp_path, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("QNB_CACHE_DIR", str(blocker))
    monkeypatch.delenv("QNB_CACHE", raising=False)
    status, out, _ = cache_command("stats")
    assert status == 0 and "disk cache off: it is not a directory" in out
