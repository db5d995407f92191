"""A model id's config.json in the local Hugging Face cache (offline; the standard layout
``$HF_HUB_CACHE/models--ORG--NAME/snapshots/REV/config.json``)."""

from __future__ import annotations

import os
import re
from pathlib import Path

from kvplan import input_file

_REPO_ID = re.compile(r"^[A-Za-z0-9][\w.-]{0,95}/[\w.-]{1,96}$")
_REVISION = re.compile(r"^\w[\w.-]{0,254}$")
"""A commit hash or branch name as refs/main holds it (never a path)."""
_PREFIX = "models--"


def hub_cache_dir() -> Path:
    """Where huggingface_hub keeps downloads: HF_HUB_CACHE, else HF_HOME/hub, else
    $XDG_CACHE_HOME/huggingface/hub, else ~/.cache/huggingface/hub (huggingface_hub's order)."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    if os.environ.get("HF_HOME"):
        return Path(os.environ["HF_HOME"]).expanduser() / "hub"
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path("~/.cache").expanduser())
    return Path(xdg) / "huggingface" / "hub"


def _cached_repo_ids(cache: Path) -> list[str]:
    """The model repos present in the cache, as 'org/name' (folder names decoded)."""
    try:
        names = [p.name for p in cache.iterdir() if p.name.startswith(_PREFIX)]
    except OSError:
        return []
    return sorted(n[len(_PREFIX):].replace("--", "/", 1) for n in names)


def _match(name: str, repo_ids: list[str]) -> str | None:
    """The cached repo id a typed name means: exact, case-insensitive, or a unique bare name."""
    key = name.strip().lower()
    exact = [r for r in repo_ids if r.lower() == key]
    if exact:
        return exact[0]
    bare = [r for r in repo_ids if "/" not in key and r.split("/", 1)[-1].lower() == key]
    return bare[0] if len(bare) == 1 else None


def find_cached_config(name: str) -> tuple[str, Path] | None:
    """(repo id, config.json path) for a model downloaded to the local HF cache, else None."""
    if len(name) > 200 or ("/" in name and not _REPO_ID.match(name.strip())):
        return None
    cache = hub_cache_dir()
    repo_id = _match(name, _cached_repo_ids(cache))
    if repo_id is None:
        return None
    path = _snapshot_config(repo_id, cache)
    return None if path is None else (repo_id, path)


def _snapshot_config(repo_id: str, cache: Path) -> Path | None:
    """refs/main's snapshot (huggingface_hub's lookup), else the newest snapshot's file."""
    repo = cache / (_PREFIX + repo_id.replace("/", "--"))
    found = _main_snapshot(repo)
    if found is not None:
        return found
    try:
        files = [p for p in (repo / "snapshots").glob("*/config.json") if p.is_file()]
        return max(files, key=lambda p: p.stat().st_mtime) if files else None
    except OSError:
        return None


def _main_snapshot(repo: Path) -> Path | None:
    """snapshots/REV/config.json for the revision refs/main names. refs/main is read through
    kvplan.input_file (a regular file only; and, being read, never an output), not by
    huggingface_hub, which would block on a FIFO and leave the read unrecorded."""
    try:
        revision = input_file.read_text(repo / "refs" / "main").strip()
    except OSError:
        return None
    if not _REVISION.match(revision):
        return None
    path = repo / "snapshots" / revision / "config.json"
    try:
        return path if path.is_file() else None
    except OSError:
        return None
