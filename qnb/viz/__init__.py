"""Notebook widgets: ``TileView``, ``TraceView``, ``CacheView``, ``CompareView``, ``HazardView``.

Each is an anywidget (ipywidgets 8): state in traitlets, logic in Python, a small front
end bundled in ``qnb/viz/static/`` (no CDN). Each also renders statically (HTML and a
PNG) where no live front end exists: nbconvert, GitHub, a saved notebook.

The widget classes load on first use, so importing ``qnb.viz`` (or ``qnb.viz.events``,
which the magics use) does not import ipywidgets.
"""

from __future__ import annotations

import importlib

_WIDGETS = {
    "TileView": "qnb.viz.tile_view",
    "TraceView": "qnb.viz.trace_view",
    "CacheView": "qnb.viz.cache_view",
    "CompareView": "qnb.viz.compare_view",
    "HazardView": "qnb.viz.hazard_view",
}

__all__ = list(_WIDGETS)


def __getattr__(name: str):
    if name in _WIDGETS:
        return getattr(importlib.import_module(_WIDGETS[name]), name)
    raise AttributeError(f"module 'qnb.viz' has no attribute {name!r}")


def __dir__():
    return sorted([*globals(), *_WIDGETS])
