"""The disk level of the kernel cache: one verified JSON file per entry.

An entry is ``<kernel>-<digest>.json`` in the cache directory and holds the schema
version, the full digest, the kernel and backend names, the key's full components,
the artifact (its text fields as one canonical JSON string, its binary as base64) and
a sha256 of that payload. A load re-derives everything it can: the file must parse, carry this
schema, hash (from its own stored components) to the digest in its name and to the
digest asked for, and match its payload checksum. Anything else is discarded with a
:class:`CacheWarning` and treated as a miss; nothing is ever unpickled or executed.

Writes go to a temp file in the same directory, are fsynced and then renamed over
the entry (``os.replace`` is atomic), so concurrent processes writing the same key
each leave a whole, valid file. After each write the directory is trimmed to
``QNB_CACHE_MAX_BYTES`` by evicting the least recently used entries (a hit touches
its file's mtime). A directory that cannot be created or written, or that another
account could write (not the user's own, or writable by group or others), turns the
disk level off for this process, with one warning.

Only regular files are read (:func:`read_regular`): opened without following a link
and without blocking, checked with ``fstat``, at most ``MAX_ENTRY_BYTES``; a FIFO, a
device, a directory or a link under an entry name is never opened for reading.

Environment variables are read at call time, so tests (and users in a notebook) can
change them without re-importing.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import re
import stat
import sys
import threading
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from qnb.cache.key import COMPONENTS, CacheKey, canonical_json, same_json
from qnb.cache.logs import LazyLogger

SCHEMA = 2
DEFAULT_MAX_BYTES = 1 << 30
# No entry qnb writes comes near this; a larger file under an entry name is not one.
MAX_ENTRY_BYTES = 256 << 20
SUFFIX = ".json"
TEMP_SUFFIX = ".tmp"
_STALE_TEMP_SECONDS = 3600.0
# The only files qnb counts, evicts or clears: its entries, ``<kernel>-<sha256>.json``
# (the kernel name as sanitise() writes it), and its temp files, ``.<entry name's
# first 40 characters>.<mkstemp's 8 random characters>.tmp``. Anything else in the
# directory (a user's settings.json, another tool's data) is left alone.
_ENTRY_NAME = re.compile(r"[A-Za-z0-9_.]{1,80}-[0-9a-f]{64}\.json")
_TEMP_NAME = re.compile(r"\.[A-Za-z0-9_][A-Za-z0-9_.-]{0,39}\.[a-z0-9_]{8}\.tmp")
# Deeper key components than this are not a key qnb wrote: listing skips them, so
# showing one (which recurses) stays far from Python's recursion limit.
MAX_COMPONENT_DEPTH = 100

log = LazyLogger("qnb.cache")


class CacheWarning(UserWarning):
    """A cache entry was discarded, or the disk cache is unusable (contract)."""


_QNB_PACKAGE = str(Path(__file__).parents[1]) + os.sep


def warn(message: str) -> None:
    """A CacheWarning shown at the first frame outside qnb: the user's launch line,
    not the cache's internals. On a thread qnb started (the early wgpu device), which
    has no line of the user's, at the line of qnb that warns, not in ``threading``."""
    frame, level = sys._getframe(0), 1
    while frame is not None and frame.f_code.co_filename.startswith(_QNB_PACKAGE):
        frame, level = frame.f_back, level + 1
    if frame is None or frame.f_code.co_filename == threading.__file__:
        level = 2
    warnings.warn(message, CacheWarning, stacklevel=level)


# ---------------------------------------------------------------------------------
# Settings (read at call time)
# ---------------------------------------------------------------------------------


def directory() -> Path:
    """The disk cache directory: ``$QNB_CACHE_DIR``, else the user cache dir's ``qnb``."""
    configured = os.environ.get("QNB_CACHE_DIR")
    if configured:
        return Path(configured).expanduser()
    import platformdirs

    return Path(platformdirs.user_cache_dir("qnb"))


def disk_enabled() -> bool:
    """False when ``QNB_CACHE=0`` turns the disk level off."""
    return os.environ.get("QNB_CACHE", "1").strip().lower() not in ("0", "false", "no", "off")


