"""kvplan's cache folder and one file format for arrays kept there raw, read back byte for
byte (the kernel tables, the random workloads' draws).

    root  = $KVPLAN_CACHE_DIR or $XDG_CACHE_HOME/kvplan or ~/.cache/kvplan
    body  = MAGIC (the kind and layout version), an 8-byte header length, the JSON header
            {name: [dtype, shape, offset]}, the arrays at 64-byte-aligned offsets

``load`` views the arrays with ``np.frombuffer`` over the file mapped copy-on-write (the same
dtypes, shapes and bytes as saved, writable, pages read when touched); an unreadable, short,
foreign or malformed file is None. ``save`` writes atomically and answers False where the
folder cannot be written (callers then work without the cache, silently).
"""

from __future__ import annotations

import json
import mmap
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # numpy loads with the first load or save: cache_root alone needs none
    import numpy.typing as npt

Arrays = dict[str, "npt.NDArray[Any]"]
_ALIGN = 64


def cache_root() -> Path:
    """kvplan's cache folder (every cache lives in a folder of its own below it)."""
    env = os.environ.get("KVPLAN_CACHE_DIR")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "kvplan"


def load(entry: Path, magic: bytes) -> Arrays | None:
    """The arrays of ``entry``, or None if it is missing, not whole or not ``magic``'s."""
    import numpy as np

    try:
        data = _mapped(entry)
        if data[:len(magic)] != magic:
            return None
        size = int.from_bytes(data[len(magic):len(magic) + 8], "little")
        header = json.loads(data[len(magic) + 8:len(magic) + 8 + size].decode("utf-8"))
        base = _aligned(len(magic) + 8 + size)
        out: Arrays = {}
        for name, (dtype, shape, offset) in header.items():
            count = int(np.prod(shape, dtype=np.int64))
            out[name] = np.frombuffer(data, dtype=np.dtype(dtype), count=count,
                                      offset=base + offset).reshape(shape)
        return out
    except (OSError, ValueError, TypeError, KeyError, UnicodeDecodeError):
        return None


def _mapped(entry: Path) -> mmap.mmap:
    """The file mapped copy-on-write: writable arrays (as np.load's are) whose pages are read
    when touched (a dense model reads 12 of a GPU's 38 tables); ``save`` replaces a file,
    never rewrites it in place, so a mapping stays whole."""
    with entry.open("rb") as f:
        return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY)


def save(entry: Path, arrays: Arrays, magic: bytes) -> bool:
    """Write every array raw to ``entry`` (atomically); False where it cannot be written."""
    import numpy as np

    header: dict[str, list[Any]] = {}
    end = 0
    for name, a in arrays.items():  # offsets from the data's start, each 64-byte aligned
        header[name] = [a.dtype.str, list(a.shape), _aligned(end)]
        end = _aligned(end) + a.nbytes
    text = json.dumps(header).encode("utf-8")
    base = _aligned(len(magic) + 8 + len(text))
    body = bytearray(base + end)
    body[:len(magic) + 8 + len(text)] = magic + len(text).to_bytes(8, "little") + text
    for name, a in arrays.items():
        at = base + header[name][2]
        body[at:at + a.nbytes] = np.ascontiguousarray(a).tobytes()
    try:
        from kvplan.atomic_file import atomic_write

        entry.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(entry, bytes(body))
    except OSError:
        return False
    return True


def _aligned(n: int) -> int:
    return -(-n // _ALIGN) * _ALIGN
