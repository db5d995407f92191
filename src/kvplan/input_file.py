"""Reading the files a command is given: regular files only, UTF-8 checked, each one remembered.

Every reader of a file (a config.json, trace, GPU file, profile, price table, measurement file,
saved plan, trace-cache entry, or a bundled data file) goes through here, so that:

* a FIFO, device, socket or folder is refused at once: the file is opened non-blocking (a FIFO
  with no writer would otherwise block the open forever) and ``fstat`` must say regular file;
* bytes that are not UTF-8 raise the same ``UnreadableFile`` (an ``OSError``) as a missing
  file, naming the offset, so one ``except OSError`` covers every way a read can fail;
* the file's identity is recorded: ``report/outputs.py`` refuses to write over any file this
  process has read, whatever name led to it (a model id resolved through the Hugging Face
  cache to a blob, a profile, a trace-cache entry, a bundled file).

The record is process-wide and append-only (a CLI run is one process; the loaders' caches mean
a file read once is not read again, so it is never cleared). A file matches when its device,
inode, size and modification time are those recorded and it is reached by the same real path,
or is a hard link (two names of one inode).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

_READ: dict[tuple[int, int, int, int], set[str]] = {}
"""(device, inode, size, mtime in ns) of every file read -> the real paths it was read by."""

_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a named pipe (FIFO)"),
          (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"))


class UnreadableFile(OSError):
    """A file that is not a regular file, or not UTF-8 text; ``str()`` says which."""


def reason(exc: OSError | UnicodeDecodeError) -> str:
    """A short phrase for why a read failed ('no such file or directory', 'not UTF-8 ...')."""
    if isinstance(exc, UnreadableFile):
        return str(exc)
    if isinstance(exc, UnicodeDecodeError):
        return _not_utf8(exc)
    return (exc.strerror or type(exc).__name__).lower()


def read_bytes(path: str | Path) -> bytes:
    """The bytes of a regular file (UnreadableFile for a FIFO, device, folder)."""
    fd, st = _open_regular(path)
    with os.fdopen(fd, "rb") as f:
        data = f.read()
    _remember(path, st)
    return data


def hash_into(path: str | Path, digest: Any) -> None:
    """Feed a regular file's bytes to ``digest`` (a hashlib object) 1 MiB at a time: a
    10^7-row trace is hashed without holding its ~200 MB in memory."""
    fd, st = _open_regular(path)
    with os.fdopen(fd, "rb") as f:
        while block := f.read(1 << 20):
            digest.update(block)
    _remember(path, st)


def read_text(path: str | Path, encoding: str = "utf-8") -> str:
    """The text of a regular UTF-8 file (``utf-8-sig`` drops a byte-order mark)."""
    data = read_bytes(path)
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as exc:
        raise UnreadableFile(_not_utf8(exc)) from None


def open_text(path: str | Path, encoding: str = "utf-8") -> IO[str]:
    """A regular file opened for streaming text (newline='' as csv wants). Decoding errors
    surface while reading, as UnicodeDecodeError; pass them to ``reason``."""
    fd, st = _open_regular(path)
    _remember(path, st)
    return os.fdopen(fd, "r", encoding=encoding, newline="")


def was_read(path: str | Path) -> bool:
    """Whether the file at ``path`` (symlinks followed) is one this process has read."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return False
    paths = _READ.get(_identity(st), set())
    return bool(paths) and (st.st_nlink > 1 or os.path.realpath(path) in paths)


def _open_regular(path: str | Path) -> tuple[int, os.stat_result]:
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            kind = next((name for test, name in _KINDS if test(st.st_mode)), "not a file")
            raise UnreadableFile(f"it is {kind}, not a regular file")
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd, st


def _remember(path: str | Path, st: os.stat_result) -> None:
    _READ.setdefault(_identity(st), set()).add(os.path.realpath(path))


def _identity(st: os.stat_result) -> tuple[int, int, int, int]:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def _not_utf8(exc: UnicodeDecodeError) -> str:
    return (f"not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at offset {exc.start}); "
            "save the file as UTF-8")


def package_dir() -> Path:
    """The installed kvplan package (its bundled catalog and data files are inputs too)."""
    return Path(__file__).resolve().parent


def package_file(*parts: str) -> Path:
    """A file bundled with kvplan, e.g. ``package_file("data", "prices", "prices.csv")``."""
    return package_dir().joinpath(*parts)


def repeated_column(header: Sequence[str] | None) -> str | None:
    """The first name a CSV header gives twice (csv.DictReader keeps only the last column's
    cells under it, silently), or None."""
    seen: set[str] = set()
    for name in (h.strip() for h in header or ()):
        if name in seen:
            return name
        seen.add(name)
    return None