# CPython's store behind os.environ on POSIX (bytes keys): a lookup there costs ~20 ns
# where os.environ.get costs ~0.5 µs, and always_compile() runs on every launch.
_ENVIRON_BYTES = os.environ._data if os.name == "posix" and hasattr(os.environ, "_data") else None


def always_compile() -> bool:
    """True when ``QNB_ALWAYS_COMPILE=1`` forces every lookup to compile. Read at every
    launch, so that setting it in a running notebook takes effect at once."""
    if _ENVIRON_BYTES is not None and b"QNB_ALWAYS_COMPILE" not in _ENVIRON_BYTES:
        return False  # the usual case, without os.environ's key encoding
    raw = os.environ.get("QNB_ALWAYS_COMPILE")
    return raw is not None and raw.strip().lower() in ("1", "true", "yes", "on")


def parse_max_bytes(raw: str) -> int | None:
    """A ``QNB_CACHE_MAX_BYTES`` value in bytes; None if it is not a number of bytes."""
    try:
        bound = int(raw)
    except ValueError:
        return None
    return bound if bound >= 0 else None


_warned_max_bytes: set[str] = set()  # the invalid values already warned about


def max_bytes() -> int:
    """The size bound of the directory (``QNB_CACHE_MAX_BYTES``, default 1 GiB); an
    invalid value is ignored, with one warning per process."""
    raw = os.environ.get("QNB_CACHE_MAX_BYTES")
    if not raw:
        return DEFAULT_MAX_BYTES
    bound = parse_max_bytes(raw)
    if bound is not None:
        return bound
    if raw not in _warned_max_bytes:
        _warned_max_bytes.add(raw)
        log.warning(
            "ignoring QNB_CACHE_MAX_BYTES=%r (not a number of bytes); using %d",
            raw,
            DEFAULT_MAX_BYTES,
        )
    return DEFAULT_MAX_BYTES


# ---------------------------------------------------------------------------------
# The directory, and degrading to memory-only
# ---------------------------------------------------------------------------------

_state_lock = threading.Lock()
_unusable: dict[str, str] = {}  # directory → why the disk level is off there
_warned_unusable = False


def usable_directory() -> Path | None:
    """The cache directory, created private (0o700) if needed; None when the disk
    level is off (``QNB_CACHE=0``) or the directory cannot be used."""
    if not disk_enabled():
        return None
    path = directory()
    if str(path) in _unusable:
        return None
    why = directory_problem(path)
    if why is None and not path.is_dir():
        try:
            _make_private(path)
        except OSError as exc:
            why = f"cannot create it ({exc.strerror or exc})"
        else:
            why = directory_problem(path)  # (another account may have made it first)
    if why is not None:
        _degrade(path, why)
        return None
    return path


def _make_private(path: Path) -> None:
    """Create ``path`` and each missing directory above it, each 0o700 (pathlib's
    ``mkdir(parents=True)`` makes the parents with the umask's mode)."""
    missing = []
    while not path.is_dir():
        missing.append(path)
        if path.parent == path:
            break
        path = path.parent
    for level in reversed(missing):
        try:
            os.mkdir(level, 0o700)
        except FileExistsError:
            if not level.is_dir():
                raise
            continue
        os.chmod(level, 0o700)  # whatever the umask took away or left


def directory_problem(path: Path) -> str | None:
    """Why ``path`` cannot hold the disk cache, or None if it can (creating it where
    needed). Creates nothing: ``qnb doctor`` asks this too, so it says what a launch
    will find."""
    try:
        info = os.stat(path)
    except (OSError, ValueError):
        info = None  # (as Path.is_dir: not a directory we can use)
    if info is not None and stat.S_ISDIR(info.st_mode):
        return _unsafe(path, info) or (
            None if os.access(path, os.R_OK | os.W_OK | os.X_OK) else "it is not writable"
        )
    if path.exists() or path.is_symlink():
        return "it is not a directory"
    parent = path.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        return f"cannot create it ({parent} is not a directory)"
    if not os.access(parent, os.W_OK | os.X_OK):
        return f"cannot create it ({parent} is not writable)"
    return None


