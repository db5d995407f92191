"""The lesson's claim-schedule numbers, chunked prefill, paged rounding, windows and state."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kvplan import batch_footprint, kv_spec, load_model, request_timeline
from kvplan.errors import InputError
from kvplan.units import GiB


@pytest.fixture(scope="module")
def llama70_kv():  # type: ignore[no-untyped-def]
    return kv_spec(load_model("meta-llama/Llama-2-70b-hf"), "float16")


def test_lesson_prefill_and_decode(llama70_kv) -> None:  # type: ignore[no-untyped-def]
    tl = request_timeline(llama70_kv, 2048, 128)
    assert tl.prefill_bytes == 327_680 * 2048 == 671_088_640
    assert tl.decode_bytes == 327_680 * 128 == 41_943_040
    assert tl.final_bytes == 327_680 * (2048 + 128)
    assert tl.prefill_share == pytest.approx(2048 / 2176)
    assert round(tl.prefill_share, 3) == 0.941
    assert tl.prefill_steps == 1 and len(tl.steps) == 1 + 128


def test_lesson_batch(llama70_kv) -> None:  # type: ignore[no-untyped-def]
    fp8 = kv_spec(load_model("meta-llama/Llama-2-70b-hf"), "fp8")
    assert batch_footprint(fp8, 64, 4096).total_bytes == 40 * GiB
    assert batch_footprint(llama70_kv, 64, 4096).total_bytes == 80 * GiB


def test_chunked_prefill_staircase(llama70_kv) -> None:  # type: ignore[no-untyped-def]
    tl = request_timeline(llama70_kv, 2048, 2, chunk_tokens=768)
    assert [s.tokens_in_cache for s in tl.steps] == [768, 1536, 2048, 2049, 2050]
    assert [s.phase for s in tl.steps] == ["prefill"] * 3 + ["decode"] * 2
    assert tl.steps[0].claimed_bytes == 768 * 327_680
    assert tl.steps[2].claimed_bytes == 512 * 327_680
    assert tl.prefill_bytes == 671_088_640  # same total, spread over 3 steps


def test_paged_blocks_round_up(llama70_kv) -> None:  # type: ignore[no-untyped-def]
    tl = request_timeline(llama70_kv, 100, 1, block_size=16)
    first = tl.steps[0]
    assert first.allocated_blocks == 7  # cdiv(100, 16)
    assert first.allocated_bytes == 7 * 16 * 327_680
    assert first.logical_bytes == 100 * 327_680


def test_sliding_window_stops_growing() -> None:
    kv = kv_spec(load_model("mistralai/Mistral-7B-v0.1"))  # window 4096 on every layer
    tl = request_timeline(kv, 4095, 3)
    assert [s.claimed_bytes for s in tl.steps] == [4095 * 131_072, 131_072, 0, 0]
    assert tl.final_bytes == 4096 * 131_072


def test_sliding_blocks_free_outside_window() -> None:
    kv = kv_spec(load_model("mistralai/Mistral-7B-v0.1"))
    # 10000 tokens, window 4096: tokens 5904..9999 needed -> blocks 369..624 -> 256 blocks
    assert kv.blocks_for(10_000, 16) == 625 - 5904 // 16


def test_state_claimed_once_at_admission() -> None:
    kv = kv_spec(load_model("Qwen/Qwen3-Next-80B-A3B-Thinking"))
    tl = request_timeline(kv, 1000, 2)
    state = kv.state_bytes_per_request
    assert tl.steps[0].claimed_bytes == state + 1000 * 24_576
    assert tl.steps[1].claimed_bytes == 24_576


@pytest.mark.parametrize(
    ("p", "o", "c"), [(0, 10, None), (-5, 10, None), (10, -1, None), (10, 10, 0)]
)
def test_bad_lengths(llama70_kv, p: int, o: int, c: int | None) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(InputError):
        request_timeline(llama70_kv, p, o, chunk_tokens=c)


@given(
    p=st.integers(1, 5000),
    o=st.integers(1, 300),  # vLLM: max_tokens >= 1
    c=st.one_of(st.none(), st.integers(1, 4096)),
    b=st.sampled_from([1, 16, 128]),
)
def test_schedule_invariants(p: int, o: int, c: int | None, b: int) -> None:
    kv = kv_spec(load_model("meta-llama/Llama-3.1-8B"))
    tl = request_timeline(kv, p, o, chunk_tokens=c, block_size=b)
    assert sum(s.claimed_bytes for s in tl.steps) == tl.final_bytes == (p + o) * 131_072
    assert all(s.allocated_bytes >= s.logical_bytes for s in tl.steps)
    assert all(s.allocated_bytes - s.logical_bytes < b * 131_072 for s in tl.steps)
    assert tl.prefill_bytes + tl.decode_bytes == tl.final_bytes
