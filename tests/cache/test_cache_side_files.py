"""The files beside the entries, and the messages about the directories that hold them.

- A read manifest (``<kernel>-<pre-key>.reads``) counts toward ``QNB_CACHE_MAX_BYTES`` and
  goes when eviction has removed the last entry it lists (one an older qnb wrote, which
  lists none, when no entry of its kernel is left).
- The parsed wgpu C headers (``wgpu-cffi-header/``) count toward the bound, are evicted
  least recently used, and ``qnb cache clear`` removes them; nothing that is not qnb's
  (a link, another file, a directory others may write) is touched.
- A func reached through a module is re-checked at a memory hit without recomputing its
  fingerprint.
- A refused cache directory is reported once in a plain ``python`` run; the wgpu
  subdirectories' refusals say what they hold, and call a symbolic link one.
- A parsed-header file that verifies but does not import is dropped, named, and parsed again.
"""

from __future__ import annotations

import json
import os
import sys
import textwrap
import warnings

import numpy as np
import pytest
from cache_fakes import qnb_cache_in_turn, run_python

import qnb
import qnb.cache
from qnb.cache import store
from qnb.cache.store import CacheWarning


@pytest.fixture
def cfg_module(tmp_path, monkeypatch, cache_dir):
    (tmp_path / "qnb_side_cfg.py").write_text("SCALE = 0.0\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import importlib

    module = importlib.import_module("qnb_side_cfg")
    monkeypatch.setitem(globals(), "qnb_side_cfg", module)  # (the kernels' global)
    yield module
    sys.modules.pop("qnb_side_cfg", None)


def _reading_kernel(offset: float = 0.0):
    @qnb.func
    def scale_of(m):
        return m.SCALE

    if offset == 0.0:

        @qnb.kernel(backend="cpu")
        def reads_a_module(x: qnb.Array[qnb.f32, 1]):
            x[0] = scale_of(qnb_side_cfg)  # noqa: F821 - the fixture's module

    else:  # (another source text: another pre-key)

        @qnb.kernel(backend="cpu")
        def reads_a_module(x: qnb.Array[qnb.f32, 1]):
            x[0] = scale_of(qnb_side_cfg) + 1.0  # noqa: F821

    return reads_a_module


def _files(directory, suffix):
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(suffix))


def test_a_manifest_goes_with_the_last_entry_it_lists(cfg_module, cache_dir, monkeypatch):
    kernel = _reading_kernel()
    x = np.zeros(1, np.float32)
    kernel(x)
    (manifest,) = _files(cache_dir, ".reads")
    (entry,) = _files(cache_dir, ".json")
    listed = json.loads((cache_dir / manifest).read_text())["entries"]
    assert listed == [entry.rsplit("-", 1)[1][: -len(".json")]]
    # A bound that holds one entry: each new value evicts the one before.
    monkeypatch.setenv("QNB_CACHE_MAX_BYTES", str((cache_dir / entry).stat().st_size + 600))
    for value in (1.0, 2.0, 3.0):
        cfg_module.SCALE = value
        kernel(x)
        assert x[0] == value
    entries = _files(cache_dir, ".json")
    assert len(entries) == 1  # (the pre-key is the same: one manifest lists them all)
    assert _files(cache_dir, ".reads") == [manifest]
    # The kernel's source changes: a new pre-key, a new manifest; the old one lists only
    # evicted entries once its last entry goes, and goes with it.
    kernel2 = _reading_kernel(1.0)
    kernel2(x)
    assert x[0] == 4.0
    assert manifest not in _files(cache_dir, ".reads")
    assert len(_files(cache_dir, ".reads")) == 1


def test_an_older_manifest_goes_when_no_entry_of_its_kernel_is_left(cache_dir):
    cache_dir.mkdir(mode=0o700)
    old = cache_dir / f"gone_kernel-{'a' * 64}.reads"
    old.write_text(json.dumps({"pre_key": "a" * 64, "reads": []}))
    kept = cache_dir / f"kept_kernel-{'b' * 64}.reads"
    kept.write_text(json.dumps({"pre_key": "b" * 64, "reads": []}))
    (cache_dir / f"kept_kernel-{'c' * 64}.json").write_text("{}")
    stale = cache_dir / f"gone_kernel-{'d' * 64}.json"
    stale.write_text("x" * 4000)
    os.utime(stale, (1, 1))
    deleted = store.evict(cache_dir, 1000)
    assert stale in deleted and old in deleted
    assert kept.exists()