def _unsafe(path: Path, info: os.stat_result | None = None, holds: str = "kernels") -> str | None:
    """Why another account could plant entries in the directory ``path``, if it could:
    it is not the user's own, or group or others may write to it. (An entry's
    checksum is no defence: anyone can recompute a sha256.) ``info``: its ``os.stat``,
    where the caller has just taken it; ``holds``: what an account could plant there."""
    try:
        info = os.stat(path) if info is None else info
    except OSError as exc:
        return f"cannot check it ({exc.strerror or exc})"
    if info.st_uid != os.geteuid():
        return (
            f"it is owned by another user (uid {info.st_uid}), so that account could plant {holds}"
        )
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return (
            f"group or others may write to it (mode {stat.S_IMODE(info.st_mode):o}), so "
            f"another account could plant {holds} (chmod go-w it)"
        )
    return None


def refusal(root: Path, holds: str = "kernels") -> str | None:
    """Why the directory ``root`` must not be read or changed at all (it exists and
    another account could write it), or None. Listing, explaining and clearing ask;
    ``holds`` says what an account could plant there (a subdirectory's own contents)."""
    return _unsafe(root, holds=holds) if root.is_dir() else None


def _degrade(path: Path, why: str) -> None:
    """Turn the disk level off for ``path``; warn once per process."""
    global _warned_unusable
    with _state_lock:
        _unusable[str(path)] = why
        first = not _warned_unusable
        _warned_unusable = True
    message = f"qnb kernel cache directory {path} is unusable: {why}; caching in memory only"
    if first:
        log.warning_beside("%s", message)
        warn(message)
    else:
        log.debug("%s", message)


def unusable_reason() -> str | None:
    """Why the current directory's disk level is off, if it is."""
    return _unusable.get(str(directory()))


# ---------------------------------------------------------------------------------
# Entries
# ---------------------------------------------------------------------------------


def sanitise(kernel_name: str) -> str:
    """A file-name-safe form of a kernel name (no '-', which separates the digest)."""
    cleaned = re.sub(r"[^A-Za-z0-9_.]", "_", kernel_name).strip(".") or "kernel"
    return cleaned[:80]


def entry_path(root: Path, kernel_name: str, digest: str) -> Path:
    return root / f"{sanitise(kernel_name)}-{digest}{SUFFIX}"


def is_entry_name(name: str) -> bool:
    """Whether a file name is one qnb gives its entries."""
    return _ENTRY_NAME.fullmatch(name) is not None


def is_temp_name(name: str) -> bool:
    """Whether a file name is one of qnb's temp files (an entry being written)."""
    return _TEMP_NAME.fullmatch(name) is not None


def digest_from_filename(path: Path) -> str | None:
    if not is_entry_name(path.name):
        return None
    return path.name[: -len(SUFFIX)].rsplit("-", 1)[1]


class NotAnEntryFile(OSError):
    """Something under an entry name that is not a regular file of the user's, at most
    ``MAX_ENTRY_BYTES``: never read."""


_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
_OPEN_FLAGS |= getattr(os, "O_CLOEXEC", 0)


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISLNK, "a symbolic link"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return name
    return "not a regular file"


def _refuse_special(info: os.stat_result) -> None:
    if not stat.S_ISREG(info.st_mode):
        raise NotAnEntryFile(f"it is {_kind(info.st_mode)}, not a regular file")
    if info.st_uid != os.geteuid():
        raise NotAnEntryFile(f"it is owned by another user (uid {info.st_uid})")
    if info.st_size > MAX_ENTRY_BYTES:
        raise NotAnEntryFile(f"it is larger than {MAX_ENTRY_BYTES >> 20} MiB")


def read_regular(path: Path) -> tuple[bytes, os.stat_result]:
    """(contents, fstat) of the regular file ``path``; NotAnEntryFile for anything
    else (a link, a FIFO, a device, a directory, another user's file, one over
    ``MAX_ENTRY_BYTES``), FileNotFoundError if there is nothing. Never follows a link,
    never blocks on a FIFO, never reads more than the cap plus one byte."""
    _refuse_special(os.lstat(path))  # a device is not even opened
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # replaced by a link since the lstat
            raise NotAnEntryFile("it is a symbolic link, not a regular file") from None
        raise
    try:
        info = os.fstat(fd)
        _refuse_special(info)  # what was opened, whatever the name points at now
        chunks, left = [], MAX_ENTRY_BYTES + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) > MAX_ENTRY_BYTES:
        raise NotAnEntryFile(f"it is larger than {MAX_ENTRY_BYTES >> 20} MiB")
    return data, info


