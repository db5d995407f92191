"""A model id's config.json in the local Hugging Face cache (offline; the standard layout
``$HF_HUB_CACHE/models--ORG--NAME/snapshots/REV/config.json``)."""

from __future__ import annotations

import os
import re
from pathlib import Path

_REPO_ID = re.compile(r"^[A-Za-z0-9][\w.-]{0,95}/[\w.-]{1,96}$")
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
    """refs/main's snapshot (huggingface_hub's own lookup), else the newest snapshot's file."""
    from huggingface_hub import try_to_load_from_cache

    try:
        found = try_to_load_from_cache(repo_id, "config.json", cache_dir=cache)
    except (ValueError, OSError):  # HFValidationError is a ValueError
        found = None
    if isinstance(found, str):
        return Path(found)
    snapshots = cache / (_PREFIX + repo_id.replace("/", "--")) / "snapshots"
    try:
        files = [p for p in snapshots.glob("*/config.json") if p.is_file()]
    except OSError:
        return None
    return max(files, key=lambda p: p.stat().st_mtime) if files else None
