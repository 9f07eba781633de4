"""Backends: a renderer plus a runtime each (``cpu``, ``wgpu``, ``cuda``).

The registry and the backend choice live in :mod:`qnb.backends.registry`; note that
``qnb.backends`` in the top-level package is the ``backends()`` function of the
contract, so code inside qnb imports ``qnb.backends.registry`` directly.
"""

from qnb.backends.registry import (
    NAMES,
    backend,
    backends,
    current_name,
    get,
    require,
    set_backend,
)

__all__ = ["NAMES", "backend", "backends", "current_name", "get", "require", "set_backend"]