def is_regular_entry(item: os.DirEntry) -> bool:
    """Whether a directory listing's item is a regular file (not following a link)."""
    try:
        return item.is_file(follow_symlinks=False)
    except OSError:
        return False


def payload_checksum(payload: str, binary: bytes | None) -> str:
    """sha256 over the artifact's text fields (as stored: canonical JSON text) and
    its binary."""
    h = hashlib.sha256()
    h.update(payload.encode("utf-8"))
    h.update(b"\0binary:")
    h.update(b"none" if binary is None else b"bytes:" + binary)
    return h.hexdigest()


@dataclass
class EntryInfo:
    """What listing the directory tells about one entry (not verified)."""

    path: Path
    kernel: str
    backend: str
    digest: str
    components: dict
    created: float
    last_used: float
    file_size: int
    origin: str | None = None  # "file:line" of the kernel that wrote it (not in the key)

    @property
    def short(self) -> str:
        return self.digest[:12]


class CorruptEntry(Exception):
    """Why an entry on disk cannot be trusted."""


def save(
    kernel_name: str, backend_name: str, key: CacheKey, artifact: Any, origin: str | None = None
) -> Path | None:
    """Write ``artifact`` as the entry for ``key``; None if the disk level is off.
    ``origin`` ("file:line" of the kernel's def) is kept beside the key for listings.

    Never raises for I/O trouble: a failed write degrades to memory-only."""
    root = usable_directory()
    if root is None:
        return None
    binary = artifact.binary
    # The text fields are stored as one canonical JSON string, so a load checks them
    # by hashing bytes rather than re-canonicalising a tree.
    payload = canonical_json(artifact.text)
    entry = {
        "schema": SCHEMA,
        "digest": key.digest,
        "kernel": kernel_name,
        "backend": backend_name,
        "components": key.components,
        "payload": payload,
        "binary": None if binary is None else _base64().b64encode(binary).decode("ascii"),
        "payload_sha256": payload_checksum(payload, binary),
        "created": time.time(),
        "size": len(payload) + (len(binary) if binary is not None else 0),
    }
    if origin is not None:
        entry["origin"] = origin
    data = json.dumps(entry, sort_keys=True, indent=1, ensure_ascii=True).encode("utf-8")
    final = entry_path(root, kernel_name, key.digest)
    try:
        write_atomically(root, final, data)
    except IsADirectoryError:  # a directory under the entry's name: load said so
        log.debug("not storing %s: a directory has its name", final)
        return None
    except OSError as exc:
        _degrade(root, f"writing an entry failed ({exc.strerror or exc})")
        return None
    evict(root, max_bytes(), keep=final)
    return final


def write_atomically(root: Path, final: Path, data: bytes) -> None:
    """``data`` as ``final``: written to a temporary file in ``root``, synced, then
    renamed over ``final`` (a reader sees the old file or the new one, never a part).
    Raises OSError; the temporary file never outlives a failure."""
    import tempfile

    temp_name = None
    try:
        fd, temp_name = tempfile.mkstemp(
            prefix=f".{final.stem[:40]}.", suffix=TEMP_SUFFIX, dir=root
        )
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp_name, final)
        temp_name = None
    finally:
        if temp_name is not None:
            _unlink_quietly(Path(temp_name))


# ``root=CHECK`` (the default) of load and load_manifest: check the directory now; a
# lookup that reads a manifest and then an entry checks it once and passes what it found.
CHECK: Any = object()


def load(
    kernel_name: str, key: CacheKey, root: Path | None = CHECK
) -> tuple[Any | None, str | None]:
    """(artifact, None) for a verified entry; (None, why) when an entry existed but
    was discarded; (None, None) when there is none (or the disk level is off).
    ``root``: :func:`usable_directory`'s answer, where the caller has just asked it."""
    if root is CHECK:
        root = usable_directory()
    if root is None:
        return None, None
    path = entry_path(root, kernel_name, key.digest)
    try:
        data, info = read_regular(path)
    except FileNotFoundError:
        return None, None
    except NotAnEntryFile as exc:
        why = str(exc)
        discard(path, why)
        return None, why
    except OSError as exc:
        log.debug("cannot read %s: %s", path, exc)
        return None, None
    try:
        artifact = verify(data, path, key.digest, key.components)
    except CorruptEntry as exc:
        why = str(exc)
        discard(path, why, info.st_ino)
        return None, why
    with contextlib.suppress(OSError):
        os.utime(path)  # least-recently-used order follows the mtime
    return artifact, None


