"""A launch's host arrays on a device backend: copied in, written back, one copy each.

Every launcher that copies NumPy arrays to its device (wgpu, cuda, the cuda-host test
backend) marshals them here, so the rules are written once:

- each distinct memory is copied to the device once: an array passed for two parameters
  (as itself or as ``x[:]``) stays one array there, as on cpu;
- a stored array must be writable, and is written back once after the launch, whichever
  parameters store to it;
- two arrays that overlap without being one memory (``a[:-1]`` and ``a[1:]``) are
  refused where either is stored, since their two device copies would not see each
  other's stores.

The backend says how one array is copied in and back; this module never touches a
device.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from qnb.backends.base import argument_error, require_writable
from qnb.errors import BackendError


def memory_key(array) -> tuple:
    """What makes two NumPy arrays one memory: address, shape, strides and dtype."""
    return (array.__array_interface__["data"][0], array.shape, array.strides, array.dtype.str)


def refuse_partial_overlap(backend: str, named: list[tuple[str, Any, bool]]) -> None:
    """``named``: (parameter, NumPy array, stored) for a launch's host arrays. Two that
    overlap without being one memory would be two copies on the device, and a store
    through one would not reach the other (and one copy back would undo the other's):
    refuse that where either is stored."""
    keys = [memory_key(array) for _, array, _ in named]
    for k, (name, array, stored) in enumerate(named):
        for j in range(k + 1, len(named)):
            other, other_array, other_stored = named[j]
            if not (stored or other_stored) or keys[k] == keys[j]:
                continue
            if np.may_share_memory(array, other_array):
                raise argument_error(
                    BackendError,
                    other,
                    f"arrays {name!r} and {other!r} are overlapping parts of one array; "
                    f"the {backend} backend copies each array to the device, so a store "
                    "through one would not reach the other: pass the same array for both, "
                    "or arrays that do not overlap (the cpu backend runs this as it is)",
                )


class HostArrays:
    """The host arrays of one launch. ``copy_in(name, array)`` makes the device copy
    (whatever the backend needs to bind and to read back); ``copy_back(array, copy)``
    writes a stored array's device copy into it.

    A launcher calls :meth:`add` per array parameter, :meth:`check` once all are added
    (before anything runs), and :meth:`write_back` after the kernel ran."""

    __slots__ = ("backend", "copy_in", "copy_back", "named", "copies", "stored")

    def __init__(
        self,
        backend: str,
        copy_in: Callable[[str, np.ndarray], Any],
        copy_back: Callable[[np.ndarray, Any], None],
    ):
        self.backend = backend
        self.copy_in = copy_in
        self.copy_back = copy_back
        self.named: list[tuple[str, np.ndarray, bool]] = []
        self.copies: dict[tuple, Any] = {}  # memory_key -> device copy
        self.stored: dict[tuple, np.ndarray] = {}  # memory_key -> array to write back

    def add(self, name: str, array: np.ndarray, stored: bool):
        """The device copy of ``array`` for parameter ``name`` (made on its memory's
        first use)."""
        if stored:
            require_writable(name, array)
        self.named.append((name, array, stored))
        key = memory_key(array)
        copy = self.copies.get(key)
        if copy is None:
            copy = self.copies[key] = self.copy_in(name, array)
        if stored and array.size and key not in self.stored:
            self.stored[key] = array  # (written back once, whichever parameter stores)
        return copy

    def check(self) -> None:
        """Refuse overlapping parts of one array where either is stored."""
        if len(self.named) > 1:
            refuse_partial_overlap(self.backend, self.named)

    def write_back(self) -> None:
        """Copy every stored array back from its device copy."""
        for key, array in self.stored.items():
            self.copy_back(array, self.copies[key])
