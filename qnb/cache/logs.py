"""The ``qnb.cache`` logger, without importing :mod:`logging` on a warm start.

A disk hit logs at INFO, and importing ``logging`` (with ``traceback`` and ``string``) costs
a warm cpu process a few milliseconds of its 20 first launches. Where no module has imported
``logging`` yet, nothing can have set a level below WARNING or added a handler, so a
DEBUG or INFO record would be dropped by ``logging`` itself: :class:`LazyLogger` drops it
without the import. A WARNING or an exception imports ``logging`` and goes through it (its
last-resort handler shows it, as ever), except one a ``CacheWarning`` reports too
(``warning_beside``), which is logged only where a handler was set up.
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

    def warning_beside(self, *args, **kwargs) -> None:
        """A WARNING that a :class:`CacheWarning` also reports: logged only where a handler
        would show it (logging configured by the application, a test's capture), so a
        plain ``python`` run, whose only handler is logging's last resort on stderr, shows
        the warning once, not once from each."""
        if "logging" in sys.modules:
            logger = self.logger()
            if logger.hasHandlers():
                logger.warning(*args, **kwargs)

    def exception(self, *args, **kwargs) -> None:
        self.logger().exception(*args, **kwargs)
