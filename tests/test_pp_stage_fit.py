"""Under PP, vLLM checks one request against every stage's own cache (each worker's layers
against its own memory), not only the stage with the fewest blocks."""

from __future__ import annotations

from tests.conftest import CliResult, run_cli


def _does_not_fit(r: CliResult) -> None:
    """A does-not-fit answer: exit 1, one line, no traceback."""
    assert r.code == 1, (r.code, r.err)
    assert len(r.err.strip().splitlines()) == 1 and r.err.startswith("error: ")

GEMMA = ("capacity", "google/gemma-3-27b-it", "--gpu", "H100", "-pp", "4",
         "--kv-cache-memory", "3GiB")


def test_a_stage_that_is_not_the_fewest_blocks_can_refuse_the_request() -> None:
    """Gemma-3-27B, 62 layers over 4 stages (15 / 16 / 16 / 15), every 6th layer full. Stage 1
    (layers 15-30) holds 3 full + 13 sliding layers, stage 3 (47-61) 3 full + 12 sliding: both
    have 3 layers in their largest group, so the same blocks, and vLLM keeps the later stage's
    (3). A page is 16 tokens x 16 KV heads x 128 x 2 (K, V) x 2 B / TP... = 131,072 B per layer.
    One request of 92,000 tokens: a full layer 5,750 pages (92,000 / 16), a sliding layer
    ceil((1,024 - 1 + 8,192) / 16) + 1 = 577 pages. Stage 1: (3 x 5,750 + 13 x 577) x 131,072 =
    3,244,163,072 B > 3 GiB (3,221,225,472); stage 3: (3 x 5,750 + 12 x 577) x 131,072 =
    3,168,534,528 B, which fits. vLLM refuses on stage 1; kvplan said it fits (0.89x)."""
    r = run_cli(*GEMMA, "--max-model-len", "92000")
    _does_not_fit(r)
    assert "needs 3.02 GiB of KV cache on pipeline stage 1, only 3.00 GiB" in r.err
    assert "the largest --max-model-len that fits is 91056" in r.err
    ok = run_cli(*GEMMA, "--max-model-len", "91056", "--json")
    assert ok.code == 0, ok.err
    assert ok.json()["fits"] is True


def test_the_largest_length_is_the_smallest_over_stages() -> None:
    """gpt-oss-120b over 5 stages with 1 GiB each: the fewest-blocks stage (4) alone would
    allow 124,816 tokens; stage 3 allows 122,736, so that is the largest that fits. The
    message names the first stage that refuses 131,072 tokens, as vLLM checks them in order."""
    r = run_cli("capacity", "openai/gpt-oss-120b", "--gpu", "H100", "-pp", "5",
                "--kv-cache-memory", "1GiB")
    _does_not_fit(r)
    assert "on pipeline stage 1" in r.err
    assert "the largest --max-model-len that fits is 122736" in r.err