def verify(data: bytes, path: Path, digest: str, expected_components=None):
    """The artifact stored in ``data`` if every check passes; else CorruptEntry.

    ``expected_components`` (the requested key's, as JSON gives them back) lets a warm
    start skip re-hashing: stored components exactly equal to them hash to ``digest``."""
    try:
        return _verify(data, path, digest, expected_components)
    except RecursionError:  # a crafted entry: JSON nested deeper than Python recurses
        raise CorruptEntry("not a cache entry (JSON nested too deeply)") from None


def _verify(data: bytes, path: Path, digest: str, expected_components):
    from qnb.backends.base import Artifact

    entry = _parse(data)
    if not isinstance(entry, dict):
        raise CorruptEntry("not a cache entry (JSON but not an object)")
    if entry.get("schema") != SCHEMA:
        raise CorruptEntry(f"schema {entry.get('schema')!r}, expected {SCHEMA}")
    name_digest = digest_from_filename(path)
    if name_digest != digest or entry.get("digest") != digest:
        raise CorruptEntry("entry was written for another key (digest mismatch)")
    components = entry.get("components")
    if not isinstance(components, dict):
        raise CorruptEntry("no key components")
    if expected_components is not None and same_json(components, dict(expected_components)):
        stored_digest = digest
    else:
        try:
            stored_digest = CacheKey(components).digest
        except (TypeError, ValueError) as exc:
            raise CorruptEntry(f"malformed key components ({exc})") from None
    if stored_digest != digest:
        raise CorruptEntry("stored key components do not hash to the entry's key")
    payload, encoded = entry.get("payload"), entry.get("binary")
    if not isinstance(payload, str) or not (encoded is None or isinstance(encoded, str)):
        raise CorruptEntry("malformed payload")
    try:
        binary = None if encoded is None else _base64().b64decode(encoded, validate=True)
    except ValueError:  # (binascii.Error is one)
        raise CorruptEntry("binary is not valid base64") from None
    if payload_checksum(payload, binary) != entry.get("payload_sha256"):
        raise CorruptEntry("payload checksum mismatch")
    try:
        text = json.loads(payload)
    except ValueError:
        raise CorruptEntry("payload is not valid JSON") from None
    if not isinstance(text, dict):
        raise CorruptEntry("malformed payload")
    return Artifact(text=text, binary=binary)


def _base64():
    """:mod:`base64`, imported where an entry has a binary (the cpu backend's have none)."""
    import base64

    return base64


def _parse(data: bytes):
    """The JSON value in ``data``; CorruptEntry if it is not JSON (RecursionError,
    for JSON nested too deeply, is the caller's to turn into one)."""
    try:
        return json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise CorruptEntry(f"not valid JSON ({_first_line(exc)})") from None


def discard(path: Path, why: str, inode: int | None = None) -> None:
    """Warn about and delete a bad entry (unless another process replaced it since)."""
    message = f"qnb kernel cache: discarding {path.name}: {why}; recompiling"
    log.warning_beside("%s", message)
    warn(message)
    try:
        found = os.lstat(path)
        if (inode is None or found.st_ino == inode) and not stat.S_ISDIR(found.st_mode):
            path.unlink()  # (a link itself, never what it points at)
    except OSError:
        pass


def _first_line(exc: BaseException) -> str:
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def _unlink_quietly(path: Path) -> None:
    with contextlib.suppress(OSError):
        path.unlink()


# ---------------------------------------------------------------------------------
# Listing, eviction, clearing
# ---------------------------------------------------------------------------------


def _entry_files(root: Path, prefix: str = "") -> list[os.DirEntry]:
    try:
        with os.scandir(root) as scan:
            return [
                item
                for item in scan
                if item.name.startswith(prefix)
                and is_entry_name(item.name)
                and is_regular_entry(item)
            ]
    except OSError:
        return []


