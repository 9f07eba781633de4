"""qnb's version: pyproject.toml is the single source; this reads the installed metadata.

``importlib.metadata`` imports the ``email`` package to parse it, which costs a fresh
process (every warm start) more than the rest of ``import qnb``'s own modules; so the
``Version:`` line of qnb's ``METADATA`` is read directly, from the first ``qnb-*.dist-info``
on ``sys.path`` (the one ``importlib.metadata`` would find), and only where that fails
does ``importlib.metadata`` decide.
"""

from __future__ import annotations

import os
import sys


def _from_dist_info() -> str | None:
    for entry in sys.path:
        try:
            names = os.listdir(entry or ".")
        except OSError:
            continue
        for name in names:
            if name.startswith("qnb-") and name.endswith(".dist-info"):
                try:
                    with open(os.path.join(entry or ".", name, "METADATA"), encoding="utf-8") as f:
                        for line in f:
                            if line.startswith("Version:"):
                                return line.partition(":")[2].strip()
                            if not line.strip():  # the end of the headers
                                break
                except OSError:
                    pass
                return None  # the first one found decides, or importlib.metadata does
    return None


def _from_metadata() -> str:
    from importlib import metadata

    try:
        return metadata.version("qnb")
    except metadata.PackageNotFoundError:  # a source tree that was never installed
        return "0.1.0"


__version__ = _from_dist_info() or _from_metadata()
