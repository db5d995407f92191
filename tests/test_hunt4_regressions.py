"""Regressions found by the fourth hunt (kvplan simulate and its metrics against vLLM 0.11's
`vllm bench serve` and v1 scheduler). Each golden value is derived by hand in its comment."""

from __future__ import annotations

from kvplan.analysis.metrics import compute_metrics, save_result_json
from kvplan.sim.simulator import simulate
from kvplan.sim.testing import LinearTimer, workload


# ------------- S1: --save-detailed's per-request lists have one entry per request, in order
# vLLM (vllm/benchmarks/serve.py, benchmark()) builds input_lens, output_lens, ttfts, itls and
# errors over every output in request order, failed ones included: a failed request keeps its
# prompt_len, has output length 0 (calculate_metrics' actual_output_lens), ttft 0.0 and no
# itls (RequestFuncOutput's defaults), and its error; a successful one has error "".
# kvplan listed only the completed requests and appended the rejection reasons after their
# "", so with request 1 rejected, errors[1] was "" and errors[2] request 1's reason.
# Three requests at t = 0, 1 s steps, max_model_len 100: request 1 (500 + 2 tokens) is
# rejected. Step 0 [0, 1] prefills requests 0 and 2 (first tokens at 1.0: TTFT 1.0 s each);
# step 1 [1, 2] samples both second tokens (request 0 finishes at 2.0, ITL 1.0); step 2
# [2, 3] samples request 2's third token (ITLs 1.0, 1.0).
def test_save_detailed_lists_are_per_request_in_order() -> None:
    r = simulate(workload([0, 0, 0], [4, 500, 4], [2, 2, 3]), timer=LinearTimer(),
                 num_blocks=100, block_size=4, max_model_len=100)
    doc = save_result_json(r, compute_metrics(r), {}, detailed=True)
    reason = "prompt + output = 502 tokens exceeds max_model_len 100"
    assert doc["input_lens"] == [4, 500, 4]
    assert doc["output_lens"] == [2, 0, 3]
    assert doc["ttfts"] == [1.0, 0.0, 1.0]
    assert doc["itls"] == [[1.0], [], [1.0, 1.0]]
    assert doc["errors"] == ["", reason, ""]
    assert doc["rejected"] == [{"index": 1, "reason": reason}]


def test_calibrate_reads_the_lengths_of_the_completed_requests() -> None:
    """A detailed file with a failed request (vLLM's, or kvplan's after S1): the completed
    requests' own lengths, not the totals' means (2 completed of 3: prompts 4 and 4)."""
    from kvplan.analysis.calibration.serving_fit import _lens

    row = {"input_lens": [4, 500, 4], "output_lens": [2, 0, 3], "errors": ["", "too long", ""],
           "total_input_tokens": 8, "total_output_tokens": 5}
    assert _lens(row, "r.json", 2) == ((4, 4), (2, 3))


# -------------------- S2: --save-result has vLLM's max_output_tokens_per_s (peak output rate)
# vLLM's calculate_metrics (vllm/benchmarks/serve.py) counts the successful requests' tokens
# (start_time + ttft, then + each itl) in one-second buckets int(t - min start_time) over
# int(ceil(max end - min start)) + 1 buckets and saves the fullest as
# max_output_tokens_per_s, beside max_concurrent_requests (the same BenchmarkMetrics pair;
# the console prints "Peak output token throughput (tok/s)"). kvplan wrote
# max_concurrent_requests but not this key.
# A (4 + 5 tokens) and B (4 + 3) sent at 0, steps of 0.3 s: both prefill in step 0, tokens
# at 0.3, 0.6, 0.8999999999999999, 1.2, 1.5 (A) and 0.3, 0.6, 0.9 (B): second 0 holds
# 3 + 3 = 6 tokens, second 1 holds A's last 2 (span int(ceil(1.5)) + 1 = 3 buckets).
def test_max_output_tokens_per_s_is_the_fullest_second() -> None:
    from kvplan.analysis.metrics import vllm_result

    r = simulate(workload([0, 0], [4, 4], [5, 3]), timer=LinearTimer(base_s=0.3),
                 num_blocks=100, block_size=4)
    doc = vllm_result(compute_metrics(r))
    assert doc["max_output_tokens_per_s"] == 6.0
    keys = list(doc)
    assert keys.index("max_output_tokens_per_s") + 1 == keys.index("max_concurrent_requests")


def test_max_output_tokens_per_s_without_completed_requests_is_zero() -> None:
    r = simulate(workload([0], [500], [2]), timer=LinearTimer(), num_blocks=100, block_size=4,
                 max_model_len=100)
    assert compute_metrics(r).max_output_tokens_per_s == 0.0