def evict(root: Path, bound: int, keep: Path | None = None) -> list[Path]:
    """Delete least-recently-used entries (and parsed wgpu headers, :func:`header_files`)
    until the directory holds ``bound`` bytes or less (never ``keep``, the entry just
    written); the read manifests count too, and go with the last entry they list.
    Returns what was deleted."""
    sized = []
    now = time.time()
    try:
        with os.scandir(root) as scan:
            items = list(scan)
    except OSError:
        return []
    names = set()
    others = 0  # the bytes of manifests: counted, deleted only with their entries
    for item in items:
        if not is_regular_entry(item):
            continue  # only qnb's own files: never a link, a FIFO, a directory
        try:
            found = item.stat(follow_symlinks=False)
        except OSError:
            continue
        names.add(item.name)
        if is_temp_name(item.name):
            if now - found.st_mtime > _STALE_TEMP_SECONDS:  # left by a crashed writer
                _unlink_quietly(Path(item.path))
        elif is_entry_name(item.name):
            sized.append((found.st_mtime, item.name, found.st_size, Path(item.path)))
        elif is_manifest_name(item.name):
            others += found.st_size
    for path, found in header_files(root):
        sized.append((found.st_mtime, path.name, found.st_size, path))
    total = sum(size for _, _, size, _ in sized) + others
    deleted = []
    for _, name, size, path in sorted(sized):
        if total <= bound:
            break
        if keep is not None and path == keep:
            continue
        try:
            path.unlink()
        except FileNotFoundError:
            pass
        except OSError:
            continue
        total -= size
        deleted.append(path)
        names.discard(name)
    if deleted:
        deleted += drop_orphan_manifests(root, names)
        log.info(
            "evicted %d cache file%s to stay under %d bytes",
            len(deleted),
            "" if len(deleted) == 1 else "s",
            bound,
        )
    return deleted


# The parsed wgpu C headers (qnb/backends/wgpu_cffi.py) in their directory under the cache:
# derived data like an entry, so they count toward the bound and ``clear`` removes them.
HEADER_DIRECTORY = "wgpu-cffi-header"
_HEADER_FILE = re.compile(r"[0-9a-f]{64}\.json")


def header_files(root: Path) -> list[tuple[Path, os.stat_result]]:
    """The parsed-header files (regular files of qnb's name pattern) in ``root``'s header
    directory, with their ``lstat``; none where that directory is a link, not a
    directory, or one another account could write (it is not qnb's to touch then)."""
    directory = root / HEADER_DIRECTORY
    try:
        info = os.lstat(directory)
    except OSError:
        return []
    if not stat.S_ISDIR(info.st_mode) or _unsafe(directory, info) is not None:
        return []
    found = []
    try:
        with os.scandir(directory) as scan:
            for item in scan:
                if _HEADER_FILE.fullmatch(item.name) and is_regular_entry(item):
                    with contextlib.suppress(OSError):
                        found.append((Path(item.path), item.stat(follow_symlinks=False)))
    except OSError:
        return []
    return found


def read_info(path: Path) -> EntryInfo | None:
    """An entry's metadata and components, without verifying its payload; None if it
    cannot be read or is not an entry qnb wrote (malformed or foreign), so listing
    and explaining skip it."""
    try:
        data, found = read_regular(path)
    except OSError:  # gone, or not a regular file of the user's (never read)
        return None
    try:
        entry = _parse(data)
    except (CorruptEntry, RecursionError):
        return None
    if not isinstance(entry, dict) or entry.get("schema") != SCHEMA:
        return None
    kernel, backend, digest = entry.get("kernel"), entry.get("backend"), entry.get("digest")
    components = entry.get("components")
    if (
        not isinstance(kernel, str)
        or not isinstance(backend, str)
        or not isinstance(digest, str)
        or digest != digest_from_filename(path)
        or not _is_key(components, digest)
    ):
        return None
    return EntryInfo(
        path=path,
        kernel=kernel,
        backend=backend,
        digest=digest,
        components=components,
        created=_timestamp(entry.get("created"), found.st_mtime),
        last_used=found.st_mtime,
        file_size=found.st_size,
        origin=entry["origin"] if isinstance(entry.get("origin"), str) else None,
    )


