"""What every qnb command line does around its work (``qnb``, ``python -m qnb.cache.cli``):
end quietly when the reader of its output goes away."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable

# The exit status of a command whose reader went away (`qnb cache list | head -3`): that
# of a process ended by SIGPIPE, as the shell reports it (128 + 13).
BROKEN_PIPE_STATUS = 141


def run_quietly(command: Callable[[], int]) -> int:
    """``command()``'s exit status, its output flushed; BROKEN_PIPE_STATUS, with no
    traceback, where stdout's reader stopped reading."""
    try:
        status = command()
        sys.stdout.flush()  # here, where a closed pipe can still be caught
    except BrokenPipeError:
        # What is left in stdout's buffer goes to devnull, so the flush at exit does not
        # fail again (Python's documentation, "Note on SIGPIPE").
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return BROKEN_PIPE_STATUS
    return status
