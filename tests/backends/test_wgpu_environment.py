"""The wgpu backend in a bare environment: Mesa's XDG_RUNTIME_DIR complaint never reaches
the user's stderr, because qnb gives the process a private runtime dir when it has none."""

import os
import subprocess
import sys

from tests.conftest import require_backend


def test_no_mesa_runtime_dir_warning_on_stderr():
    require_backend("wgpu")
    env = {k: v for k, v in os.environ.items() if k != "XDG_RUNTIME_DIR"}
    code = (
        "import numpy as np, qnb\n"
        "x = np.ones((16, 16), np.float32)\n"
        "@qnb.kernel\n"
        "def k(x):\n"
        "    (qnb.Tile16.load(x, 0, 0) * 2).store(x, 0, 0)\n"
        "with qnb.backend('wgpu'):\n"
        "    k(x)\n"
        "print(float(x.sum()))\n"
    )
    path = os.path.join(os.environ.get("TMPDIR", "/tmp"), "qnb_bare_env_check.py")
    with open(path, "w") as handle:
        handle.write(code)
    done = subprocess.run(
        [sys.executable, path], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "512.0"
    assert "XDG_RUNTIME_DIR" not in done.stderr
