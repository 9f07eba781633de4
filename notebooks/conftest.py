"""nbval's run of the notebooks (``scripts/run_notebooks.py --check``): each notebook gets
a fresh kernel cache of its own, as it had when its outputs were stored, so two notebooks
defining a kernel of one name (a puzzle and the tutorial it follows) never see each
other's entries, whichever worker runs them first."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item) -> None:
    # Before the default setup: it starts the notebook's kernel (nbval's IPyNbFile.setup)
    # at the notebook's first cell, and the kernel inherits this environment.
    root = os.environ.get("QNB_NOTEBOOK_CACHES")
    if root:
        os.environ["QNB_CACHE_DIR"] = notebook_cache(Path(root), Path(str(item.path)))


def notebook_cache(root: Path, notebook: Path) -> str:
    """The cache directory of ``notebook`` under ``root`` (one per notebook path)."""
    name = "-".join(notebook.resolve().relative_to(Path(__file__).parent).with_suffix("").parts)
    return str(root / name)
