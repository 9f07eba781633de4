"""What a run creates outside the cache goes when the run ends, a killed run too."""

import os
import signal
import subprocess
import sys
import time

import pytest

MAKE_AND_END = (
    "import os, signal, sys, qnb\n"
    "path = qnb.cache.fresh_directory(prefix='qnb-cleanup-test-')\n"
    "open(os.path.join(path, 'entry'), 'w').close()\n"
    "print(path, flush=True)\n"
    "if sys.argv[1] == 'kill':\n"
    "    os.kill(os.getpid(), signal.SIGKILL)  # as Jupyter and nbval end a kernel\n"
)


def _gone_within(path: str, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while os.path.exists(path):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


@pytest.mark.parametrize("ending", ["exit", "kill"])
def test_a_fresh_cache_directory_goes_when_its_process_ends(tmp_path, ending):
    env = dict(os.environ, TMPDIR=str(tmp_path))
    done = subprocess.run(
        [sys.executable, "-c", MAKE_AND_END, ending],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == (-signal.SIGKILL if ending == "kill" else 0), done.stderr
    path = done.stdout.strip()
    assert os.path.dirname(path) == str(tmp_path)
    if ending == "exit":
        assert not os.path.exists(path)  # at exit, before the process is gone
    else:
        assert _gone_within(path, 30), f"{path} outlived its killed process"


def test_a_fresh_cache_directory_is_private_and_empty():
    import qnb

    path = qnb.cache.fresh_directory()
    try:
        assert os.listdir(path) == []
        assert os.stat(path).st_mode & 0o777 == 0o700
    finally:
        os.rmdir(path)
