"""A module of decorators for test_wrapped_and_canonical.py: its own ``FLAG`` and ``SCALE``
must never be what a kernel it wraps reads."""

import functools

FLAG = True
SCALE = 100.0


def logged(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return fn(*args, **kwargs)

    return wrapper


def twice_logged(fn):
    return logged(logged(fn))


class Traced:
    """A class-based decorator that sets ``__wrapped__`` (as functools.update_wrapper does)."""

    def __init__(self, fn):
        functools.update_wrapper(self, fn)

    def __call__(self, *args, **kwargs):
        return self.__wrapped__(*args, **kwargs)