def _is_key(components: Any, digest: str) -> bool:
    """Whether ``components`` are a whole key (every component, nothing nested deeper
    than a key qnb writes) that hashes to ``digest``."""
    if not isinstance(components, dict) or set(components) != set(COMPONENTS):
        return False
    if _depth(components) > MAX_COMPONENT_DEPTH:
        return False
    try:
        return CacheKey(components).digest == digest
    except (TypeError, ValueError):
        return False


def _depth(value: Any) -> int:
    """How deeply lists and dicts nest in a JSON value (without recursing)."""
    deepest, pending = 0, [(value, 1)]
    while pending:
        value, depth = pending.pop()
        if isinstance(value, dict):
            value = list(value.values())
        if isinstance(value, list):
            deepest = max(deepest, depth)
            if depth <= MAX_COMPONENT_DEPTH:
                pending.extend((item, depth + 1) for item in value)
    return deepest


def _timestamp(value: Any, fallback: float) -> float:
    """``value`` if it is a time a clock can show, else ``fallback`` (the file's mtime)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return fallback
    try:
        time.localtime(value)
    except (OverflowError, OSError, ValueError):
        return fallback
    return float(value)


def list_entries(
    kernel_name: str | None = None, root: Path | None = None, limit: int | None = None
) -> list[EntryInfo]:
    """Entries on disk (those of ``kernel_name`` only, if given), most recently used
    first; at most ``limit`` of them are read."""
    if root is None:
        root = directory()
    if refusal(root) is not None:
        return []  # another account could have written them: not read
    prefix = f"{sanitise(kernel_name)}-" if kernel_name is not None else ""
    files = _entry_files(root, prefix)
    stamped = []
    for item in files:
        try:
            stamped.append((item.stat(follow_symlinks=False).st_mtime, item.path))
        except OSError:
            continue
    stamped.sort(reverse=True)
    if limit is not None:
        stamped = stamped[:limit]
    infos = []
    for _, path in stamped:
        info = read_info(Path(path))
        if info is None:
            continue
        if kernel_name is not None and info.kernel != kernel_name:
            continue  # another kernel whose name sanitises the same
        infos.append(info)
    return infos


def disk_usage(root: Path | None = None) -> tuple[int, int]:
    """(number of entries, bytes) in the directory: the bytes of what counts toward
    ``QNB_CACHE_MAX_BYTES`` (entries, read manifests, parsed wgpu headers)."""
    if root is None:
        root = directory()
    count = size = 0
    try:
        with os.scandir(root) as scan:
            items = [i for i in scan if is_regular_entry(i)]
    except OSError:
        items = []
    for item in items:
        entry = is_entry_name(item.name)
        if not (entry or is_manifest_name(item.name)):
            continue
        try:
            size += item.stat(follow_symlinks=False).st_size
        except OSError:
            continue
        count += entry
    size += sum(info.st_size for _, info in header_files(root))
    return count, size


@dataclass(repr=False)
class ClearResult:
    """What clearing did: ``removed`` disk entries, and the ``failed`` ones as (path,
    why) pairs (the directory itself, when it could not be listed). ``memory`` is the
    number of kernels dropped from this process's memory level (None where only the
    disk was cleared, as ``qnb cache clear`` does); ``disk`` is False where the disk
    level was left alone (``qnb.cache.clear(disk=False)``, ``%qcache clear``)."""

    directory: Path
    removed: int = 0
    failed: list[tuple[Path, str]] = field(default_factory=list)
    memory: int | None = None
    disk: bool = True

    def __str__(self) -> str:
        cleared = (
            ""
            if self.memory is None
            else f"cleared this process's memory level ({self.memory} compiled kernel"
            f"{'' if self.memory == 1 else 's'}, its events and counts)"
        )
        if not self.disk:
            return f"{cleared}; the disk cache in {self.directory} is kept"
        text = f"removed {_entries(self.removed)} from {self.directory}"
        if cleared:
            text = f"{cleared}; {text}"
        if not self.failed:
            return text
        path, why = self.failed[0]
        if path == self.directory:
            return f"could not clear {self.directory}: {why}"
        more = f" (and {len(self.failed) - 1} more)" if len(self.failed) > 1 else ""
        return f"{text}; could not remove {_entries(len(self.failed))}: {path.name}: {why}{more}"

    def __repr__(self) -> str:  # what a notebook shows for qnb.cache.clear()
        return f"<qnb.cache.ClearResult: {self}>"


def _entries(count: int) -> str:
    return f"{count} entr{'y' if count == 1 else 'ies'}"


def clear_disk(root: Path | None = None) -> ClearResult:
    """Delete every entry (and leftover temp file); says what went and what could not."""
    if root is None:
        root = directory()
    result = ClearResult(root)
    refused = refusal(root)
    if refused is not None:  # another account's files, or files it could have planted
        result.failed.append((root, f"not touching it: {refused}"))
        return result
    try:
        with os.scandir(root) as scan:
            items = list(scan)
    except FileNotFoundError:
        return result
    except OSError as exc:
        result.failed.append((root, f"cannot list it ({exc.strerror or exc})"))
        return result
    for item in items:
        if is_entry_name(item.name):
            try:
                os.unlink(item.path)
            except FileNotFoundError:  # another process removed it first
                continue
            except OSError as exc:
                result.failed.append((Path(item.path), exc.strerror or str(exc)))
                continue
            result.removed += 1
        elif is_temp_name(item.name) or is_manifest_name(item.name):
            _unlink_quietly(Path(item.path))
    for path, _info in header_files(root):  # derived data too: parsed again when needed
        try:
            path.unlink()
        except FileNotFoundError:
            continue
        except OSError as exc:
            result.failed.append((path, exc.strerror or str(exc)))
    return result


# ------------------------------------------------------------------ read manifests' files
# (``manifests.py`` keeps what a manifest means; the directory's housekeeping, its names
# and its orphans, is the store's: one owner of the directory)

MANIFEST_SUFFIX = ".reads"
MAX_MANIFEST_BYTES = 1 << 20
_MANIFEST_NAME = re.compile(r"[A-Za-z0-9_.]{1,80}-[0-9a-f]{64}\.reads")
_DIGEST = re.compile(r"[0-9a-f]{64}")


def is_manifest_name(name: str) -> bool:
    return _MANIFEST_NAME.fullmatch(name) is not None


def read_manifest(path: Path) -> dict | None:
    """A manifest file's JSON object; None when it is not a regular file qnb wrote (never
    blocks, never follows a link)."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_MANIFEST_BYTES:
            return None
        with os.fdopen(fd, "rb") as handle:
            fd = None
            data = handle.read(MAX_MANIFEST_BYTES + 1)
    except OSError:
        return None
    finally:
        if fd is not None:
            os.close(fd)
    try:
        manifest = json.loads(data)
    except (ValueError, RecursionError):
        return None
    return manifest if isinstance(manifest, dict) else None


