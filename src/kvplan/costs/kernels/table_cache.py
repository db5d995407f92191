"""A GPU's bundled kernel tables kept uncompressed in one raw file, read back byte for byte.

The bundle (``data/silicon/GPU.npz``) is compressed: a run that prices a dense model inflates
about 12 of its 38 arrays through zipfile and zlib (~10 ms with zipfile's imports). The first
run on a GPU writes every array raw to the cache; later runs read that file once and view
it with ``np.frombuffer``: the same dtypes, shapes and bytes.

    key   = the .npz's size and mtime (ns), the layout version: a changed bundle is missed
    file  = $KVPLAN_CACHE_DIR or $XDG_CACHE_HOME/kvplan or ~/.cache/kvplan, /silicon/KEY.bin
    body  = MAGIC, an 8-byte header length, the JSON header {name: [dtype, shape, offset]},
            the arrays at 64-byte-aligned offsets

An unreadable, short or malformed entry is ignored (the bundle is read as before); a cache
directory that cannot be written means no entry, silently (specs/requests/trace_cache.py
does the same for traces).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

MAGIC = b"kvplan-silicon-raw-1\n"
_ALIGN = 64
Arrays = dict[str, npt.NDArray[Any]]


def cache_dir() -> Path:
    """Where the raw tables are kept (trace_cache.cache_dir's root, /silicon)."""
    env = os.environ.get("KVPLAN_CACHE_DIR")
    if env:
        return Path(env) / "silicon"
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "kvplan" / "silicon"


def entry_for(bundle: Path) -> Path | None:
    """The cache file for this bundle as it is on disk now, or None (no such bundle)."""
    try:
        st = bundle.stat()
    except OSError:
        return None
    return cache_dir() / f"{bundle.stem}-{st.st_size}-{st.st_mtime_ns}.bin"


def load(entry: Path) -> Arrays | None:
    """The arrays of a cache entry, or None if it is missing or not whole."""
    try:
        with entry.open("rb") as f:
            data = bytearray(f.read())  # writable, as np.load's arrays are
        if not data.startswith(MAGIC):
            return None
        size = int.from_bytes(data[len(MAGIC):len(MAGIC) + 8], "little")
        header = json.loads(data[len(MAGIC) + 8:len(MAGIC) + 8 + size].decode("utf-8"))
        base = _aligned(len(MAGIC) + 8 + size)
        out: Arrays = {}
        for name, (dtype, shape, offset) in header.items():
            count = int(np.prod(shape, dtype=np.int64))
            out[name] = np.frombuffer(data, dtype=np.dtype(dtype), count=count,
                                      offset=base + offset).reshape(shape)
        return out
    except (OSError, ValueError, TypeError, KeyError, UnicodeDecodeError):
        return None


def save(entry: Path, arrays: Arrays) -> bool:
    """Write every array raw to ``entry`` (atomically); False where it cannot be written."""
    header: dict[str, list[Any]] = {}
    end = 0
    for name, a in arrays.items():  # offsets from the data's start, each 64-byte aligned
        header[name] = [a.dtype.str, list(a.shape), _aligned(end)]
        end = _aligned(end) + a.nbytes
    text = json.dumps(header).encode("utf-8")
    base = _aligned(len(MAGIC) + 8 + len(text))
    body = bytearray(base + end)
    body[:len(MAGIC) + 8 + len(text)] = MAGIC + len(text).to_bytes(8, "little") + text
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
