"""Dataclass methods compiled once, not on every run: the console entry keeps the code of the
functions ``dataclasses`` writes for each class (``__init__``, ``__repr__``, ``__eq__``, a
frozen class's ``__setattr__`` ...) in a cache file and execs that code instead of compiling
the same source text again.

Why: CPython 3.11 and 3.12 compile one source string per generated method (``_create_fn``:
``exec(txt, globals, ns)``). A 10,000-request ``kvplan simulate`` defines 79 dataclasses, about
450 such strings: compiling them was a fifth to a quarter of the whole command's CPU.

How: ``install()`` binds the name ``exec`` in the ``dataclasses`` module's globals (the builtin
is untouched everywhere else). A source string seen before runs its cached code object, which
is what ``exec(txt)`` compiles (``compile(txt, "<string>", "exec", dont_inherit=True)``: no
future flags, as in ``dataclasses`` itself); a new string is compiled, run and kept, and the
file is rewritten at exit. Same text, same code: a stale entry can only be missed, never
wrong. Non-string sources go straight to the builtin.

    file = $KVPLAN_CACHE_DIR or $XDG_CACHE_HOME/kvplan or ~/.cache/kvplan,
           /code/dataclass-CACHE_TAG-HEXVERSION-v3.bin (one per interpreter build and
           file layout: kvplan versions with other layouts keep files of their own)
    body = MAGIC, an 8-byte index length, the index, the entries
    index = marshal.dumps({UTF-8 length of a text: (offset, code length, offset, ...)})
    entry = the text's UTF-8 bytes, then marshal.dumps(its code object)

A run reads the file whole but decodes only the entries it meets: a text is looked up by
its length, compared byte for byte with the entries of that length, and its code
unmarshalled then. The file holds every command's classes (1,482 after a test run, 1.9 MB:
a dict of them all took 7-9 ms to unmarshal, more than a ``simulate`` spends on its 441).

An unreadable, short or malformed file is ignored; a folder that cannot be written means no
file, silently (as the kernel-table and trace caches do).
"""

from __future__ import annotations

import builtins
import marshal
import os
import sys
from types import CodeType
from typing import Any

LAYOUT = 3
MAGIC = b"kvplan-dataclass-code-%d\n" % LAYOUT
MAX_ENTRIES = 4096
"""More than this in the file (many kvplan versions' classes): keep only this run's."""


