"""Error types. Every error qnb raises about a user's kernel is one of these.

Each carries the user's own ``filename``, ``lineno`` and ``col`` and renders the
offending source line with a caret under the column, so a notebook cell shows its
own line, never a compiler traceback.
"""

from __future__ import annotations

import functools
import linecache
import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from qnb.loc import Loc


class QnbError(Exception):
    """Base class of every qnb error; carries the user's source position.

    Where the compiler or a backend raises an error it cannot place in the user's file
    yet, it fills in one of the location fields below, and the kernel turns it into
    ``filename``/``lineno``/``col`` before the user sees it (``Kernel._locate``).
    """

    # The IR node's location (``qnb.loc.Loc``: unit, line and column relative to the
    # unit's ``def`` line), set by a renderer, a compiler log or a runtime check.
    ir_loc: Loc | None = None
    # The qualname of the unit (kernel or func) ``ir_loc`` is in, where the error is
    # raised at run time, after the IR's unit list is gone (cpu checks, debug mode).
    ir_unit: str | None = None
    # The kernel parameter an error about an argument names (shown at the ``def`` line).
    param: str | None = None

    def __init__(
        self,
        message: str,
        filename: str | None = None,
        lineno: int | None = None,
        col: int | None = None,
        source_line: str | None = None,
    ):
        super().__init__(message)
        self.message = message
        self.filename = filename
        self.lineno = lineno
        self.col = col
        self._source_line = source_line

    @property
    def source_line(self) -> str | None:
        """The offending line of the user's source, if it can be found."""
        if self._source_line is None and self.filename and self.lineno:
            line = linecache.getline(self.filename, self.lineno)
            self._source_line = line.rstrip("\n") if line else None
        return self._source_line

    def with_location(self, filename, lineno, col=None, source_line=None) -> QnbError:
        """Fill in the position if the error does not have one yet; returns self."""
        if self.lineno is None:
            self.filename, self.lineno, self.col = filename, lineno, col
            self._source_line = source_line
        return self

    def __str__(self) -> str:
        if self.lineno is None:
            return self.message
        where = f'File "{self.filename}", line {self.lineno}'
        text = f"{self.message}\n  {where}"
        line = self.source_line
        if line is not None:
            stripped = line.lstrip()
            indent = len(line) - len(stripped)
            text += f"\n    {stripped}"
            if self.col is not None and self.col >= indent:
                text += "\n    " + " " * (self.col - indent) + "^"
        return text

    def __reduce__(self):
        return (
            self.__class__,
            (self.message, self.filename, self.lineno, self.col, self._source_line),
        )

    def _render_traceback_(self) -> list[str]:
        """What IPython shows in place of a traceback: the user's own frames that led
        here (a launch from a cell, a func of theirs), not qnb's or IPython's, then the
        error at the kernel's own line with its caret."""
        import traceback

        frames = [f for f in traceback.extract_tb(self.__traceback__) if _is_users(f.filename)]
        lines = []
        if frames:
            lines.append("Traceback (most recent call last):")
            lines += "".join(traceback.format_list(frames)).rstrip("\n").split("\n")
        kind = type(self)
        name = (
            f"qnb.{kind.__qualname__}" if kind.__module__.startswith("qnb") else kind.__qualname__
        )
        lines += f"{name}: {self}".split("\n")
        return lines


_PACKAGE = os.path.dirname(os.path.abspath(__file__)) + os.sep


def _is_users(filename: str) -> bool:
    """Whether a traceback frame's file is the user's: not qnb's, not IPython's."""
    path = os.path.abspath(filename)
    if path.startswith(_PACKAGE):
        return False
    ipython = getattr(sys.modules.get("IPython"), "__file__", None)
    return not (ipython and path.startswith(os.path.dirname(os.path.abspath(ipython)) + os.sep))


def public(function):
    """Mark a public qnb entry point (a decorator, a launch, ``source``): a QnbError it
    raises is raised again from here with the frames below dropped (the compiler's), so
    a traceback, in a plain ``python`` run or under pytest, shows the user's own frames
    and this one frame of qnb. Nested entry points leave the outermost one. (IPython
    shows a QnbError by ``_render_traceback_``, without qnb's frames at all.)"""

    @functools.wraps(function)
    def public_call(*args, **kwargs):
        try:
            return function(*args, **kwargs)
        except QnbError as err:
            raise err.with_traceback(None) from None

    return public_call


def _user_frame():
    """The innermost frame outside the qnb package: the user's own call into qnb."""
    frame = sys._getframe(1)
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(_PACKAGE):
        frame = frame.f_back
    return frame


def caller_place() -> tuple[str | None, int | None, int | None]:
    """The file, line and column of the user's own call into qnb (the column of the
    call's expression where Python 3.11+ records it, else of the line's first
    character), for a caret under it."""
    frame = _user_frame()
    if frame is None:
        return None, None, None
    filename, lineno, col = frame.f_code.co_filename, frame.f_lineno, None
    positions = getattr(frame.f_code, "co_positions", None)
    if positions is not None and frame.f_lasti >= 0:
        found = list(positions())[frame.f_lasti // 2]
        if found[0] == lineno:
            col = found[2]
    if col is None:
        line = linecache.getline(filename, lineno)
        col = len(line) - len(line.lstrip()) if line.strip() else None
    return filename, lineno, col


def caller_position() -> tuple[str | None, int | None]:
    """The file and line of the user's own call into qnb (for errors that have no AST
    node to point at)."""
    frame = _user_frame()
    return (None, None) if frame is None else (frame.f_code.co_filename, frame.f_lineno)


class QnbSyntaxError(QnbError):
    """An unsupported construct or a malformed slice in a kernel."""


class QnbTypeError(QnbError, TypeError):
    """A dtype, shape or arity mismatch, or the misuse of an op."""


class QnbZeroDivisionError(QnbTypeError, ZeroDivisionError):
    """A division by zero qnb sees before anything runs (``qnb.cdiv(a, 0)``, on the host or
    with a compile-time divisor): a ``QnbTypeError`` (the misuse of an op) that is also the
    ``ZeroDivisionError`` Python's own ``-(-a // 0)`` raises."""


class QnbCaptureError(QnbError):
    """A kernel reads a name from its enclosing scope that cannot be baked in."""


class QnbIndexError(QnbError, IndexError):
    """An index outside an array (cpu backend and debug mode)."""


class QnbOutsideKernelError(QnbError, RuntimeError):
    """A name of the kernel language (``Tile16.zeros``, ``qnb.program_id``…) called as
    plain Python, outside a kernel."""


class BackendError(QnbError):
    """A backend is missing, or cannot do what the kernel asks."""


class CompileError(QnbError):
    """A backend compiler rejected generated code.

    ``generated_line`` is the line of generated code the compiler named, and
    ``log`` the compiler's own message.
    """

    def __init__(
        self,
        message,
        filename=None,
        lineno=None,
        col=None,
        source_line=None,
        generated_line: str | None = None,
        log: str | None = None,
    ):
        super().__init__(message, filename, lineno, col, source_line)
        self.generated_line = generated_line
        self.log = log

    def __str__(self) -> str:
        text = super().__str__()
        if self.generated_line:
            text += f"\n  generated code: {self.generated_line.strip()}"
        return text
