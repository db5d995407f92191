"""The random dataset's draws (lengths, then arrival times) kept raw, so a run that asks for
the same requests again (a sweep over engine flags, GPUs, a benchmark) reads them back
instead of importing numpy.random and drawing (~7-11 ms of a 10,000-request simulate).

    key   = every argument the draws depend on, numpy's version (its streams may change
            between releases), generators.py's size and mtime (a changed generator misses)
    file  = kvplan's cache root (kvplan.raw_arrays), /random/KEY.bin

What is read is what was drawn, byte for byte; a run with its own ``rng`` (tests, the
Python API) never uses the cache. Runs of more than MAX_REQUESTS are not kept (25 MB at a
million requests), and only the KEEP newest entries stay.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import NamedTuple

import numpy as np

from kvplan import raw_arrays

MAGIC = b"kvplan-random-draws-2\n"
MAX_REQUESTS = 200_000
KEEP = 16


class Draws(NamedTuple):
    """What ``random_workload`` draws from its rng: prompt and output lengths, arrivals."""

    prompts: np.ndarray
    outputs: np.ndarray
    arrivals: np.ndarray


def cache_dir() -> Path:
    return raw_arrays.cache_root() / "random"


def entry_for(params: tuple[object, ...]) -> Path | None:
    """The file for draws of ``params`` (ints and floats, as str writes them), or None
    when too many requests (``params[0]``) to keep."""
    n = params[0]
    if not isinstance(n, int) or n > MAX_REQUESTS:
        return None
    try:
        st = os.stat(Path(__file__).with_name("generators.py"))
    except OSError:
        return None
    text = "_".join(str(p) for p in (*params, np.__version__, st.st_size, st.st_mtime_ns))
    return cache_dir() / (text.replace("-", "m").replace("/", "_") + ".bin")


def load(entry: Path) -> Draws | None:
    got = raw_arrays.load(entry, MAGIC)
    if got is None or set(got) != set(Draws._fields):
        return None
    return Draws(**got)


def save(entry: Path, draws: Draws) -> None:
    """Keep ``draws`` (best effort), then drop all but the KEEP newest entries."""
    if not raw_arrays.save(entry, dict(draws._asdict()), MAGIC):
        return
    try:
        old = sorted(cache_dir().glob("*.bin"), key=lambda p: p.stat().st_mtime_ns)
        for p in old[:-KEEP]:
            p.unlink()
    except OSError:
        pass
