"""The CUDA prelude as real ``.cuh`` files: shipped with the package, spliced into every
kernel's source, and part of the cache key (an edited ``.cuh`` never reuses a build made
from the old one). Run on cuda-host (g++) in a fresh process with its own cache."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np

from qnb.backends import cuda_prelude
from tests.conftest import require_backend

REPO = Path(__file__).resolve().parents[2]

KERNEL = """
import qnb


@qnb.kernel(backend="cuda-host")
def shifted(x: qnb.Array[qnb.f32, 2], out: qnb.Array[qnb.f32, 2]):
    i = qnb.program_id(0)
    t = qnb.Tile[16, 16].load(x, i * 16, 0)
    (t // 3.0).store(out, i * 16, 0)
"""

# One launch in a fresh process (the key's components are read once per process), with
# the prelude read from the directory argv[2] names, if any.
RUN = r"""
import json, os, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
import qnb
import kernels
x = (np.arange(32 * 16, dtype=np.float32).reshape(32, 16) - 100) / 7
out = np.full_like(x, np.nan)
kernels.shifted[(2,)](x, out)
event = [e for e in qnb.cache.events() if e.outcome != "memory-hit"][-1]
print(json.dumps({"out": out.tolist(), "outcome": event.outcome, "reason": event.reason,
                  "source": kernels.shifted.source("cuda")}))
"""


def test_the_prelude_files_are_what_the_kernel_source_holds():
    for name in cuda_prelude.NAMES:
        assert (Path(cuda_prelude.__file__).parent / f"{name}.cuh").is_file(), name
    assert "namespace qnb" in cuda_prelude.prelude_text("common")


def test_an_edited_prelude_is_a_miss_and_is_compiled(tmp_path):
    require_backend("cuda-host")
    (tmp_path / "kernels.py").write_text(textwrap.dedent(KERNEL))
    copy = tmp_path / "prelude"
    shutil.copytree(Path(cuda_prelude.__file__).parent, copy)
    common = copy / "common.cuh"
    common.write_text(common.read_text() + "// edited\n")
    env = {k: v for k, v in os.environ.items() if k != "QNB_CUDA_PRELUDE_DIR"}
    env.update(QNB_CACHE_DIR=str(tmp_path / "cache"), PYTHONPATH=str(REPO))
    reports = []
    for prelude_dir in (None, copy):
        if prelude_dir:
            env["QNB_CUDA_PRELUDE_DIR"] = str(prelude_dir)
        done = subprocess.run(
            [sys.executable, "-c", RUN, str(tmp_path)],
            capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        reports.append(json.loads(done.stdout.splitlines()[-1]))
    first, second = reports
    x = (np.arange(32 * 16, dtype=np.float32).reshape(32, 16) - 100) / 7
    for report in (first, second):
        np.testing.assert_array_equal(np.array(report["out"], np.float32), x // np.float32(3))
    assert second["outcome"] == "miss" and "prelude" in second["reason"], second
    assert "// edited" in second["source"] and "// edited" not in first["source"]
