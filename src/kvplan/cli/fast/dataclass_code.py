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
           /code/dataclass-CACHE_TAG-HEXVERSION.bin (one per interpreter build)
    body = MAGIC + marshal.dumps({source text: marshal.dumps(code object)})

Each code object is unmarshalled when its text is first met, not when the file is read: the
file holds every command's classes (1,430 after a test run, 1.7 MB: 5-8 ms to unmarshal
whole), a ``simulate`` meets 465 of them (about 1.3 ms).

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

MAGIC = b"kvplan-dataclass-code-2\n"
MAX_ENTRIES = 4096
"""More than this in the file (many kvplan versions' classes): keep only this run's."""


class CodeCache:
    """Source text -> code object (or, until first used, its marshalled bytes from the
    file), with the texts this process used and whether any was new."""

    def __init__(self, codes: dict[str, CodeType | bytes]) -> None:
        self.codes = codes
        self.used: set[str] = set()
        self.new = False

    def code(self, text: str) -> CodeType:
        got = self.codes.get(text)
        if isinstance(got, bytes):
            got = _unmarshal(got)
        if got is None:
            got = compile(text, "<string>", "exec", dont_inherit=True)
            self.new = True
        self.codes[text] = got
        self.used.add(text)
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
        keep = self.codes if len(self.codes) <= MAX_ENTRIES else {
            t: self.codes[t] for t in self.used}
        return MAGIC + marshal.dumps({t: v if isinstance(v, bytes) else marshal.dumps(v)
                                      for t, v in keep.items()})


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
    return str(cache_root() / "code" / f"dataclass-{tag}-{sys.hexversion:x}.bin")


def load(path: str) -> dict[str, CodeType | bytes]:
    """The file's entries (marshalled code), or {} if it is missing, short or not a dict of
    str -> bytes (a bad entry alone is compiled afresh when met: ``_unmarshal``)."""
    try:
        with open(path, "rb") as f:
            data = f.read()
        if not data.startswith(MAGIC):
            return {}
        codes = marshal.loads(data[len(MAGIC):])
    except (OSError, ValueError, EOFError, TypeError):
        return {}
    if not isinstance(codes, dict) or not all(
            isinstance(k, str) and isinstance(v, bytes) for k, v in codes.items()):
        return {}
    return codes


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
