"""How the magics show things: errors without a traceback, generated code highlighted."""

from __future__ import annotations

import html

from qnb.languages import LANGUAGES


def show_error(err: Exception) -> Exception:
    """Make IPython show ``err`` as its message with the cell's line and a caret, and no
    traceback (IPython uses an exception's ``_render_traceback_`` when it has one). The
    cell still fails, so "run all" stops there and the error stays catchable."""
    text = f"{type(err).__name__}: {err}"
    err._render_traceback_ = lambda: text.splitlines()
    return err


def kernel_part(language: str, text: str, kernel_name: str = "kernel") -> str:
    """What ``--show`` prints of generated code: for CUDA, the leading comment, then the
    kernel's own code from its ``extern "C"`` entry point on, without ``#line``
    directives, and one line saying how many prelude lines (includes, the ``qnb::``
    helpers every kernel carries) were left out. WGSL and the IR are shown whole: the
    WGSL before ``main`` is the kernel's own bindings and the few helpers it uses."""
    if language != "cuda":
        return text
    lines = text.splitlines()
    entry = next((i for i, line in enumerate(lines) if line.startswith('extern "C"')), None)
    if entry is None:
        return text
    header = 0
    while header < entry and lines[header].startswith("//"):
        header += 1
    body = [line for line in lines[entry:] if not line.lstrip().startswith("#line ")]
    omitted = entry - header
    if omitted == 0 and len(body) == len(lines) - entry:
        return text
    note = (
        f"// ({omitted} prelude lines and the #line directives left out; "
        f"{kernel_name}.source({language!r}) has the full text)"
    )
    return "\n".join([*lines[:header], note, *body]) + "\n"


class GeneratedSource:
    """A kernel's generated code: ``text`` in full; shown (``shown``: for CUDA without
    the helper prelude, see :func:`kernel_part`) as plain text, and as HTML highlighted by
    Pygments (inline styles, so no stylesheet is needed) where Pygments is available."""

    def __init__(self, kernel_name: str, language: str, text: str):
        self.kernel_name, self.language, self.text = kernel_name, language, text

    @property
    def title(self) -> str:
        language = LANGUAGES.get(self.language)
        return f"{self.kernel_name}: {language.title if language else self.language}"

    @property
    def shown(self) -> str:
        return kernel_part(self.language, self.text, self.kernel_name)

    def __repr__(self) -> str:
        return f"// {self.title}\n{self.shown}"

    def _repr_mimebundle_(self, include=None, exclude=None):
        return {"text/plain": repr(self), "text/html": self._html()}

    def _html(self) -> str:
        title = f'<div style="font:600 12px sans-serif">{html.escape(self.title)}</div>'
        try:
            from pygments import highlight
            from pygments.formatters import HtmlFormatter
            from pygments.lexers import get_lexer_by_name
        except ImportError:
            return f"{title}<pre>{html.escape(self.shown)}</pre>"
        formatter = HtmlFormatter(noclasses=True, nobackground=True)
        lexer = get_lexer_by_name(getattr(LANGUAGES.get(self.language), "lexer", "text"))
        return title + highlight(self.shown, lexer, formatter)
