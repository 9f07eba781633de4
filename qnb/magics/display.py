"""How the magics show things: errors without a traceback, generated code highlighted."""

from __future__ import annotations

import html


def show_error(err: Exception) -> Exception:
    """Make IPython show ``err`` as its message with the cell's line and a caret, and no
    traceback (IPython uses an exception's ``_render_traceback_`` when it has one). The
    cell still fails, so "run all" stops there and the error stays catchable."""
    text = f"{type(err).__name__}: {err}"
    err._render_traceback_ = lambda: text.splitlines()
    return err


_LEXERS = {"cuda": "cuda", "wgsl": "wgsl", "ir": "text"}
_TITLES = {"cuda": "CUDA C++", "wgsl": "WGSL", "ir": "qnb IR"}


class GeneratedSource:
    """A kernel's generated code: plain text, and HTML highlighted by Pygments (inline
    styles, so no stylesheet is needed) where Pygments is available."""

    def __init__(self, kernel_name: str, language: str, text: str):
        self.kernel_name, self.language, self.text = kernel_name, language, text

    @property
    def title(self) -> str:
        return f"{self.kernel_name}: {_TITLES.get(self.language, self.language)}"

    def __repr__(self) -> str:
        return f"// {self.title}\n{self.text}"

    def _repr_mimebundle_(self, include=None, exclude=None):
        return {"text/plain": repr(self), "text/html": self._html()}

    def _html(self) -> str:
        title = f'<div style="font:600 12px sans-serif">{html.escape(self.title)}</div>'
        try:
            from pygments import highlight
            from pygments.formatters import HtmlFormatter
            from pygments.lexers import get_lexer_by_name
        except ImportError:
            return f"{title}<pre>{html.escape(self.text)}</pre>"
        formatter = HtmlFormatter(noclasses=True, nobackground=True)
        lexer = get_lexer_by_name(_LEXERS.get(self.language, "text"))
        return title + highlight(self.text, lexer, formatter)
