"""Output files: checked before any work, never one of the inputs, written atomically.

Rules (README "Output files"): an output path must name a regular file (or a new one) in an
existing folder we can write; it may not be, or resolve to (symlink, hard link), any file the
command reads: the files it names, the file a model id resolves to (the bundled catalog or the
Hugging Face cache), any file the process has read so far (``kvplan.input_file`` records each
one; checked again just before writing, for those read during the work), or a file inside
kvplan's own package (its bundled data). A symlink is followed to the file it names, and a
dangling one is refused. An existing output is replaced (as ``vllm bench serve
--save-result`` does) and the notice says ``wrote FILE (replaced)``; a read-only one is refused
(the rename would bypass its permission). Bytes go to a temporary file in the same folder, then
``os.replace``, so an interrupted or failed write never leaves a half-written file.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from kvplan import input_file
from kvplan.atomic_file import TMP_PREFIX, atomic_write
from kvplan.errors import InputError

NAME_MAX_FALLBACK = 255
"""Longest file name (bytes) on Linux/macOS file systems, when pathconf cannot say."""


@dataclass(frozen=True, slots=True, kw_only=True)
class OutputTarget:
    """An output path that passed every check: where the bytes will land."""

    flag: str
    path: Path
    """As the user gave it (what notices print)."""
    target: Path
    """Symlinks resolved: the file that is written."""

    @property
    def exists(self) -> bool:
        return self.target.exists()


def check_output(path: str | Path, flag: str, inputs: Iterable[str | Path | None] = ()) -> (
        OutputTarget):
    """Check an output path before work starts; InputError names the flag, path and problem."""
    p = Path(path)
    where = f"{flag} {p}"
    if not str(path) or p.name in ("", ".", ".."):
        raise InputError(f"{where}: give a file name")
    if str(path).endswith(("/", os.sep)):  # Path() drops it; POSIX reads it as a folder
        raise InputError(f"{where}/ ends in '/', which names a folder; give a file name")
    _check_name_length(p, where)
    target = _follow(p, where)
    _check_target(target, where)
    _check_not_input(target, where, inputs)
    _probe_folder(target.parent, where)
    return OutputTarget(flag=flag, path=p, target=target)


def _check_name_length(p: Path, where: str) -> None:
    limit = _name_max(p.parent)
    for part in p.parts:
        if len(os.fsencode(part)) > limit:
            raise InputError(
                f"{where}: a name in the path is {len(os.fsencode(part))} bytes; the file "
                f"system allows {limit}; choose a shorter name"
            )


def _name_max(folder: Path) -> int:
    try:
        return int(os.pathconf(folder if str(folder) else ".", "PC_NAME_MAX"))
    except (OSError, ValueError):
        return NAME_MAX_FALLBACK


def _follow(p: Path, where: str) -> Path:
    """The file a symlink chain names; a dangling link is refused (writing through it would
    create a file somewhere the user did not name)."""
    try:
        if not p.is_symlink():
            return p
        real = Path(os.path.realpath(p))
    except OSError as exc:
        raise InputError(f"{where}: {_why(exc)}") from None
    if not real.exists():
        raise InputError(
            f"{where} is a symlink to {real}, which does not exist; remove the link or "
            "give another file name"
        )
    return real


def _check_target(target: Path, where: str) -> None:
    _check_folder(target.parent, where)
    try:
        st = target.stat()
    except FileNotFoundError:
        st = None
    except OSError as exc:
        raise InputError(f"{where}: {_why(exc)}") from None
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise InputError(f"{where} is a directory; give a file name")
    if st is not None and not stat.S_ISREG(st.st_mode):
        raise InputError(
            f"{where} is not a regular file (a device, pipe or socket); give a file path"
        )
    if st is not None and not (st.st_mode & 0o222 and os.access(target, os.W_OK)):
        raise InputError(
            f"{where} is read-only (mode {stat.S_IMODE(st.st_mode):04o}); make it writable "
            "(chmod u+w) or give another file name"
        )


def _check_folder(folder: Path, where: str) -> None:
    shown = folder if str(folder) != "." else Path.cwd()
    try:
        st = folder.stat()
    except FileNotFoundError:
        raise InputError(f"{where}: folder {shown} does not exist; create it first") from None
    except NotADirectoryError:
        raise InputError(f"{where}: {_first_file(folder)} is a file, not a folder") from None
    except OSError as exc:
        raise InputError(f"{where}: {_why(exc)}") from None
    if not stat.S_ISDIR(st.st_mode):
        raise InputError(f"{where}: {folder} is a file, not a folder")


def _first_file(folder: Path) -> Path:
    """The first component of ``folder`` that exists and is not a folder."""
    for parent in (*reversed(folder.parents), folder):
        if parent.exists() and not parent.is_dir():
            return parent
    return folder


def _check_not_input(target: Path, where: str, inputs: Iterable[str | Path | None]) -> None:
    _check_not_read(target, where)
    if Path(os.path.realpath(target)).is_relative_to(input_file.package_dir()):
        raise InputError(f"{where} is inside kvplan's own package ({input_file.package_dir()}), "
                         "whose files are its bundled data; choose a file elsewhere")
    for item in inputs:
        if item is None or not target.exists():
            continue
        with contextlib.suppress(OSError):
            if Path(item).exists() and os.path.samefile(target, item):
                raise InputError(
                    f"{where} is the input {item}; writing there would destroy it; "
                    "choose another file"
                )


def _check_not_read(target: Path, where: str) -> None:
    if input_file.was_read(target):
        raise InputError(f"{where} is {os.path.realpath(target)}, a file this command reads; "
                         "writing there would destroy it; choose another file")


def _probe_folder(folder: Path, where: str) -> None:
    """Create and remove a temporary file: proves the folder is writable before the work."""
    try:
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=TMP_PREFIX, suffix=".tmp")
    except OSError as exc:
        raise InputError(f"{where}: cannot write in folder {folder}: {_why(exc)}") from None
    os.close(fd)
    os.unlink(tmp)


def write_output(out: OutputTarget, data: bytes | str | Iterable[str]) -> str:
    """Write atomically (temporary file in the same folder, then rename); returns the notice
    ``wrote FILE`` or ``wrote FILE (replaced)``. OSError -> InputError with one line. Text
    given in pieces is written piece by piece, never joined."""
    payload: bytes | Iterable[bytes] = (
        data.encode("utf-8") if isinstance(data, str) else data if isinstance(data, bytes)
        else (piece.encode("utf-8") for piece in data))
    _check_not_read(out.target, f"{out.flag} {out.path}")  # read during the work
    replaced = out.exists
    try:
        atomic_write(out.target, payload)
    except OSError as exc:
        raise InputError(f"{out.flag} {out.path}: cannot write: {_why(exc)}") from None
    via = f" -> {out.target}" if out.target != out.path else ""
    return f"wrote {out.path}{via}{' (replaced)' if replaced else ''}"


def _why(exc: OSError) -> str:
    if exc.errno == errno.ENAMETOOLONG:
        return "file name too long; choose a shorter name"
    if exc.errno == errno.ENOSPC:
        return "no space left on the device"
    return exc.strerror or exc.__class__.__name__


def input_files(*names: str | Path | None) -> tuple[Path, ...]:
    """The files among a command's inputs, for ``check_output``'s never-overwrite-an-input
    rule: a folder means its config.json, and a model id the config.json it resolves to (the
    bundled catalog's, or the Hugging Face cache's snapshot file, itself a link to a blob)."""
    from kvplan.specs.catalog import config_path

    found: list[Path] = []
    for name in names:
        if not name:
            continue
        with contextlib.suppress(OSError, ValueError, RuntimeError):  # RuntimeError: '~0'
            p = Path(name).expanduser()
            if p.is_dir():
                p = p / "config.json"
            resolved = p if p.is_file() else config_path(str(name))
            if resolved is not None and resolved.is_file():
                found.append(resolved)
    return tuple(found)
