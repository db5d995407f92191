"""Atomic file writes: a temporary file in the same folder, flushed, then ``os.replace``, so a
reader (or a crash) sees the old file or the new one, never half of one."""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterable
from pathlib import Path

TMP_PREFIX = ".kvplan-"


def atomic_write(target: str | Path, payload: bytes | Iterable[bytes]) -> None:
    """Write ``payload`` (or its pieces, in order) to ``target`` atomically; OSError (disk
    full...) leaves no temp file."""
    target = Path(target)
    import tempfile  # a write only (shutil, random: not on every run that imports this)

    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=TMP_PREFIX, suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            for piece in [payload] if isinstance(payload, bytes) else payload:
                fh.write(piece)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, _mode_for(target))
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _mode_for(target: Path) -> int:
    """Keep an existing file's permissions; a new file gets 0666 less the umask."""
    try:
        return stat.S_IMODE(target.stat().st_mode)
    except OSError:
        mask = os.umask(0)
        os.umask(mask)
        return 0o666 & ~mask
