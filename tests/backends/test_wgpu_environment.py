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
