"""The ``qnb.cache`` logger, without importing :mod:`logging` on a warm start.

A disk hit logs at INFO, and importing ``logging`` (with ``traceback`` and ``string``) costs
a warm cpu process a few milliseconds of its 20 first launches. Where no module has imported
``logging`` yet, nothing can have set a level below WARNING or added a handler, so a
DEBUG or INFO record would be dropped by ``logging`` itself: :class:`LazyLogger` drops it
without the import. A WARNING or an exception imports ``logging`` and goes through it (its
last-resort handler shows it, as ever).
"""

from __future__ import annotations

import sys


class LazyLogger:
    """``logging.getLogger(name)``'s debug/info/warning/exception, the module imported only
    when a record could be seen."""

    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name

    def logger(self):
        import logging

        return logging.getLogger(self.name)

    def debug(self, *args, **kwargs) -> None:
        if "logging" in sys.modules:
            self.logger().debug(*args, **kwargs)

    def info(self, *args, **kwargs) -> None:
        if "logging" in sys.modules:
            self.logger().info(*args, **kwargs)

    def warning(self, *args, **kwargs) -> None:
        self.logger().warning(*args, **kwargs)

    def exception(self, *args, **kwargs) -> None:
        self.logger().exception(*args, **kwargs)
