"""A GPU's bundled kernel tables kept uncompressed in one raw file, read back byte for byte.

The bundle (``data/silicon/GPU.npz``) is compressed: a run that prices a dense model inflates
about 12 of its 38 arrays through zipfile and zlib (~10 ms with zipfile's imports). The first
run on a GPU writes every array raw to the cache; later runs read that file once and view
it with ``np.frombuffer``: the same dtypes, shapes and bytes.

    key   = the .npz's size and mtime (ns), the layout version: a changed bundle is missed
    file  = kvplan's cache root (kvplan.raw_arrays), /silicon/KEY.bin, in raw_arrays' format

An unreadable, short or malformed entry is ignored (the bundle is read as before); a cache
directory that cannot be written means no entry, silently (specs/requests/trace_cache.py
does the same for traces).
"""

from __future__ import annotations

from pathlib import Path

from kvplan import raw_arrays
from kvplan.raw_arrays import Arrays

MAGIC = b"kvplan-silicon-raw-1\n"


def cache_dir() -> Path:
    """Where the raw tables are kept (kvplan's cache root, /silicon)."""
    return raw_arrays.cache_root() / "silicon"


def entry_for(bundle: Path) -> Path | None:
    """The cache file for this bundle as it is on disk now, or None (no such bundle)."""
    try:
        st = bundle.stat()
    except OSError:
        return None
    return cache_dir() / f"{bundle.stem}-{st.st_size}-{st.st_mtime_ns}.bin"


def load(entry: Path) -> Arrays | None:
    """The arrays of a cache entry, or None if it is missing or not whole."""
    return raw_arrays.load(entry, MAGIC)


def save(entry: Path, arrays: Arrays) -> bool:
    """Write every array raw to ``entry`` (atomically); False where it cannot be written."""
    return raw_arrays.save(entry, arrays, MAGIC)
