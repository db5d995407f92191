"""Session 13's own fixes (the lead's, beside the helpers' tests/test_hunt14_*.py)."""

from __future__ import annotations

from tests.conftest import run_cli


def test_latency_notes_a_batch_vllms_default_max_num_seqs_would_queue() -> None:
    """vLLM's default --max-num-seqs is 256 on GPUs under 70 GiB (L40S) and 1024 on H100,
    capped at a given --max-num-batched-tokens (300 here): a static batch of 512 is priced in
    one batch, which vLLM would not run at once; the answer now says so (it said nothing)."""
    args = ("latency", "meta-llama/Llama-3.1-8B", "--batch", "512", "--prompt", "128",
            "--output", "128", "--json")
    l40s = run_cli(*args, "--gpu", "L40S")
    assert l40s.code == 0, l40s.err
    assert ("a batch of 512 on each engine is above vLLM's default --max-num-seqs on L40S "
            "(256)") in l40s.err
    h100 = run_cli(*args, "--gpu", "H100")
    assert h100.code == 0 and "max-num-seqs" not in h100.err
    capped = run_cli(*args, "--gpu", "H100", "--max-num-batched-tokens", "300")
    assert "default --max-num-seqs on H100-SXM-80GB (300)" in capped.err
