"""The bundled model catalog: config.json snapshots addressed by Hugging Face id."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path

from kvplan.errors import UnknownNameError
from kvplan.specs.hf_config import load_config_file, parse_config
from kvplan.specs.model import ModelSpec


@dataclass(frozen=True, slots=True, kw_only=True)
class CatalogEntry:
    """One bundled config: its Hugging Face id and the packaged file."""

    hf_id: str
    path: Path


def _models_dir() -> Path:
    return Path(str(resources.files("kvplan.specs.catalog") / "models"))


@cache
def catalog() -> dict[str, CatalogEntry]:
    """Lower-cased Hugging Face id -> entry, for every bundled config.json."""
    entries = {}
    for path in sorted(_models_dir().glob("*.json")):
        hf_id = path.stem.replace("--", "/", 1)
        entries[hf_id.lower()] = CatalogEntry(hf_id=hf_id, path=path)
    return entries


def find_entry(name: str) -> CatalogEntry | None:
    """Look a name up case-insensitively: 'org/name', 'org--name' or just 'name'."""
    key = name.strip().lower().replace("--", "/", 1)
    entries = catalog()
    if key in entries:
        return entries[key]
    matches = [e for k, e in entries.items() if k.split("/", 1)[-1] == key]
    return matches[0] if len(matches) == 1 else None


def load_model(name_or_path: str) -> ModelSpec:
    """A catalog id (case-insensitive) or a path to a config.json (or its folder) -> ModelSpec."""
    if len(name_or_path) > MAX_NAME_CHARS:
        raise UnknownNameError(
            f"model name of {len(name_or_path)} characters: model ids and config paths are "
            f"at most {MAX_NAME_CHARS} characters; see 'kvplan models'"
        )
    path = Path(name_or_path).expanduser()
    if _probe(path.is_dir):
        path = path / "config.json"
    if path.suffix == ".json" or _probe(path.exists):
        if not path.exists():
            raise UnknownNameError(
                f"no such config file: {path}; pass a config.json path "
                "or a model id from 'kvplan models'"
            )
        return parse_config(load_config_file(path), name=path.stem, file=str(path))
    entry = find_entry(name_or_path)
    if entry is None:
        raise UnknownNameError(
            f"unknown model {name_or_path!r}: not in the bundled catalog (see 'kvplan models') "
            "and not a path to a config.json"
        )
    return _load_entry(entry.hf_id)


MAX_NAME_CHARS = 1024
"""Longest model argument accepted (Hugging Face ids are at most 96 characters; paths 4096
bytes, of which no component may exceed 255)."""


def _probe(check: Callable[[], bool]) -> bool:
    """A path test that treats OSError (file name too long, permission) as 'no such path'."""
    try:
        return check()
    except OSError:
        return False


@cache
def _load_entry(hf_id: str) -> ModelSpec:
    entry = catalog()[hf_id.lower()]
    return parse_config(load_config_file(entry.path), name=entry.hf_id, file=entry.path.name)
