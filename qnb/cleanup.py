"""Directories that must not outlive the process that made them.

``remove_when_process_ends(path)`` deletes ``path`` when this process ends, however it
ends: at a normal exit (``atexit``), and also when it is killed (a notebook kernel shut
down by Jupyter or nbval gets SIGKILL, and runs no exit handler). For the second, a small
watcher process holds the read end of a pipe whose write end only this process holds; the
kernel closes it when the process dies, and the watcher removes the directory.
"""

from __future__ import annotations

import atexit
import os
import shutil
import sys

# Runs in the watcher (isolated, no site): wait for EOF on stdin, then remove argv[1].
_WATCHER = (
    "import shutil, sys\nsys.stdin.buffer.read()\nshutil.rmtree(sys.argv[1], ignore_errors=True)\n"
)

_pipes: list[int] = []  # write ends, held open for the life of the process


def remove_when_process_ends(path: str | os.PathLike) -> None:
    """Delete the directory ``path`` (and what it holds) when this process ends."""
    import subprocess  # (not at import: importing qnb stays light)

    path = os.fspath(path)
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    try:
        read_end, write_end = os.pipe()  # not inherited by this process's other children
    except OSError:
        return
    try:
        subprocess.Popen(
            [sys.executable, "-I", "-S", "-c", _WATCHER, path],
            stdin=read_end,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # not killed with the process group it watches
            close_fds=True,
        )
    except OSError:  # no watcher: the atexit handler still removes it at a normal exit
        os.close(write_end)
    else:
        _pipes.append(write_end)
    finally:
        os.close(read_end)
