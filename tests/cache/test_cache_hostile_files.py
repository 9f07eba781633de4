"""Only regular files of the user's are read from the cache directory: a FIFO, a link
(to /dev/zero, /dev/null, a FIFO), a device node, a directory, another account's file or
a huge file under an entry name never hangs, never exhausts memory and never gives a
traceback; a launch that meets one says so once and recompiles.

The hang-prone runs are fresh processes with a timeout: a hang fails the test. The real
entry each test starts from is written once, by a cold launch of the module's script, and
copied into each test's cache directory (the script's path is part of the key, so every
launch runs the one script)."""

from __future__ import annotations

import os
import shutil
import stat

import pytest
from cache_fakes import qnb_cache_in_turn, run_python

from qnb.cache import store

TIMEOUT = 60
OTHER_UID = 54321

SCRIPT = """
import os, warnings
import numpy as np
import qnb, qnb.cache

SCALE = float(os.environ["SCALE"])

@qnb.kernel(backend="cpu")
def fill(o: qnb.Array[qnb.f32, 1]):
    o[0] = SCALE

out = np.zeros(4, np.float32)
fill(out)
(event,) = [e for e in qnb.cache.events() if e.kernel == "fill"]
print("RESULT", out[0], event.outcome, event.reason)
"""


@pytest.fixture(scope="module")
def script(tmp_path_factory):
    path = tmp_path_factory.mktemp("hostile") / "fill_script.py"  # a kernel's source: a file
    path.write_text(SCRIPT)
    return path


def _launch(script, cache_dir, scale):
    env = {"QNB_CACHE_DIR": str(cache_dir), "SCALE": str(scale)}
    runner = "import runpy, sys; runpy.run_path(sys.argv[1], run_name='__main__')"
    return run_python(runner, env=env, timeout=TIMEOUT, args=[str(script)])


def _fifo(path):
    os.mkfifo(path)


def _link_to_dev_zero(path):
    os.symlink("/dev/zero", path)


def _link_to_dev_null(path):
    os.symlink("/dev/null", path)


def _link_to_a_fifo(path):
    os.mkfifo(path.with_name("a-fifo"))
    os.symlink(path.with_name("a-fifo"), path)


def _device_node(path):
    if os.geteuid() != 0:  # only root may make one; a link to a device is the same class
        os.symlink("/dev/zero", path)
        return
    os.mknod(path, 0o600 | stat.S_IFCHR, os.makedev(1, 5))  # /dev/zero's numbers


def _directory(path):
    path.mkdir()
    (path / "inside.json").write_text("{}")


def _foreign_bytes(path):
    path.write_bytes(b"\x00\xffnot an entry" * 100)


def _another_accounts_file(path):
    """A well-formed entry, but another account's (as root: a real chown)."""
    path.write_bytes(path.with_name("template.json").read_bytes())
    if os.geteuid() == 0:
        os.chown(path, OTHER_UID, OTHER_UID)
    else:  # not root: an entry of the user's would load, so plant garbage instead
        path.write_bytes(b"{")


def _huge_sparse_file(path):
    with open(path, "wb") as handle:
        handle.truncate(store.MAX_ENTRY_BYTES + 4096)  # sparse: costs no disk


HOSTILE = {
    "fifo": _fifo,
    "link-to-dev-zero": _link_to_dev_zero,
    "link-to-dev-null": _link_to_dev_null,
    "link-to-fifo": _link_to_a_fifo,
    "device-node": _device_node,
    "directory": _directory,
    "foreign-bytes": _foreign_bytes,
    "another-accounts-file": _another_accounts_file,
    "huge-file": _huge_sparse_file,
}


@pytest.fixture(scope="module")
def cold_cache(script, tmp_path_factory):
    """A cache directory as a cold launch of ``fill`` (SCALE=2) left it."""
    cache_dir = tmp_path_factory.mktemp("cold") / "cache"
    done = _launch(script, cache_dir, 2)
    assert done.returncode == 0, done.stderr
    return cache_dir


def _cold_entry(cache_dir, cold_cache):
    """The cold launch's real entry for ``fill`` in ``cache_dir``, and a template copy."""
    shutil.copytree(cold_cache, cache_dir)
    (entry,) = cache_dir.glob("fill-*.json")
    (cache_dir / "template.json").write_bytes(entry.read_bytes())
    return entry


