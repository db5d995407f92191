"""Parsed traces cached as .npz files keyed by the CSV's content hash (parse each trace once).

    key   = sha256(CSV bytes, the column format, the cache layout version)
    file  = $KVPLAN_CACHE_DIR or $XDG_CACHE_HOME/kvplan or ~/.cache/kvplan, /traces/KEY.npz

A changed file has another hash, so a stale entry is never read; an unreadable or corrupt
entry is parsed again; a cache directory that cannot be written is skipped silently (the
trace is then parsed every time, as before). Malformed CSVs raise before anything is cached.
"""

from __future__ import annotations

import hashlib
import io
import itertools
import os
import zipfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from kvplan import input_file
from kvplan.errors import TraceError
from kvplan.raw_arrays import cache_root
from kvplan.specs.requests.trace_csv import Trace, TraceFormat, read_csv_trace

_VERSION = b"kvplan-trace-cache-7-arrival-order"
"""2: a duplicated column in use is refused; 3: a bare number in a datetime column is refused
(numpy read it as a year); 4: rows with 0 output tokens are dropped (and counted); 5: more
hash ids than a row's prompt spans are refused; 6: a row with more cells than the header is
refused; 7: rows out of arrival order are sorted (and counted), not refused."""


def cache_dir() -> Path:
    """Where parsed traces are kept (kvplan's cache root, /traces)."""
    return cache_root() / "traces"


def cached_csv_trace(path: Path, fmt: TraceFormat | None, name: str,
                     known: Sequence[TraceFormat] = ()) -> Trace:
    """read_csv_trace(path, fmt, name, known), from the cache when the file was seen before."""
    try:
        key = _key(path, fmt, known)
    except OSError:
        return read_csv_trace(path, fmt, name, known)  # it reports the error as a TraceError
    entry = cache_dir() / f"{key}.npz"
    trace = _load(entry, path, name)
    if trace is None:
        trace = read_csv_trace(path, fmt, name, known)
        _save(entry, trace)
    return trace


def _key(path: Path, fmt: TraceFormat | None, known: Sequence[TraceFormat]) -> str:
    h = hashlib.sha256(_VERSION)
    h.update(repr((fmt, tuple(known))).encode())
    input_file.hash_into(path, h)
    return h.hexdigest()[:32]


def _load(entry: Path, path: Path, name: str) -> Trace | None:
    try:
        with np.load(io.BytesIO(input_file.read_bytes(entry)), allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile):
        return None
    try:
        return _trace_from(arrays, path, name)
    except (KeyError, ValueError, IndexError, TraceError):
        return None


def _trace_from(a: dict[str, np.ndarray], path: Path, name: str) -> Trace:
    hashes = None
    if "hash_offsets" in a:
        flat, off = a["hash_flat"], a["hash_offsets"].tolist()
        hashes = tuple(_readonly(flat[i:j]) for i, j in itertools.pairwise(off))
    arrival = _readonly(a["arrival_s"]) if "arrival_s" in a else None
    prompt, output = _readonly(a["prompt_tokens"]), _readonly(a["output_tokens"])
    if len(prompt) != len(output) or (hashes is not None and len(hashes) != len(prompt)):
        raise ValueError("cache entry arrays differ in length")
    return Trace(name=name, path=str(path), arrival_s=arrival, prompt_tokens=prompt,
                 output_tokens=output, prefix_hashes=hashes,
                 hash_block_tokens=int(a["hash_block_tokens"]),
                 dropped_rows=int(a["dropped_rows"]), reordered_rows=int(a["reordered_rows"]))


def _save(entry: Path, t: Trace) -> None:
    arrays: dict[str, np.ndarray] = {
        "prompt_tokens": t.prompt_tokens, "output_tokens": t.output_tokens,
        "hash_block_tokens": np.array(t.hash_block_tokens, dtype=np.int64),
        "dropped_rows": np.array(t.dropped_rows, dtype=np.int64),
        "reordered_rows": np.array(t.reordered_rows, dtype=np.int64)}
    if t.arrival_s is not None:
        arrays["arrival_s"] = t.arrival_s
    if t.prefix_hashes is not None:
        lens = [len(h) for h in t.prefix_hashes]
        arrays["hash_offsets"] = np.concatenate(([0], np.cumsum(lens))).astype(np.int64)
        arrays["hash_flat"] = (np.concatenate(t.prefix_hashes).astype(np.int64) if lens
                               else np.zeros(0, dtype=np.int64))
    try:
        entry.parent.mkdir(parents=True, exist_ok=True)
        import tempfile  # a first read of this trace only

        fd, tmp = tempfile.mkstemp(dir=entry.parent, suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            np.savez(f, **arrays)  # type: ignore[arg-type]
        os.replace(tmp, entry)
    except OSError:
        return


def _readonly(a: np.ndarray) -> np.ndarray:
    a.setflags(write=False)
    return a