def _utf8(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


class Stored:
    """A cache file's entries, each read when asked for: ``index`` maps a text's UTF-8
    length to its entries' (offset, code length) pairs, flat; ``blob`` holds the entries
    (the file mapped: only the pages of the entries met are read)."""

    def __init__(self, index: dict[int, tuple[int, ...]] | None = None,
                 blob: bytes | memoryview = b"") -> None:
        self.index = index or {}
        self.blob = blob

    def find(self, text: bytes) -> bytes | None:
        """The marshalled code stored for ``text`` (its UTF-8 bytes), or None."""
        n, blob = len(text), self.blob
        at = self.index.get(n)
        if type(at) is not tuple:
            return None
        try:
            for i in range(0, len(at) - 1, 2):
                off, size = at[i], at[i + 1]
                if blob[off:off + n] == text:
                    return bytes(blob[off + n:off + n + size])
        except TypeError:  # a malformed index entry
            return None
        return None

    def entries(self) -> dict[bytes, bytes]:
        """Every entry as text bytes -> marshalled code (to write the file again)."""
        return {bytes(self.blob[off:off + n]): bytes(self.blob[off + n:off + n + size])
                for n, at in self.index.items() if isinstance(n, int)
                for off, size in self._pairs(at)}

    @staticmethod
    def _pairs(at: object) -> list[tuple[int, int]]:
        """(offset, code length) pairs of one index entry; none from a malformed one."""
        if not isinstance(at, tuple) or not all(isinstance(x, int) and x >= 0 for x in at):
            return []
        return list(zip(at[0::2], at[1::2], strict=False))


class CodeCache:
    """Source text -> code object for the texts this process met (from ``stored``, or
    compiled where it has none or a bad one), and whether any was new."""

    def __init__(self, stored: Stored | None = None) -> None:
        self.stored = stored or Stored()
        self.codes: dict[str, CodeType] = {}
        self.new = False

    def code(self, text: str) -> CodeType:
        got = self.codes.get(text)
        if got is None:
            raw = self.stored.find(_utf8(text))
            got = None if raw is None else _unmarshal(raw)
            if got is None:
                got = compile(text, "<string>", "exec", dont_inherit=True)
                self.new = True
            self.codes[text] = got
        return got

    def exec(self, source: Any, globals: Any = None, locals: Any = None, /) -> None:
        """``exec`` as ``dataclasses`` calls it, from cached code for a source string."""
        if not isinstance(source, str):
            builtins.exec(source, globals, locals)
            return
        if globals is None:  # the caller's globals: dataclasses' own
            globals = vars(sys.modules["dataclasses"])
        builtins.exec(self.code(source), globals, locals)

    def payload(self) -> bytes:
        """The file: this run's entries and the stored ones (only this run's past
        MAX_ENTRIES)."""
        mine = {_utf8(t): marshal.dumps(c) for t, c in self.codes.items()}
        keep = {**self.stored.entries(), **mine}
        return pack(mine if len(keep) > MAX_ENTRIES else keep)


def pack(entries: dict[bytes, bytes]) -> bytes:
    """A cache file's body: text bytes -> marshalled code (module docstring's layout)."""
    index: dict[int, list[int]] = {}
    parts, off = [], 0
    for text, code in entries.items():
        index.setdefault(len(text), []).extend((off, len(code)))
        parts.append(text + code)
        off += len(text) + len(code)
    head = marshal.dumps({n: tuple(v) for n, v in index.items()})
    return MAGIC + len(head).to_bytes(8, "little") + head + b"".join(parts)


def unpack(data: bytes | memoryview) -> Stored:
    """``pack``'s entries back (none from a foreign or malformed body; a bad index entry is
    skipped, a bad code compiled afresh when met: ``Stored``, ``_unmarshal``)."""
    if data[:len(MAGIC)] != MAGIC:
        return Stored()
    at = len(MAGIC) + 8
    size = int.from_bytes(data[len(MAGIC):at], "little")
    try:
        index = marshal.loads(data[at:at + size])
    except (ValueError, EOFError, TypeError):
        return Stored()
    return Stored(index, data[at + size:]) if isinstance(index, dict) else Stored()


def _unmarshal(raw: bytes) -> CodeType | None:
    try:
        got = marshal.loads(raw)
    except (ValueError, EOFError, TypeError):
        return None
    return got if isinstance(got, CodeType) else None


def cache_file() -> str:
    """Where this interpreter's dataclass code is kept (kvplan's cache root, /code)."""
    from kvplan.raw_arrays import cache_root

    tag = sys.implementation.cache_tag or "none"
    return str(cache_root() / "code" / f"dataclass-{tag}-{sys.hexversion:x}-v{LAYOUT}.bin")


def load(path: str) -> Stored:
    """The file's entries (``unpack`` over the file mapped read-only: ``save`` replaces the
    file, never rewrites it in place), or none if it cannot be read."""
    import mmap

    try:
        with open(path, "rb") as f:
            return unpack(memoryview(mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)))
    except (OSError, ValueError):  # missing, unreadable or empty
        return Stored()


def save(path: str, cache: CodeCache) -> bool:
    """Write the cache if this run compiled anything new; False where it cannot be written."""
    if not cache.new:
        return True
    from kvplan.atomic_file import atomic_write

    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        atomic_write(path, cache.payload())
    except OSError:
        return False
    return True


def install() -> CodeCache | None:
    """Cache the dataclass methods of this process (and save new ones at exit); None where
    ``dataclasses`` compiles no source strings of its own (not CPython) or was set up already."""
    import dataclasses

    if sys.implementation.name != "cpython" or "exec" in vars(dataclasses):
        return None
    path = cache_file()
    cache = CodeCache(load(path))
    dataclasses.exec = cache.exec  # type: ignore[attr-defined]
    import atexit

    atexit.register(save, path, cache)
    return cache