@pytest.mark.parametrize("kind", list(HOSTILE))
def test_a_warm_start_over_a_hostile_entry_recompiles_with_one_warning(
    tmp_path, kind, script, cold_cache
):
    cache_dir = tmp_path / "cache"
    entry = _cold_entry(cache_dir, cold_cache)
    entry.unlink()
    HOSTILE[kind](entry)

    warm = _launch(script, cache_dir, 2)
    assert warm.returncode == 0, warm.stderr
    assert "Traceback" not in warm.stderr
    assert "RESULT 2.0 miss the disk entry was discarded" in warm.stdout, warm.stdout
    assert warm.stderr.count("CacheWarning") == 1, warm.stderr
    assert f"discarding {entry.name}" in warm.stderr
    if kind != "directory":  # (it cannot be replaced: that launch compiles again)
        assert entry.is_file() and not entry.is_symlink()
        again = _launch(script, cache_dir, 2)
        assert "RESULT 2.0 disk-hit" in again.stdout and again.stderr == "", again.stderr
    assert os.path.exists("/dev/zero") and stat.S_ISCHR(os.stat("/dev/zero").st_mode)


def _plant_everything(cache_dir):
    """Every hostile kind under a name of an entry of ``fill`` (digests no key has)."""
    for index, make in enumerate(HOSTILE.values()):
        make(cache_dir / f"fill-{index:064x}.json")


def test_the_miss_reason_lookup_skips_hostile_files_without_a_word(tmp_path, script, cold_cache):
    cache_dir = tmp_path / "cache"
    _cold_entry(cache_dir, cold_cache)
    _plant_everything(cache_dir)
    changed = _launch(script, cache_dir, 3)
    assert changed.returncode == 0 and changed.stderr == "", changed.stderr
    # the closest earlier entry is still found among the hostile files
    assert "RESULT 3.0 miss captured.SCALE: 2.0 → 3.0" in changed.stdout, changed.stdout


def test_qnb_cache_commands_skip_hostile_files(tmp_path, cold_cache):
    cache_dir = tmp_path / "cache"
    entry = _cold_entry(cache_dir, cold_cache)
    _plant_everything(cache_dir)

    listed, stats, explained, cleared = qnb_cache_in_turn(
        cache_dir, ["list"], ["stats"], ["explain", "fill"], ["clear"], timeout=TIMEOUT
    )
    assert listed.returncode == 0 and listed.stderr == "", listed.stderr
    rows = listed.stdout.splitlines()[1:]
    assert len(rows) == 1 and rows[0].startswith("fill ") and entry.name[5:17] in rows[0]

    assert stats.returncode == 0 and stats.stderr == "", stats.stderr
    assert "entries    4" in stats.stdout  # the regular files: the entry, three foreign
    assert "disk cache on" in stats.stdout

    assert explained.returncode == 0 and explained.stderr == "", explained.stderr
    assert explained.stdout.startswith("1 entry for kernel 'fill'")

    assert "Traceback" not in cleared.stderr
    # the directory under an entry name is the one thing that cannot be removed
    assert cleared.returncode == 1 and "could not remove 1 entry" in cleared.stderr
    left = sorted(p.name for p in cache_dir.iterdir())
    assert left == ["a-fifo", f"fill-{5:064x}.json", "template.json"]
    assert os.path.exists("/dev/zero")


def test_read_regular_refuses_each_kind_without_reading_it(tmp_path):
    """In process (no FIFO here: that one is only ever opened in a child process)."""
    (tmp_path / "template.json").write_text("{}")
    for kind, make in HOSTILE.items():
        if kind in ("fifo", "link-to-fifo"):
            continue
        path = tmp_path / f"{kind}.json"
        make(path)
        if kind == "foreign-bytes":
            data, found = store.read_regular(path)  # a regular file: read (then rejected)
            assert data.startswith(b"\x00\xff") and stat.S_ISREG(found.st_mode)
            continue
        if kind == "another-accounts-file" and os.geteuid() != 0:
            continue
        with pytest.raises(store.NotAnEntryFile):
            store.read_regular(path)
