"""Loading the bundled silicon tables (lazily, cached per GPU) and their provenance."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from kvplan.costs.kernels.result import TableSource
from kvplan.errors import UnknownNameError

IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True, slots=True, kw_only=True)
class Table:
    """One op family on one GPU: slices (one per key row) of dense log-seconds grids."""

    gpu: str
    family: str
    key_names: tuple[str, ...]
    keys: IntArray
    """(slices, len(key_names)); string keys coded by ``vocab``."""
    axes: tuple[npt.NDArray[np.float64], ...]
    """Sorted sizes along each grid axis (natural units: tokens, elements, bytes)."""
    log_axes: tuple[npt.NDArray[np.float64], ...]
    logt: npt.NDArray[np.float32]
    """(slices, *axis lengths): log(seconds)."""
    filled: npt.NDArray[np.bool_]
    """Cells no row measured (extrapolated when the bundle was derived)."""
    exponents: tuple[float, ...]
    """Time ~ size**e past the last node of each axis."""
    vocab: dict[str, list[str]]
    meta: dict[str, Any]
    """This table's manifest entry (engine, version, kernels, counts)."""

    def source(self, kernels: tuple[str, ...] = ()) -> TableSource:
        return TableSource(
            gpu=self.gpu, family=self.family, engine=str(self.meta["engine"]),
            version=str(self.meta["version"]), kernels=kernels, file=str(self.meta["file"]),
        )

    def column(self, name: str) -> IntArray:
        """One key column over all slices."""
        return self.keys[:, self.key_names.index(name)]

    def code(self, name: str, word: str) -> int:
        """A string key's code, or -1 when the vocabulary lacks it."""
        words = self.vocab.get(name, [])
        return words.index(word) if word in words else -1

    def word(self, name: str, code: int) -> str:
        return self.vocab[name][code]


def _data() -> Path:
    # what importlib.resources.files gives for the package on disk, without importing it
    # (tempfile, shutil, random: ~3 ms of a simulate run), as specs/catalog does
    return Path(__file__).parent.parent.parent / "data" / "silicon"


@cache
def manifest() -> dict[str, Any]:
    """The bundle's manifest.json: source package, per-GPU tables and what was done to them."""
    text = (_data() / "manifest.json").read_text(encoding="utf-8")
    loaded: dict[str, Any] = json.loads(text)
    return loaded


def measured_gpus() -> tuple[str, ...]:
    """kvplan ids of the GPUs with bundled tables."""
    return tuple(manifest()["gpus"])


def resolve_gpu(gpu: str) -> str:
    """A bundled GPU id from an id or alias (case-insensitive), or the measured twin a catalog
    GPU names in ``kernels_of`` (H800 -> H100 SXM); UnknownNameError otherwise."""
    by_lower = {g.lower(): g for g in measured_gpus()}
    if gpu.lower() in by_lower:
        return by_lower[gpu.lower()]
    from kvplan.specs.hardware import load_gpu

    try:
        spec = load_gpu(gpu)
        names = (spec.id, spec.kernels_of)
    except UnknownNameError:
        names = (gpu, "")
    for name in names:
        if name and name.lower() in by_lower:
            return by_lower[name.lower()]
    raise UnknownNameError(
        f"no measured kernel tables for GPU {gpu!r}: measured are {', '.join(measured_gpus())}; "
        "use kvplan.costs.kernels.nearest_measured_gpu for the others"
    )


def has_tables(gpu: str) -> bool:
    """Whether ``gpu`` (an id or alias) is priced from measured tables, its own or its twin's."""
    try:
        resolve_gpu(gpu)
    except UnknownNameError:
        return False
    return True


def _arrays(gpu: str, family: str) -> dict[str, npt.NDArray[Any]]:
    """One family's arrays from the GPU's bundle: from its raw copy in the cache where one is
    kept (table_cache.py; the first run writes it), else from the compressed bundle, which
    a run reads only for the few families it prices (about 12 of 38 arrays for a dense model;
    ``table`` caches the result)."""
    prefix = f"{family}."
    raw = _raw(gpu)
    if raw is not None:
        return {name: a for name, a in raw.items() if name.startswith(prefix)}
    with (_data() / f"{gpu}.npz").open("rb") as handle, np.load(handle) as npz:
        return {name: npz[name] for name in npz.files if name.startswith(prefix)}


@cache
def _raw(gpu: str) -> dict[str, npt.NDArray[Any]] | None:
    """Every array of the GPU's bundle from the raw cache, written there on a miss; None where
    no cache can be kept (the bundle is then read family by family)."""
    from kvplan.costs.kernels import table_cache

    entry = table_cache.entry_for(_data() / f"{gpu}.npz")
    if entry is None:
        return None
    got = table_cache.load(entry)
    if got is not None:
        return got
    with (_data() / f"{gpu}.npz").open("rb") as handle, np.load(handle) as npz:
        arrays = {name: npz[name] for name in npz.files}
    return arrays if table_cache.save(entry, arrays) else None


@cache
def table(gpu: str, family: str) -> Table | None:
    """One family's table on one bundled GPU (id as ``resolve_gpu`` returns), or None."""
    entry = manifest()["gpus"][gpu]["tables"].get(family, {})
    if entry.get("absent", True) and "engine" not in entry:
        return None
    spec = manifest()["families"][family]
    arrays = _arrays(gpu, family)
    axes = tuple(arrays[f"{family}.axis{i}"] for i in range(len(spec["axes"])))
    return Table(
        gpu=gpu, family=family, key_names=tuple(spec["keys"]), keys=arrays[f"{family}.keys"],
        axes=axes, log_axes=tuple(np.log(a) for a in axes), logt=arrays[f"{family}.logt"],
        filled=arrays[f"{family}.filled"], exponents=tuple(spec["exponents"]),
        vocab=spec["vocab"], meta=entry,
    )


def require(gpu: str, family: str) -> Table:
    """``table`` for an id or alias, UnknownNameError naming what is measured when absent."""
    found = table(resolve_gpu(gpu), family)
    if found is None:
        have = [f for f, e in manifest()["gpus"][resolve_gpu(gpu)]["tables"].items()
                if "engine" in e]
        raise UnknownNameError(
            f"{resolve_gpu(gpu)} has no measured {family} table (it has: {', '.join(have)})"
        )
    return found


def peaks(gpu: str) -> dict[str, Any]:
    """Datasheet figures the bundle's floors used (FLOP/s per rate, bytes/s)."""
    found: dict[str, Any] = manifest()["gpus"][resolve_gpu(gpu)]["peaks"]
    return found


def capped_at(gpu: str) -> str | None:
    """The measured GPU whose cells the tables pricing ``gpu`` (an id or alias) were capped at
    when the bundle was derived (H200 at H100, GB200 at B200: the same die, never slower)."""
    found = manifest()["gpus"][resolve_gpu(gpu)].get("capped_at")
    return str(found) if found else None