def _header_dir(root, mode=0o700):
    directory = root / store.HEADER_DIRECTORY
    directory.mkdir(parents=True, mode=0o700)
    os.chmod(root, 0o700)
    os.chmod(directory, mode)
    return directory


def test_the_header_directory_name_is_the_wgpu_backend_s():
    from qnb.backends import wgpu as wgpu_backend

    assert store.HEADER_DIRECTORY == wgpu_backend.HEADER_CACHE


def test_parsed_headers_count_toward_the_bound_and_are_evicted_oldest_first(cache_dir):
    headers = _header_dir(cache_dir)
    old = headers / f"{'1' * 64}.json"
    old.write_bytes(b"h" * 5000)
    os.utime(old, (1, 1))
    other = headers / "notes.txt"  # not qnb's name: never counted, never touched
    other.write_bytes(b"n" * 9000)
    count, size = store.disk_usage(cache_dir)
    assert (count, size) == (0, 5000)
    entry = cache_dir / f"k-{'e' * 64}.json"
    entry.write_bytes(b"e" * 3000)
    assert store.disk_usage(cache_dir) == (1, 8000)
    deleted = store.evict(cache_dir, 4000, keep=entry)
    assert deleted == [old] and entry.exists() and other.exists()


def test_qnb_cache_clear_removes_the_parsed_headers(cache_dir):
    headers = _header_dir(cache_dir)
    parsed = headers / f"{'2' * 64}.json"
    parsed.write_bytes(b"h" * 100)
    (results,) = qnb_cache_in_turn(cache_dir, ["clear"])
    assert results.returncode == 0, results.stderr
    assert not parsed.exists() and headers.exists()


@pytest.mark.parametrize("kind", ["link", "writable"])
def test_a_header_directory_that_is_not_qnb_s_is_not_touched(cache_dir, tmp_path, kind):
    cache_dir.mkdir(mode=0o700)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    target = elsewhere / f"{'3' * 64}.json"
    target.write_bytes(b"h" * 100)
    if kind == "link":
        (cache_dir / store.HEADER_DIRECTORY).symlink_to(elsewhere)
    else:
        os.chmod(elsewhere, 0o777)
        elsewhere.rename(cache_dir / store.HEADER_DIRECTORY)
        target = cache_dir / store.HEADER_DIRECTORY / target.name
    assert store.disk_usage(cache_dir) == (0, 0)
    store.clear_disk(cache_dir)
    store.evict(cache_dir, 0)
    assert target.exists()


def test_a_func_reached_through_a_module_is_not_fingerprinted_at_each_hit(cfg_module):
    from qnb.frontend import reads

    source = textwrap.dedent(
        """
        import qnb
        FACTOR = 3.0

        @qnb.func
        def h(v):
            return v * FACTOR
        """
    )
    with open(cfg_module.__file__, "w") as handle:
        handle.write(source)
    import importlib

    importlib.reload(cfg_module)

    @qnb.func
    def call_h(m, v):
        return m.h(v)

    @qnb.kernel(backend="cpu")
    def through_a_module(x: qnb.Array[qnb.f32, 1]):
        x[0] = call_h(qnb_side_cfg, 2.0)  # noqa: F821

    x = np.zeros(1, np.float32)
    through_a_module(x)
    assert x[0] == 6.0
    calls = []
    real = reads._FINGERPRINTS[0]
    reads._FINGERPRINTS[0] = lambda func: calls.append(1) or real(func)
    try:
        for _ in range(20):
            through_a_module(x)
        assert qnb.cache.events()[-1].outcome == "memory-hit"
        assert calls == []
        cfg_module.FACTOR = 5.0  # the func's own captured value: seen at the next hit
        through_a_module(x)
        assert x[0] == 10.0 and qnb.cache.events()[-1].outcome == "miss"
    finally:
        reads._FINGERPRINTS[0] = real


