"""The wgpu backend in a bare environment: Mesa's XDG_RUNTIME_DIR complaint never reaches
the user's stderr, because qnb gives the process a private runtime dir when it has none."""

import os
import subprocess
import sys

from tests.conftest import require_backend


def test_no_mesa_runtime_dir_warning_on_stderr(tmp_path):
    """... and that private directory goes when the process ends (nothing of a run
    outlives it)."""
    require_backend("wgpu")
    temp = tmp_path / "tmp"
    temp.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "XDG_RUNTIME_DIR"}
    env["TMPDIR"] = str(temp)  # where the process makes its runtime dir
    code = (
        "import os, numpy as np, qnb\n"
        "x = np.ones((16, 16), np.float32)\n"
        "@qnb.kernel\n"
        "def k(x):\n"
        "    (qnb.Tile16.load(x, 0, 0) * 2).store(x, 0, 0)\n"
        "with qnb.backend('wgpu'):\n"
        "    k(x)\n"
        "print(float(x.sum()))\n"
        "print(os.environ['XDG_RUNTIME_DIR'])\n"
    )
    path = tmp_path / "qnb_bare_env_check.py"
    path.write_text(code)
    done = subprocess.run(
        [sys.executable, str(path)], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    total, runtime = done.stdout.split()
    assert total == "512.0"
    assert "XDG_RUNTIME_DIR" not in done.stderr
    assert os.path.dirname(runtime) == str(temp) and "qnb-runtime-" in runtime
    assert list(temp.iterdir()) == []  # removed at exit


def _run_fresh(code: str, env: dict, tmp_path) -> subprocess.CompletedProcess:
    path = tmp_path / "qnb_fresh_process.py"
    path.write_text(code)
    return subprocess.run(
        [sys.executable, str(path)], env=env, capture_output=True, text=True, timeout=300
    )


_LAUNCH = (
    "import os, numpy as np, qnb\n"
    "x = np.ones((16, 16), np.float32)\n"
    "@qnb.kernel\n"
    "def k(x):\n"
    "    (qnb.Tile16.load(x, 0, 0) * 3).store(x, 0, 0)\n"
    "with qnb.backend('wgpu'):\n"
    "    k(x)\n"
    "print(float(x.sum()), os.environ.get('MESA_SHADER_CACHE_DIR'))\n"
)


def test_driver_shader_cache_lives_under_qnb_cache(tmp_path):
    """A fresh QNB_CACHE_DIR is cold for the Vulkan driver too: Mesa's shader cache is
    pointed beside qnb's entries, and the driver writes there."""
    require_backend("wgpu")
    cache = tmp_path / "cache"
    env = {k: v for k, v in os.environ.items() if k != "MESA_SHADER_CACHE_DIR"}
    env["QNB_CACHE_DIR"] = str(cache)
    done = _run_fresh(_LAUNCH, env, tmp_path)
    assert done.returncode == 0, done.stderr
    total, where = done.stdout.split()
    assert total == "768.0"
    assert where == str(cache / "driver-shader-cache")
    assert any(p.is_file() for p in (cache / "driver-shader-cache").rglob("*"))
    # the kernel cache still lists (and clears) only its own entries
    import qnb.cache.store as store

    assert store.clear_disk(cache).removed == 1


def test_a_warm_process_hits_the_driver_shader_cache(tmp_path):
    """The driver's cache really serves a warm start: the second process on the same
    QNB_CACHE_DIR finds each shader there and writes no file of its own (a miss is a new
    file: Mesa keeps one per compiled shader). Without it, lavapipe compiles every
    pipeline again (~40 ms each here)."""
    require_backend("wgpu")
    cache = tmp_path / "cache"
    env = {k: v for k, v in os.environ.items() if k != "MESA_SHADER_CACHE_DIR"}
    env["QNB_CACHE_DIR"] = str(cache)

    def driver_files():
        root = cache / "driver-shader-cache"
        return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())

    cold = _run_fresh(_LAUNCH, env, tmp_path)
    assert cold.returncode == 0, cold.stderr
    written = driver_files()
    assert written
    warm = _run_fresh(_LAUNCH, env, tmp_path)
    assert warm.returncode == 0, warm.stderr
    assert warm.stdout.split()[0] == "768.0"
    assert driver_files() == written


def test_driver_shader_cache_respects_the_user(tmp_path):
    require_backend("wgpu")
    env = dict(os.environ, QNB_CACHE_DIR=str(tmp_path / "cache"))
    env["MESA_SHADER_CACHE_DIR"] = str(tmp_path / "mine")
    done = _run_fresh(_LAUNCH, env, tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[1] == str(tmp_path / "mine")
    assert not (tmp_path / "cache" / "driver-shader-cache").exists()


def test_device_starts_in_background(tmp_path):
    """``%load_ext qnb`` starts the wgpu device on a thread; a launch then finds it made."""
    require_backend("wgpu")
    code = (
        "import numpy as np, qnb\n"
        "from IPython.testing.globalipapp import start_ipython\n"
        "ip = start_ipython()\n"
        "ip.run_line_magic('load_ext', 'qnb')\n"
        "import threading\n"
        "from qnb.backends import wgpu\n"
        "started = [t for t in threading.enumerate() if t.name == 'qnb-wgpu-device']\n"
        "for t in started:\n"
        "    t.join()\n"
        "print(len(started), 'device' in wgpu._device_state)\n"
    )
    env = dict(os.environ, QNB_CACHE_DIR=str(tmp_path / "cache"))
    env.pop("QNB_EARLY_DEVICE", None)
    done = _run_fresh(code, env, tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[-2:] == ["1", "True"]
    env["QNB_EARLY_DEVICE"] = "0"
    done = _run_fresh(code, env, tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[-2:] == ["0", "False"]
