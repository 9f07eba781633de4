"""The Vulkan driver's shader cache under qnb's cache dir follows the kernel cache's trust
rules (the driver loads what it finds there): made 0o700, refused where it is not ours or
others may write to it, and never set over the user's own Mesa settings. So does the
directory of cffi's parse of wgpu-py's header (qnb/backends/wgpu_cffi.py). Runs without a
device: only the environment and the directories are checked."""

from __future__ import annotations

import os
import stat
import threading
import warnings

import pytest

from qnb.backends import wgpu as wgpu_backend
from qnb.cache import CacheWarning

MESA = wgpu_backend._MESA_CACHE_SETTINGS


@pytest.fixture
def cache(tmp_path, monkeypatch):
    root = tmp_path / "qnb-cache"
    monkeypatch.setenv("QNB_CACHE_DIR", str(root))
    monkeypatch.delenv("QNB_CACHE", raising=False)
    for name in MESA:
        monkeypatch.delenv(name, raising=False)
    return root


def _mode(path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def _directory(cache, name, mode):
    """``cache/name``, made with ``mode`` (the cache dir itself private)."""
    path = cache / name
    path.mkdir(parents=True)
    os.chmod(cache, 0o700)
    os.chmod(path, mode)
    return path


def test_the_directory_is_made_private_and_given_to_the_driver(cache):
    wgpu_backend._driver_shader_cache()
    path = cache / wgpu_backend.DRIVER_CACHE
    assert os.environ["MESA_SHADER_CACHE_DIR"] == str(path)
    assert _mode(path) == 0o700 and _mode(cache) == 0o700


def test_our_own_directory_is_tightened_to_0700(cache):
    path = _directory(cache, wgpu_backend.DRIVER_CACHE, 0o755)
    wgpu_backend._driver_shader_cache()
    assert _mode(path) == 0o700
    assert os.environ["MESA_SHADER_CACHE_DIR"] == str(path)


def test_a_directory_others_may_write_is_refused_with_a_warning(cache):
    path = _directory(cache, wgpu_backend.DRIVER_CACHE, 0o777)
    with pytest.warns(CacheWarning, match="shader cache: group or others may write"):
        wgpu_backend._driver_shader_cache()
    assert "MESA_SHADER_CACHE_DIR" not in os.environ  # the driver keeps its default
    assert _mode(path) == 0o777  # not ours to fix: refused, left as found


@pytest.mark.skipif(os.geteuid() != 0, reason="making a foreign directory needs root")
def test_a_directory_of_another_user_is_refused(cache):
    path = _directory(cache, wgpu_backend.DRIVER_CACHE, 0o700)
    os.chown(path, 12345, 12345)
    with pytest.warns(CacheWarning, match="owned by another user"):
        wgpu_backend._driver_shader_cache()
    assert "MESA_SHADER_CACHE_DIR" not in os.environ


def test_a_symlink_is_refused(cache, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    cache.mkdir(mode=0o700)
    (cache / wgpu_backend.DRIVER_CACHE).symlink_to(elsewhere)
    with pytest.warns(CacheWarning, match="is a symbolic link"):
        wgpu_backend._driver_shader_cache()
    assert "MESA_SHADER_CACHE_DIR" not in os.environ


@pytest.mark.parametrize("setting", MESA)
def test_a_mesa_setting_of_the_users_is_left_alone(cache, monkeypatch, setting):
    monkeypatch.setenv(setting, "1" if setting.endswith("DISABLE") else "/somewhere/mine")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        wgpu_backend._driver_shader_cache()
    assert not (cache / wgpu_backend.DRIVER_CACHE).exists()
    if setting != "MESA_SHADER_CACHE_DIR":
        assert "MESA_SHADER_CACHE_DIR" not in os.environ


def test_no_driver_cache_when_the_disk_level_is_off(cache, monkeypatch):
    monkeypatch.setenv("QNB_CACHE", "0")
    wgpu_backend._driver_shader_cache()
    assert "MESA_SHADER_CACHE_DIR" not in os.environ and not cache.exists()


def test_no_driver_cache_under_an_untrusted_cache_directory(cache, monkeypatch):
    from qnb.cache import store

    monkeypatch.setattr(store, "_warned_unusable", False)  # (it warns once per process)
    cache.mkdir()
    os.chmod(cache, 0o777)
    with pytest.warns(CacheWarning):  # the kernel cache's own warning: memory only
        wgpu_backend._driver_shader_cache()
    assert "MESA_SHADER_CACHE_DIR" not in os.environ
    assert not (cache / wgpu_backend.DRIVER_CACHE).exists()


# ------------------------------------------------- the directory of wgpu-py's parsed header


def test_the_header_directory_is_private_under_the_cache(cache):
    path = wgpu_backend._header_cache()
    assert path == cache / wgpu_backend.HEADER_CACHE
    assert _mode(path) == 0o700 and _mode(cache) == 0o700


def test_no_header_directory_when_the_disk_level_is_off(cache, monkeypatch):
    monkeypatch.setenv("QNB_CACHE", "0")
    assert wgpu_backend._header_cache() is None and not cache.exists()


def test_a_header_directory_others_may_write_is_refused(cache):
    path = _directory(cache, wgpu_backend.HEADER_CACHE, 0o777)
    with pytest.warns(CacheWarning, match="parsed C header.*group or others may write"):
        assert wgpu_backend._header_cache() is None
    assert _mode(path) == 0o777


def test_a_refusal_on_the_device_thread_is_shown_at_qnb_s_line_not_threading_s(cache):
    """The early device makes these directories on a thread of qnb's, where no line is
    the user's: the warning names the line of qnb that refuses, not threading.py."""
    _directory(cache, wgpu_backend.HEADER_CACHE, 0o777)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        thread = threading.Thread(target=wgpu_backend._header_cache)
        thread.start()
        thread.join()
    (warning,) = [w for w in seen if issubclass(w.category, CacheWarning)]
    assert "parsed C header" in str(warning.message)
    assert warning.filename == wgpu_backend.__file__, warning.filename


# ---------------------------------------------------------------------- the early device

_EARLY = (
    "import threading, time, numpy as np, qnb\n"
    "from qnb.backends import wgpu\n"
    "qnb.set_backend('wgpu')\n"
    "started = [t for t in threading.enumerate() if t.name == 'qnb-wgpu-device']\n"
    "again = wgpu.start_device_in_background()  # one at a time\n"
    "@qnb.kernel\n"
    "def k(x):\n"
    "    (qnb.Tile16.load(x, 0, 0) * 3).store(x, 0, 0)\n"
    "x = np.ones((16, 16), np.float32)\n"
    "k(x)\n"
    "print(len(started), again is None, float(x.sum()), 'device' in wgpu._device_state)\n"
)


def _fresh(code, tmp_path, **env_changes):
    import subprocess
    import sys

    env = dict(os.environ, QNB_CACHE_DIR=str(tmp_path / "cache"), **env_changes)
    path = tmp_path / "early_device.py"
    path.write_text(code)
    return subprocess.run(
        [sys.executable, str(path)], env=env, capture_output=True, text=True, timeout=300
    )


def test_choosing_wgpu_starts_the_device_on_one_thread(tmp_path):
    from tests.conftest import require_backend

    require_backend("wgpu")
    done = _fresh(_EARLY, tmp_path, QNB_EARLY_DEVICE="1")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["1", "True", "768.0", "True"]


def test_the_early_device_can_be_turned_off(tmp_path):
    from tests.conftest import require_backend

    require_backend("wgpu")
    done = _fresh(_EARLY, tmp_path, QNB_EARLY_DEVICE="0")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["0", "True", "768.0", "True"]


def test_an_interpreter_exiting_while_the_device_is_made_exits_cleanly(tmp_path):
    """The process ends right after choosing wgpu: it waits for the thread (the driver
    is not torn down under it) and exits 0, with nothing on stderr."""
    from tests.conftest import require_backend

    require_backend("wgpu")
    code = (
        "import qnb\n"
        "from qnb.backends import wgpu\n"
        "qnb.set_backend('wgpu')\n"
        "print(wgpu._early_threads[0].is_alive() or 'device' in wgpu._device_state)\n"
    )
    done = _fresh(code, tmp_path, QNB_EARLY_DEVICE="1")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True"] and done.stderr == ""
