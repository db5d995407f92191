"""Names from a form -> specs: model ids, uploaded config.json files, catalog GPUs.

The server never opens a path a client gave: a model is a model id, resolved as the CLI
resolves one (``specs.catalog.load_model_id``: the bundled catalog, the server's local Hugging
Face cache, an Instruct/chat variant of a catalog model), or an upload token; a GPU is a
catalog id or alias.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict

from kvplan import jsonread
from kvplan.errors import InputError, UnknownNameError
from kvplan.specs.hardware import HardwareSpec
from kvplan.specs.model import ModelSpec

UPLOAD_PREFIX = "upload:"


class Uploads:
    """Uploaded configs by token (``upload:<sha256 prefix>``), newest kept, thread-safe."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._specs: OrderedDict[str, ModelSpec] = OrderedDict()
        self._lock = threading.Lock()

    def add(self, raw: bytes, filename: str) -> tuple[str, ModelSpec]:
        """Parse one config.json's bytes; the token names the content, so re-uploads match."""
        from kvplan.specs.hf_config import parse_config

        data = _json_object(raw, filename)
        token = UPLOAD_PREFIX + hashlib.sha256(raw).hexdigest()[:16]
        name = str(data.get("_name_or_path") or filename.removesuffix(".json") or "uploaded")
        spec = parse_config(data, name=name, file=filename)
        with self._lock:
            self._specs[token] = spec
            self._specs.move_to_end(token)
            while len(self._specs) > self.limit:
                self._specs.popitem(last=False)
        return token, spec

    def get(self, token: str) -> ModelSpec:
        with self._lock:
            spec = self._specs.get(token)
        if spec is None:
            raise UnknownNameError(
                f"model {token!r}: no such upload (upload the config.json again)"
            )
        return spec


def _json_object(raw: bytes, filename: str) -> dict[str, object]:
    try:
        data = jsonread.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"{filename}: not a JSON file ({exc}); upload a config.json") from None
    if not isinstance(data, dict):
        raise InputError(f"{filename}: must hold a JSON object (a Hugging Face config.json)")
    return data


def resolve_model(name: str, uploads: Uploads) -> ModelSpec:
    """A model id (the CLI's resolver, ids only) or an upload token; never a file path."""
    from kvplan.specs.catalog import load_model_id, nearest_ids

    name = name.strip()
    if name.startswith(UPLOAD_PREFIX):
        return uploads.get(name)
    try:
        return load_model_id(name)
    except UnknownNameError:
        near = nearest_ids(name)
        hint = f" Nearest catalog ids: {', '.join(near)}." if near else ""
        raise UnknownNameError(f"unknown model {name!r}: not in the catalog or this server's "
                               "Hugging Face cache; choose one from the list or upload a "
                               f"config.json.{hint}") from None


def served_model_id(name: str) -> str | None:
    """The id the serve line names for a form's model (None for an upload: the server has
    no name a client could serve it by)."""
    name = name.strip()
    return None if name.startswith(UPLOAD_PREFIX) else name


def resolve_gpu(name: str) -> HardwareSpec:
    """A catalog GPU id or alias; file names are refused (the server reads no client paths)."""
    from kvplan.specs.hardware import load_gpu

    if any(c in name for c in "/\\") or name.lower().endswith((".json", ".yaml", ".yml")):
        raise UnknownNameError(f"unknown GPU {name!r}: choose one from the list")
    return load_gpu(name)
