"""The raw copy of a GPU's kernel tables (costs/kernels/table_cache.py) holds every array of
the compressed bundle byte for byte; a bad or unwritable cache falls back to the bundle."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from kvplan.costs.kernels import table_cache
from kvplan.costs.kernels import tables as kt


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setenv("KVPLAN_CACHE_DIR", str(tmp_path / "cache"))
    kt._raw.cache_clear()
    kt.table.cache_clear()
    yield tmp_path / "cache" / "silicon"
    kt._raw.cache_clear()
    kt.table.cache_clear()


def _bundle(gpu: str) -> dict[str, np.ndarray]:
    with np.load(kt._data() / f"{gpu}.npz") as npz:
        return {n: npz[n] for n in npz.files}


def _same(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> None:
    assert list(a) == list(b)
    for name in a:
        assert a[name].dtype == b[name].dtype, name
        assert a[name].shape == b[name].shape, name
        assert a[name].tobytes() == b[name].tobytes(), name


@pytest.mark.parametrize("gpu", kt.measured_gpus())
def test_the_raw_copy_is_the_bundle_byte_for_byte(gpu: str, cache: Path) -> None:
    first = kt._raw(gpu)  # a miss: read from the bundle, written raw
    assert first is not None
    entry = table_cache.entry_for(kt._data() / f"{gpu}.npz")
    assert entry is not None and entry.parent == cache and entry.is_file()
    again = table_cache.load(entry)
    assert again is not None
    _same(_bundle(gpu), first)
    _same(_bundle(gpu), again)
    assert all(a.flags.writeable for a in again.values())


def test_tables_from_the_cache_equal_tables_from_the_bundle(cache: Path,
                                                            monkeypatch: pytest.MonkeyPatch
                                                            ) -> None:
    gpu = kt.resolve_gpu("H100")
    warm = kt.table(gpu, "gemm")
    kt.table.cache_clear()
    with monkeypatch.context() as m:
        m.setattr(kt, "_raw", lambda _: None)  # the bundle, family by family
        cold = kt.table(gpu, "gemm")
    kt.table.cache_clear()
    assert warm is not None and cold is not None
    for field in ("keys", "logt", "filled"):
        assert getattr(warm, field).tobytes() == getattr(cold, field).tobytes()
    assert all(x.tobytes() == y.tobytes() for x, y in zip(warm.axes, cold.axes, strict=True))


def test_a_short_or_foreign_entry_is_ignored_and_rewritten(cache: Path) -> None:
    gpu = kt.resolve_gpu("H100")
    assert kt._raw(gpu) is not None
    entry = table_cache.entry_for(kt._data() / f"{gpu}.npz")
    assert entry is not None
    whole = entry.read_bytes()
    for bad in (whole[:len(whole) // 2], b"not a table", whole[:30]):
        entry.write_bytes(bad)
        assert table_cache.load(entry) is None
        kt._raw.cache_clear()
        _same(_bundle(gpu), kt._raw(gpu) or {})
        assert entry.read_bytes() == whole


def test_no_cache_where_none_can_be_written(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    monkeypatch.setenv("KVPLAN_CACHE_DIR", str(blocker))  # .../a-file/silicon: not a folder
    kt._raw.cache_clear()
    kt.table.cache_clear()
    try:
        gpu = kt.resolve_gpu("H100")
        assert kt._raw(gpu) is None
        assert kt.table(gpu, "gemm") is not None  # read from the bundle as before
    finally:
        kt._raw.cache_clear()
        kt.table.cache_clear()


def test_a_changed_bundle_is_another_entry(tmp_path: Path) -> None:
    bundle = tmp_path / "X.npz"
    bundle.write_bytes(b"1")
    first = table_cache.entry_for(bundle)
    os.utime(bundle, ns=(1, 10**18))
    assert table_cache.entry_for(bundle) != first
    assert table_cache.entry_for(tmp_path / "missing.npz") is None


def test_a_warm_run_inflates_no_bundle(tmp_path: Path) -> None:
    """Second simulate on H100: the tables come from the raw copy (zipfile is not imported)."""
    env = {**os.environ, "KVPLAN_CACHE_DIR": str(tmp_path / "cache")}
    code = ("import sys; sys.argv = ['kvplan', 'simulate', 'meta-llama/Llama-3.1-8B', "
            "'--num-prompts', '20', '--json']\nfrom kvplan.cli import main\nmain()\n"
            "print('zipfile' in sys.modules, file=sys.stderr)")
    runs = [subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           timeout=300, check=True, env=env) for _ in range(2)]
    assert [r.stderr.strip().splitlines()[-1] for r in runs] == ["True", "False"]
    assert runs[0].stdout == runs[1].stdout
