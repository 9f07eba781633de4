"""qnb's version: pyproject.toml is the single source; this reads the installed metadata."""

from importlib import metadata

try:
    __version__ = metadata.version("qnb")
except metadata.PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.1.0"