def manifest_entries(manifest: dict) -> list[str] | None:
    """The entry digests a manifest lists; None for one that lists none (an older qnb's)."""
    entries = manifest.get("entries")
    if not isinstance(entries, list):
        return None
    return [d for d in entries if isinstance(d, str) and _DIGEST.fullmatch(d)]


def drop_orphan_manifests(root: Path, names: set[str]) -> list[Path]:
    """Delete each manifest in ``root`` none of whose entries is left (``names``: the file
    names in the directory now); a manifest of an older qnb, which lists no entries, goes
    when no entry of its kernel is left. Returns what was deleted."""
    kernels_left = {name.rsplit("-", 1)[0] for name in names if is_entry_name(name)}
    deleted = []
    for name in sorted(names):
        if not is_manifest_name(name):
            continue
        path = root / name
        manifest = read_manifest(path)
        entries = None if manifest is None else manifest_entries(manifest)
        kernel = name.rsplit("-", 1)[0]
        if entries is None:
            orphan = kernel not in kernels_left
        else:
            orphan = not any(f"{kernel}-{digest}{SUFFIX}" in names for digest in entries)
        if orphan:
            try:
                found = os.lstat(path)
                if stat.S_ISREG(found.st_mode):
                    path.unlink()
                    deleted.append(path)
            except OSError:
                continue
    return deleted
