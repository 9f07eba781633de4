"""What ``@qnb.kernel`` and ``@qnb.func`` make share: :class:`QnbFunction`.

The frontend meets kernels and funcs as captured values (a kernel calls a func, a
Template or module attribute names one) and recognises them by ``isinstance`` against
this class, without importing ``qnb.kernel`` (which imports the frontend). This module
imports nothing of qnb's: the frontend (``parse``, ``capture``) imports it, so it may
not import them back, not even for type hints.
"""

from __future__ import annotations


class QnbFunction:
    """A Python function qnb compiles: a :class:`~qnb.Kernel` or a :class:`~qnb.Func`.

    ``parsed`` is its checked source (names, position, AST: a
    ``qnb.frontend.parse.ParsedFunction``) and ``captures`` the names it reads from its
    enclosing scope, read again at each launch (a ``qnb.frontend.capture.Captures``); a
    subclass whose definition failed may raise from either (the magics'
    ``FailedDefinition``)."""

    #: what a user decorated it with, for messages ("@qnb.kernel" or "@qnb.func")
    decorator = "@qnb.func"
