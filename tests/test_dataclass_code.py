"""The console entry's dataclass code cache (cli/fast/dataclass_code.py): the cached code is
exactly what ``exec`` compiles, the classes behave the same, the file round-trips, a bad file
or an unwritable folder is ignored, and a second run compiles nothing."""

from __future__ import annotations

import dataclasses
import marshal
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kvplan.cli.fast import dataclass_code as dc


@pytest.fixture
def cache(monkeypatch: pytest.MonkeyPatch) -> dc.CodeCache:
    """A fresh cache bound as dataclasses' ``exec`` for one test (removed afterwards)."""
    got = dc.CodeCache()
    monkeypatch.setattr(dataclasses, "exec", got.exec, raising=False)
    return got


def _define(tag: str) -> type:
    @dataclasses.dataclass(frozen=True, slots=True)
    class Point:
        x: int
        y: float = 2.5
        names: tuple[str, ...] = dataclasses.field(default_factory=tuple)

    Point.__qualname__ = f"Point{tag}"
    return Point


def test_cached_code_equals_what_dataclasses_compiles(monkeypatch: pytest.MonkeyPatch,
                                                      cache: dc.CodeCache) -> None:
    with_cache = _define("a")
    assert len(cache.codes) >= 5 and cache.new  # __init__, __repr__, __eq__, __hash__, ...
    monkeypatch.delattr(dataclasses, "exec")  # dataclasses compiles them itself again
    plain = _define("a")
    for name in ("__init__", "__repr__", "__eq__", "__hash__", "__setattr__", "__delattr__"):
        assert getattr(with_cache, name).__code__ == getattr(plain, name).__code__, name
    for text, code in cache.codes.items():
        assert code == compile(text, "<string>", "exec", dont_inherit=True)


def test_classes_behave_the_same_and_annotations_are_not_strings(cache: dc.CodeCache) -> None:
    cached = _define("b")
    p = cached(1, names=("a",))
    assert (p.x, p.y, p.names) == (1, 2.5, ("a",))
    assert p == cached(1, 2.5, ("a",)) and hash(p) == hash(cached(1, 2.5, ("a",)))
    assert repr(p).endswith("(x=1, y=2.5, names=('a',))")
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.x = 2  # type: ignore[misc]
    # no future flags from dataclass_code.py leak in: the generated "->_return_type" stays
    # the object (None), not the string '_return_type' that postponed annotations would give
    assert cached.__init__.__annotations__["return"] is None
    texts = set(cache.codes)
    _define("c")  # the same class body again: every method text is a hit
    assert set(cache.codes) == texts


def test_file_round_trips_and_bad_files_are_ignored(tmp_path: Path,
                                                    cache: dc.CodeCache) -> None:
    _define("d")
    path = str(tmp_path / "code" / "x.bin")
    assert dc.save(path, cache)
    stored = dc.load(path)
    assert set(stored.entries()) == {t.encode() for t in cache.codes}
    for text, code in cache.codes.items():
        assert stored.find(text.encode()) == marshal.dumps(code)
    for body in (dc.MAGIC + b"\x00garbage", dc.MAGIC + (3).to_bytes(8, "little") + b"\xff" * 9,
                 dc.MAGIC + (len(listed := marshal.dumps([1]))).to_bytes(8, "little") + listed,
                 b"not ours"):
        Path(path).write_bytes(body)
        assert dc.load(path).entries() == {}
    assert dc.load(str(tmp_path / "missing.bin")).entries() == {}
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    assert not dc.save(str(blocker / "code" / "x.bin"), cache)  # a file where a folder goes


def test_texts_of_one_length_are_told_apart_and_bad_index_entries_skipped() -> None:
    a, b = b"def f(): return 1", b"def g(): return 2"
    stored = dc.unpack(dc.pack({a: b"code-a", b: b"code-b"}))
    assert len(stored.index) == 1  # one length, two entries
    assert (stored.find(a), stored.find(b), stored.find(b"def h(): return 3")) == (
        b"code-a", b"code-b", None)
    broken = dc.Stored({len(a): ("x", 1), 5: (0, -1)}, stored.blob)
    assert broken.find(a) is None and broken.entries() == {}


def test_nothing_new_nothing_written(tmp_path: Path) -> None:
    path = tmp_path / "x.bin"
    assert dc.save(str(path), dc.CodeCache()) and not path.exists()


def test_file_keeps_only_this_runs_entries_past_the_cap(monkeypatch: pytest.MonkeyPatch
                                                        ) -> None:
    stale = marshal.dumps(compile("pass", "<string>", "exec"))
    old = dc.unpack(dc.pack({f"# old {i}".encode(): stale for i in range(3)}))
    cache = dc.CodeCache(old)
    monkeypatch.setattr(dataclasses, "exec", cache.exec, raising=False)
    _define("e")
    assert set(dc.unpack(cache.payload()).entries()) == {
        t.encode() for t in cache.codes} | set(old.entries())  # under the cap: all kept
    monkeypatch.setattr(dc, "MAX_ENTRIES", 2)
    kept = dc.unpack(cache.payload()).entries()
    assert set(kept) == {t.encode() for t in cache.codes} and b"# old 0" not in kept


def test_cache_file_follows_kvplan_cache_dir(monkeypatch: pytest.MonkeyPatch,
                                             tmp_path: Path) -> None:
    monkeypatch.setenv("KVPLAN_CACHE_DIR", str(tmp_path))
    got = Path(dc.cache_file())
    assert got.parent == tmp_path / "code"
    assert got.name == f"dataclass-{sys.implementation.cache_tag}-{sys.hexversion:x}-v3.bin"


RUN = ("import sys, builtins\nsys.argv = ['kvplan', 'kv', 'meta-llama/Llama-3.1-8B', '--json']\n"
       "seen = []\nreal = builtins.compile\n"
       "def spy(src, name, *a, **k):\n    if name == '<string>' and 'def __create_fn__' in str("
       "src):\n        seen.append(1)\n    return real(src, name, *a, **k)\n"
       "builtins.compile = spy\nfrom kvplan.cli import main\ntry:\n    main()\n"
       "except SystemExit:\n    pass\nprint(len(seen), file=sys.stderr)")


def test_second_run_compiles_no_dataclass_method(tmp_path: Path) -> None:
    env = {**os.environ, "KVPLAN_CACHE_DIR": str(tmp_path)}
    outs = [subprocess.run([sys.executable, "-c", RUN], capture_output=True, text=True,
                           env=env, check=True) for _ in range(2)]
    assert int(outs[0].stderr.split()[-1]) > 20  # the first run compiled them (and saved)
    assert int(outs[1].stderr.split()[-1]) == 0
    assert outs[0].stdout == outs[1].stdout
    assert list((tmp_path / "code").iterdir())


def test_entries_are_unmarshalled_when_met_and_a_bad_one_is_compiled_again(
        tmp_path: Path, cache: dc.CodeCache) -> None:
    _define("f")
    path = str(tmp_path / "x.bin")
    assert dc.save(path, cache)
    raw = dc.load(path).entries()
    assert len(raw) == len(cache.codes) >= 5
    text = next(iter(cache.codes))
    again = dc.CodeCache(dc.unpack(dc.pack({**raw, text.encode(): b"\x00broken"})))
    assert again.code(text) == cache.codes[text] and again.new  # compiled afresh
    other = next(t for t in cache.codes if t != text)
    fresh = dc.CodeCache(dc.load(path))
    assert fresh.code(other) == cache.codes[other] and not fresh.new
    assert list(fresh.codes) == [other]  # the others never met: never unmarshalled
