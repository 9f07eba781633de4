"""The bundled front end: each widget's ES module is ``heatmap.js`` + its own file."""

from __future__ import annotations

from pathlib import Path

STATIC = Path(__file__).parent / "static"


def read_asset(name: str) -> str:
    return (STATIC / name).read_text(encoding="utf-8")


def widget_module(name: str) -> str:
    """The ES module for one widget: the shared drawing code, then the widget's file
    (which ends with ``export default { render }``). Concatenation is the whole build."""
    return read_asset("heatmap.js") + "\n" + read_asset(name)


CSS = read_asset("qnb.css")
