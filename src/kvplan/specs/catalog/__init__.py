"""The bundled model catalog: config.json snapshots addressed by Hugging Face id."""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from kvplan.errors import UnknownNameError
from kvplan.notes import note  # for the user: the CLI prints them on stderr as "note: ..."
from kvplan.specs.catalog.derived import find_derived, with_quantization
from kvplan.specs.catalog.ids import lookup
from kvplan.specs.hf_config import load_config_file, parse_config
from kvplan.specs.model import ModelSpec

VARIANT_WORDS = frozenset({"instruct", "chat", "it", "hf", "base", "thinking", "meta"})
"""Words in a repo name that mark a fine-tuned (Instruct/chat/it) or base variant, or the old
``Meta-`` prefix: post-training keeps the architecture, so variants share one config.json's
shape. Anything else (sizes, versions, dates, -FP8/-AWQ quantized weights) must match exactly."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CatalogEntry:
    """One bundled config: its Hugging Face id and the packaged file."""

    hf_id: str
    path: Path


def _models_dir() -> Path:
    # what importlib.resources.files gives for a package on disk, without importing it
    # (tempfile, shutil, zipfile: ~5 ms of a `kvplan kv` run)
    return Path(__file__).parent / "models"


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
    return lookup(name, catalog())


def variant_key(hf_id: str) -> str:
    """'meta-llama/Meta-Llama-3.1-8B-Instruct' -> 'meta-llama/llama-3.1-8b': variant words out."""
    org, _, name = hf_id.strip().lower().replace("--", "/", 1).rpartition("/")
    words = [w for w in re.split(r"[-_]", name) if w and w not in VARIANT_WORDS]
    return f"{org}/{'-'.join(words)}" if org else "-".join(words)


def find_variant(name: str) -> CatalogEntry | None:
    """The catalog model that ``name`` is an Instruct/chat/base variant of (same org), if one."""
    key = variant_key(name)
    entries = catalog().values()
    if "/" in key:
        hits = [e for e in entries if variant_key(e.hf_id) == key]
    else:
        hits = [e for e in entries if variant_key(e.hf_id).split("/", 1)[-1] == key]
    return hits[0] if len(hits) == 1 else None


def nearest_ids(name: str, n: int = 3) -> list[str]:
    """Catalog ids closest to a mistyped name (whole id or the part after the org)."""
    ids = [e.hf_id for e in catalog().values()]
    by_key = {i.lower(): i for i in ids} | {i.split("/", 1)[-1].lower(): i for i in ids}
    import difflib

    close = difflib.get_close_matches(name.strip().lower()[:200], list(by_key), n=n, cutoff=0.5)
    return list(dict.fromkeys(by_key[c] for c in close))


def _expand(path: Path) -> Path:
    """``~/x`` -> home; ``~user`` with no such user (``~0``) stays as typed (then an id)."""
    try:
        return path.expanduser()
    except RuntimeError:  # "Could not determine home directory"
        return path


def load_model(name_or_path: str | os.PathLike[str]) -> ModelSpec:
    """A catalog id (case-insensitive) or a path to a config.json (or its folder), as a str
    or a path object (``pathlib.Path``) -> ModelSpec."""
    name_or_path = os.fspath(name_or_path)
    if len(name_or_path) > MAX_NAME_CHARS:
        raise UnknownNameError(
            f"model name of {len(name_or_path)} characters: model ids and config paths are "
            f"at most {MAX_NAME_CHARS} characters; see 'kvplan models'"
        )
    if not name_or_path:  # "$UNSET": Path('') is '.', which read as ./config.json
        raise UnknownNameError("the model is empty: give a model id from 'kvplan models' or "
                               "a config.json path")
    path = _path_route(name_or_path)
    if path is None:
        return load_model_id(name_or_path)
    if not path.exists():
        raise UnknownNameError(
            f"no such config file: {path}; pass a config.json path "
            "or a model id from 'kvplan models'"
        )
    return parse_config(load_config_file(path), name=_shown_name(path), file=str(path))


def _shown_name(path: Path) -> str:
    """A model folder's config.json is named by its folder (vLLM names a local model by its
    path), any other file by its stem."""
    if path.name == "config.json":
        with contextlib.suppress(OSError, RuntimeError):
            folder = path.resolve().parent.name
            if folder:
                return folder
    return path.stem


def served_name(name_or_path: str) -> str:
    """What ``vllm serve`` is given for the model the user named: the id as typed (an
    Instruct variant stays one, though its architecture came from the base model's config),
    or for a config.json path the folder holding it (vLLM serves a local model folder)."""
    path = _path_route(name_or_path)
    if path is None:
        return name_or_path.strip()
    return str(path.parent if path.name == "config.json" or path.suffix == ".json" else path)


def config_path(name_or_path: str) -> Path | None:
    """The config.json file ``load_model(name_or_path)`` reads (a path, a folder's config.json,
    the bundled catalog's or the Hugging Face cache's file for an id), or None when the name
    resolves to nothing; outputs are checked against it (never overwrite an input)."""
    if len(name_or_path) > MAX_NAME_CHARS:
        return None
    path = _path_route(name_or_path)
    if path is not None:
        return path
    source = _id_source(name_or_path)
    return None if source is None else source[1]


def _path_route(name_or_path: str) -> Path | None:
    """The config file when the argument is a path (a folder means its config.json; a name
    ending in .json or naming something that exists), else None: a model id."""
    path = _expand(Path(name_or_path))
    if _probe(path.is_dir):
        path = path / "config.json"
    return path if path.suffix == ".json" or _probe(path.exists) else None


def _id_source(name: str) -> tuple[str, Path, str] | None:
    """(model id, config.json, where: catalog, cache, derived or variant) for a model id,
    looked up in order: the bundled catalog; the local Hugging Face cache; a published
    checkpoint of a catalog model's architecture (``derived``); a catalog model it is an
    Instruct/chat variant of. None when none has it."""
    entry = find_entry(name)
    if entry is not None:
        return entry.hf_id, entry.path, "catalog"
    from kvplan.specs.hf_cache import find_cached_config

    cached = find_cached_config(name)
    if cached is not None:
        return cached[0], cached[1], "cache"
    derived = find_derived(name)
    if derived is not None:
        base = catalog()[derived.base.lower()]
        return base.hf_id, base.path, "derived"
    variant = find_variant(name)
    return None if variant is None else (variant.hf_id, variant.path, "variant")


def load_model_id(name: str) -> ModelSpec:
    """A model id (see ``_id_source`` for the order it is looked up in); else an error naming
    the nearest ids."""
    source = _id_source(name)
    if source is not None:
        hf_id, path, where = source
        if where == "cache":
            note("using %s's config.json from the local Hugging Face cache (%s)", hf_id, path)
            return parse_config(load_config_file(path), name=hf_id, file=str(path))
        if where == "derived":
            return _load_derived(name)
        if where == "variant":
            note("using the config of %s for %s (Instruct/chat variants share the base "
              "model's architecture)", hf_id, name.strip())
        return _load_entry(hf_id)
    near = nearest_ids(name)
    hint = f" Nearest catalog ids: {', '.join(near)}." if near else ""
    raise UnknownNameError(
        f"unknown model {name!r}: not in the bundled catalog (see 'kvplan models'), not in the "
        f"local Hugging Face cache, and not a path to a config.json.{hint}"
    )


MAX_NAME_CHARS = 1024
"""Longest model argument accepted (Hugging Face ids are at most 96 characters; paths 4096
bytes, of which no component may exceed 255)."""


def _probe(check: Callable[[], bool]) -> bool:
    """A path test that treats OSError (file name too long, permission) as 'no such path'."""
    try:
        return check()
    except OSError:
        return False


def _load_derived(name: str) -> ModelSpec:
    """A published checkpoint of a catalog architecture (``derived``), named as published (an
    FP8 release is not its base model), with a note saying whose config it takes."""
    derived = find_derived(name)
    assert derived is not None  # _id_source found it
    entry = catalog()[derived.base.lower()]
    note("using the config of %s for %s: %s", entry.hf_id, derived.id, derived.why)
    raw = with_quantization(load_config_file(entry.path), derived)
    return parse_config(raw, name=derived.id, file=entry.path.name)


@cache
def _load_entry(hf_id: str) -> ModelSpec:
    entry = catalog()[hf_id.lower()]
    return parse_config(load_config_file(entry.path), name=entry.hf_id, file=entry.path.name)