def test_a_refused_cache_directory_is_reported_once_in_a_plain_run(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)
    script = textwrap.dedent(
        """
        import numpy as np, qnb

        @qnb.kernel(backend="cpu")
        def k(x: qnb.Array[qnb.f32, 1]):
            x[0] = 1.0

        k(np.zeros(1, np.float32))
        """
    )
    path = tmp_path / "plain.py"
    path.write_text(script)
    result = run_python(
        f"import runpy; runpy.run_path({str(path)!r}, run_name='__main__')",
        env={"QNB_CACHE_DIR": str(shared), "QNB_CACHE": "1"},
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr.count("is unusable") == 1, result.stderr


def test_the_wgpu_subdirectories_refusals_say_what_they_hold(cache_dir):
    pytest.importorskip("wgpu")
    from qnb.backends import wgpu as wgpu_backend

    _header_dir(cache_dir, 0o777)
    with pytest.warns(CacheWarning) as seen:
        assert wgpu_backend._header_cache() is None
    (message,) = [str(w.message) for w in seen]
    assert "a parse of wgpu-py's C header" in message and "plant kernels" not in message
    driver = cache_dir / wgpu_backend.DRIVER_CACHE
    driver.mkdir(mode=0o700)
    os.chmod(driver, 0o777)
    with pytest.warns(CacheWarning) as seen:
        assert wgpu_backend._private_directory(wgpu_backend.DRIVER_CACHE, "not using {}") is None
    (message,) = [str(w.message) for w in seen]
    assert "shader binaries" in message and "plant kernels" not in message


def test_a_symlinked_wgpu_subdirectory_is_refused_as_a_link(cache_dir, tmp_path):
    pytest.importorskip("wgpu")
    from qnb.backends import wgpu as wgpu_backend

    cache_dir.mkdir(mode=0o700)
    target = tmp_path / "mine"
    target.mkdir(mode=0o700)
    (cache_dir / wgpu_backend.HEADER_CACHE).symlink_to(target)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        assert wgpu_backend._header_cache() is None
    (message,) = [str(w.message) for w in seen if issubclass(w.category, CacheWarning)]
    assert "symbolic link" in message and "not a directory" not in message


FORGE = r"""
import hashlib, json, pathlib, sys
(path,) = (pathlib.Path(sys.argv[1]) / "wgpu-cffi-header").glob("*.json")
_checksum, _, body = path.read_bytes().partition(b"\n")
payload = json.loads(body)
payload["state"]["_declarations"] = {"dict": []}  # verifies, but holds an empty parse
payload["types"] = []
body = json.dumps(payload).encode()
path.write_bytes(hashlib.sha256(body).hexdigest().encode() + b"\n" + body)
print(json.dumps({"forged": path.name}))
"""

WGPU_LAUNCH = r"""
import json, warnings
import numpy as np
import qnb
from qnb import Tile16

@qnb.kernel
def double(x: qnb.Array[qnb.f32, 2], y: qnb.Array[qnb.f32, 2]):
    (Tile16.load(x, 0, 0) * 2.0).store(y, 0, 0)

x = np.ones((16, 16), np.float32)
y = np.zeros_like(x)
with warnings.catch_warnings(record=True) as seen:
    warnings.simplefilter("always")
    with qnb.backend("wgpu"):
        double(x, y)
print(json.dumps({"right": bool((y == 2.0).all()),
                  "warnings": [str(w.message) for w in seen]}))
"""


def test_a_header_file_that_does_not_import_is_dropped_and_parsed_again(tmp_path):
    from tests.backends.wgpu_process import run_fresh_process

    env = {"QNB_EARLY_DEVICE": "0", "QNB_CACHE": None}
    cold = run_fresh_process(tmp_path, WGPU_LAUNCH, **env)
    assert cold["right"]
    result = run_python(FORGE, args=[str(tmp_path / "cache")])
    forged = json.loads(result.stdout.strip().splitlines()[-1])["forged"]
    dropped = run_fresh_process(tmp_path, WGPU_LAUNCH, **env)
    assert dropped["right"], dropped
    assert any(forged in w and "parsing the header again" in w for w in dropped["warnings"])
    warm = run_fresh_process(tmp_path, WGPU_LAUNCH, **env)  # written again, and served
    assert warm == {"right": True, "warnings": []}
