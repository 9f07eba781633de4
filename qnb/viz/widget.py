"""The base of qnb's widgets: bundled CSS, a stable text repr and the static fallback."""

from __future__ import annotations

import anywidget

from qnb.viz.assets import CSS
from qnb.viz.static_render import png_data_uri


class QnbWidget(anywidget.AnyWidget):
    """An anywidget whose display also carries ``image/png`` and ``text/html``, so a
    notebook shows something where widgets cannot run. Subclasses give ``_esm`` and
    implement ``_static_html`` and ``_static_png`` (None without matplotlib, or with
    nothing to draw).

    Both are kept where each serves its own readers: HTML renderers (nbconvert, JupyterLab
    without the widget's state) take ``text/html``; PDF/LaTeX export and consoles take
    ``image/png``. An HTML that would only repeat the PNG is left out (``_static_html``
    returns None), so the image is stored once."""

    _css = CSS

    def _repr_mimebundle_(self, **kwargs):
        bundle = super()._repr_mimebundle_(**kwargs)
        data, metadata = bundle if isinstance(bundle, tuple) else (bundle, {})
        data = dict(data)
        data["text/plain"] = repr(self)
        png = self._static_png()
        if png is not None:
            data["image/png"] = png
        page = self._static_html(png)
        if page is not None:
            data["text/html"] = page
        return data, metadata

    def _static_html(self, png: bytes | None) -> str | None:
        raise NotImplementedError

    def _static_png(self) -> bytes | None:
        return None

    @staticmethod
    def _img(png: bytes | None) -> str:
        return f'<img src="{png_data_uri(png)}"/>' if png else ""
