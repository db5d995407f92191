"""The random dataset's draws from the cache (specs/requests/random_cache.py): the same bytes
as drawing them, keyed by everything they depend on, pruned, and never trusted blindly."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from kvplan.specs.requests import random_cache
from kvplan.specs.requests.workload import WorkloadArgs, build_workload

ARGS = dict(dataset="random", num_prompts=500, random_input_len=512, random_output_len=128,
            random_range_ratio=0.5, request_rate=20.0, seed=0)


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("KVPLAN_CACHE_DIR", str(tmp_path))
    return tmp_path / "random"


def _drawn(args: WorkloadArgs) -> object:
    """The draws without the cache: lengths from default_rng(seed), arrivals from vLLM's
    legacy stream (np.random.seed(seed)), as build_workload draws them."""
    from kvplan.specs.requests.generators import random_workload, vllm_arrival_rng

    return random_workload(
        num_prompts=args.num_prompts, input_len=args.random_input_len,
        output_len=args.random_output_len, range_ratio=args.random_range_ratio,
        prefix_len=args.random_prefix_len, request_rate=args.request_rate,
        burstiness=args.burstiness, rng=np.random.default_rng(args.seed),
        arrival_rng=vllm_arrival_rng(args.seed))


def _same(a: object, b: object) -> None:
    for f in ("arrival_s", "prompt_tokens", "output_tokens"):
        x, y = getattr(a, f), getattr(b, f)
        assert x.dtype == y.dtype and x.tobytes() == y.tobytes()


def test_a_second_run_reads_the_draws_back_byte_for_byte(
        cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    args = WorkloadArgs(**ARGS)
    build_workload(args, rng=np.random.default_rng(0))  # an own rng: never cached
    assert not cache.exists()
    drawn = _drawn(args)
    first = build_workload(args)
    assert len(list(cache.glob("*.bin"))) == 1

    def no_draws(*a: object) -> None:
        raise AssertionError("drew again")

    monkeypatch.setattr(np.random, "default_rng", no_draws)
    monkeypatch.setattr(np.random, "RandomState", no_draws)
    again = build_workload(args)
    _same(drawn, first)
    _same(drawn, again)
    assert again.name == "random" and again.prefix_hashes is None


@pytest.mark.parametrize("change", [dict(seed=1), dict(request_rate=10.0),
                                    dict(random_range_ratio=0.25), dict(burstiness=0.5),
                                    dict(random_prefix_len=32), dict(num_prompts=499)])
def test_every_argument_of_the_draws_is_in_the_key(cache: Path, change: dict) -> None:
    base = build_workload(WorkloadArgs(**ARGS))
    other_args = WorkloadArgs(**{**ARGS, **change})
    other = build_workload(other_args)
    assert len(list(cache.glob("*.bin"))) == 2
    _same(other, _drawn(other_args))
    assert base.arrival_s.tobytes() != other.arrival_s.tobytes() or \
        base.prompt_tokens.tobytes() != other.prompt_tokens.tobytes()


def test_a_damaged_entry_is_drawn_again(cache: Path) -> None:
    args = WorkloadArgs(**ARGS)
    good = build_workload(args)
    (entry,) = cache.glob("*.bin")
    entry.write_bytes(entry.read_bytes()[:100])
    _same(good, build_workload(args))
    assert entry.stat().st_size > 100  # rewritten whole


def test_only_the_newest_entries_stay_and_big_runs_are_not_kept(cache: Path) -> None:
    for seed in range(random_cache.KEEP + 4):
        build_workload(WorkloadArgs(**{**ARGS, "num_prompts": 20, "seed": seed}))
    assert len(list(cache.glob("*.bin"))) == random_cache.KEEP
    assert random_cache.entry_for((random_cache.MAX_REQUESTS + 1, 1, 1, 0.0, 0, 1.0, 1.0, 0)) \
        is None
