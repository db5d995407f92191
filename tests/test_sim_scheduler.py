"""Exact step traces of the simulated vLLM v1 scheduler, written out by hand (1 s per step)."""

from __future__ import annotations

import numpy as np
import pytest

from kvplan.sim.blocks import CacheGroup, KvShape
from kvplan.sim.scheduler import Limits
from kvplan.sim.simulator import simulate
from kvplan.sim.state import trace_keys
from kvplan.sim.testing import LinearTimer, workload

ONE = LinearTimer(base_s=1.0)


def run(w, *, blocks=1000, b=4, budget=100, seqs=10, chunked=True, caching=True,
        timer=ONE, threshold=0, **kw):
    """Simulate step by step and fast-forwarded; both must agree; return the result.

    ``blocks`` is vLLM's num_gpu_blocks: requests share blocks - 1 (one is the null block).
    """
    lim = Limits(max_num_batched_tokens=budget, max_num_seqs=seqs, chunked_prefill=chunked,
                 prefix_caching=caching, long_prefill_token_threshold=threshold)
    slow, fast = (simulate(w, timer=timer, num_blocks=blocks, block_size=b, limits=lim,
                           fast=f, validate=True, **kw) for f in (False, True))
    assert np.array_equal(slow.finish_s, fast.finish_s, equal_nan=True)
    assert np.array_equal(slow.steps.used_blocks, fast.steps.used_blocks)
    return fast


def tokens(r, i):
    return r.token_times(i).tolist()


def test_chunked_prefill_under_token_budget():
    # prompt 10, budget 4: chunks 4, 4, 2; first token when the 10th prompt token is computed.
    r = run(workload([0], [10], [3]), budget=4)
    assert r.steps.new_tokens.tolist() == [4, 4, 2, 1, 1]
    assert r.steps.used_blocks.tolist() == [1, 2, 3, 3, 3]
    assert tokens(r, 0) == [3.0, 4.0, 5.0]
    assert r.first_token_s[0] == 3.0 and r.finish_s[0] == 5.0


def test_budget_exhaustion_several_requests():
    # A gets 6 of 8 tokens, B the remaining 2; next step A decodes, B finishes its prompt.
    r = run(workload([0, 0], [6, 5], [2, 2]), budget=8)
    assert r.steps.new_tokens.tolist() == [8, 4, 1]
    assert tokens(r, 0) == [1.0, 2.0]
    assert tokens(r, 1) == [2.0, 3.0]


def test_chunked_prefill_off_waits_for_a_whole_budget():
    # A takes 6 of 8; B's 5-token prompt does not fit the 2 left, so it waits a step.
    r = run(workload([0, 0], [6, 5], [2, 2]), budget=8, chunked=False)
    assert r.steps.new_tokens.tolist() == [6, 6, 1]
    assert tokens(r, 1) == [2.0, 3.0]


def test_max_num_seqs_cap():
    r = run(workload([0, 0, 0], [2, 2, 2], [2, 2, 2]), seqs=2)
    assert r.steps.running.tolist() == [2, 2, 1, 1]
    assert r.steps.waiting.tolist() == [1, 1, 0, 0]
    assert r.finish_s.tolist() == [2.0, 2.0, 4.0]


def test_preemption_of_self_then_recompute():
    # 3 usable blocks of 2 tokens. Step 1: A takes the last block; B (newest) cannot grow and
    # is preempted. B waits until A finishes, then recomputes prompt + 1 sampled token (3).
    r = run(workload([0, 0], [2, 2], [4, 4]), blocks=4, b=2, caching=False)
    assert r.steps.new_tokens.tolist() == [4, 1, 1, 1, 3, 1, 1]
    assert r.steps.used_blocks.tolist() == [2, 2, 2, 3, 2, 2, 3]
    assert tokens(r, 0) == [1.0, 2.0, 3.0, 4.0]
    assert tokens(r, 1) == [1.0, 5.0, 6.0, 7.0]
    assert r.preemptions.tolist() == [0, 1]
    assert sorted(r.itl_s().tolist()) == [1.0, 1.0, 1.0, 1.0, 1.0, 4.0]


def test_preemption_takes_the_newest_running_request():
    # 4 usable blocks: after step 0 one is free. A takes it; B needs one, so C (newest) goes.
    r = run(workload([0, 0, 0], [2, 2, 2], [3, 3, 3]), blocks=5, b=2, caching=False)
    assert r.preemptions.tolist() == [0, 0, 1]
    assert r.finish_s.tolist() == [3.0, 3.0, 5.0]
    assert tokens(r, 2) == [1.0, 4.0, 5.0]
    assert r.steps.new_tokens.tolist() == [6, 2, 2, 3, 1]


def test_preempted_request_hits_its_own_cached_blocks():
    # 4 usable blocks of 2. Step 1: A takes the last free block, B cannot grow: preempted, its 2
    # full blocks stay cached at the free queue's tail. Step 3: A's new block evicts B's
    # tail block (freed first, vLLM's order); B comes back hitting its first block (2
    # tokens) and recomputes 3 of its 5 tokens instead of 5. prefix_hit_tokens is each
    # request's first admission's hits (vLLM's num_cached_tokens): 0 for both.
    r = run(workload([0, 0], [2, 4], [4, 4]), blocks=5, b=2)
    assert r.preemptions.tolist() == [0, 1]
    assert r.prefix_hit_tokens.tolist() == [0, 0]
    assert r.steps.new_tokens.tolist() == [6, 1, 1, 1, 3, 1, 1]
    off = run(workload([0, 0], [2, 4], [4, 4]), blocks=5, b=2, caching=False)
    assert off.steps.new_tokens.tolist()[4] == 5


def test_shared_prefix_hit_skips_compute():
    # X caches the 2 full blocks of the shared 8-token prefix; Y (arrives later) hits both
    # and computes only its last 2 prompt tokens.
    r = run(workload([0, 10], [10, 10], [2, 2]), shared_prefix_tokens=8)
    assert r.steps.new_tokens.tolist() == [10, 1, 2, 1]
    assert r.prefix_hit_tokens.tolist() == [0, 8]
    assert r.first_token_s.tolist() == [1.0, 11.0]
    assert r.prefix_query_tokens == 20


def test_prefix_hit_never_covers_the_last_token():
    r = run(workload([0, 10], [8, 8], [1, 1]), shared_prefix_tokens=8)
    assert r.prefix_hit_tokens.tolist() == [0, 4]
    assert r.steps.new_tokens.tolist() == [8, 4]


@pytest.mark.parametrize("fast", [False, True])
def test_a_prompts_last_token_alone_caches_the_block_it_fills(fast):
    # B = 4, budget 63: eight 8-token prompts take 7 x 8 + 7 tokens; in step 2 the eighth
    # computes its last prompt token in a decode-shaped step (the vectorised running path, or
    # a fast-forwarded run), fills its second block, caches it, and finishes. Z hits both.
    hashes = [[i, i] for i in range(8)] + [[7, 7]]
    w = workload([0] * 8 + [10], [8] * 8 + [9], [2] * 7 + [1, 1], hashes=hashes, hash_tokens=4)
    lim = Limits(max_num_batched_tokens=63, max_num_seqs=10)
    r = simulate(w, timer=ONE, num_blocks=1000, block_size=4, limits=lim, fast=fast,
                 validate=True)
    assert r.steps.new_tokens.tolist() == [63, 8, 1]
    assert r.prefix_hit_tokens.tolist() == [0] * 8 + [8]


def test_prefix_caching_off_never_hits():
    r = run(workload([0, 10], [10, 10], [2, 2]), shared_prefix_tokens=8, caching=False)
    assert r.prefix_hit_tokens.tolist() == [0, 0]


def test_single_request_ttft_and_tpot_match_the_timer():
    timer = LinearTimer(base_s=0.01, per_token_s=1e-4, per_context_s=1e-6)
    r = run(workload([0], [100], [5]), budget=32, b=16, timer=timer)
    chunks = [(32, 0), (32, 32), (32, 64), (4, 96)]
    ttft = sum(timer._t(n, c) for n, c in chunks)
    assert r.first_token_s[0] == pytest.approx(ttft, rel=1e-12)
    decodes = [timer._t(1, 100 + k) for k in range(4)]
    tpot = (r.finish_s[0] - r.first_token_s[0]) / 4
    assert tpot == pytest.approx(np.mean(decodes), rel=1e-12)


def test_rejected_requests_have_reasons():
    r = run(workload([0, 0, 0], [10, 300, 5], [2, 2, 2]), blocks=20, b=4, max_model_len=100)
    assert r.finished.tolist() == [True, False, True]
    assert "max_model_len" in r.rejected[1]
    r = run(workload([0], [100], [2]), blocks=5, b=4)
    assert "pool has 4 usable" in r.rejected[0]


def test_one_block_is_vllms_null_block():
    """vllm/v1/core/block_pool.py: BlockPool.__init__ pops ``null_block`` off the free queue,
    so num_gpu_blocks - 1 blocks are allocatable, and get_usage() divides by
    num_gpu_blocks - 1 ("Subtract 1 to account for null block").

    num_gpu_blocks 3, B = 2: A (prompt 2, output 3) and B (prompt 2) take the 2 usable blocks
    in step 0; in step 1 A needs a third block, so B (newest) is preempted.
    """
    r = run(workload([0, 0], [2, 2], [3, 2]), blocks=3, b=2, caching=False)
    assert r.preemptions.tolist() == [0, 1]
    assert r.steps.used_blocks.tolist()[:2] == [2, 2]
    assert r.peak_kv_blocks == 2 and r.num_blocks == 3 and r.usable_blocks == 2
    from kvplan.analysis.metrics import compute_metrics
    assert compute_metrics(r).peak_kv_usage == 1.0
    # a prompt + output - 1 of 5 tokens needs 3 blocks: more than the 2 usable
    r = run(workload([0], [4], [2]), blocks=3, b=2)
    assert 0 in r.rejected


def test_closed_loop_sends_next_request_when_one_finishes():
    r = run(workload([0, 0, 0], [2, 2, 2], [2, 2, 2], concurrency=1))
    assert r.sent_s.tolist() == [0.0, 2.0, 4.0]
    assert r.finish_s.tolist() == [2.0, 4.0, 6.0]


def test_idle_clock_jumps_to_next_arrival():
    r = run(workload([0, 100], [2, 2], [1, 1]))
    assert r.steps.start_s.tolist() == [0.0, 100.0]


def test_trace_keys_map_hash_blocks_onto_kv_blocks():
    keys = trace_keys([np.array([1, 2, 3]), np.array([1, 2, 4]), np.array([5, 2])],
                      np.array([1536, 1400, 1024]), 512, 16)
    # request 1 ends inside its third hash block: 1400 // 16 = 87 blocks (hunt 17: the
    # partial trailing hash block's leading tokens are shared by an equal chain)
    assert len(keys[0]) == 96 and len(keys[1]) == 87 and len(keys[2]) == 64
    assert keys[0][:64] == keys[1][:64]
    assert not set(keys[0][64:]) & set(keys[1])
    assert not set(keys[2]) & set(keys[0])
    big = trace_keys([np.array([1, 2]), np.array([1, 3])], np.array([1024, 1024]), 512, 1024)
    assert len(big[0]) == 1 and big[0] != big[1]
    half = trace_keys([np.array([1, 2]), np.array([1, 3])], np.array([1024, 1024]), 512, 256)
    assert half[0][:2] == half[1][:2] and half[0][2:] != half[1][2:]


SLIDING = KvShape(block_size=2, groups=(CacheGroup(kind="sliding", window=4),))


def test_sliding_window_frees_on_the_computed_tokens_before_the_step():
    """vllm/v1/core/kv_cache_manager.py, allocate_slots(): remove_skipped_blocks(request_id,
    request.num_computed_tokens) runs *before* the step's tokens are added, and
    single_type_kv_cache_manager.py SlidingWindowManager.remove_skipped_blocks frees the
    blocks before (num_computed_tokens - window + 1) // B. A prefill chunk therefore holds
    every block it writes; the window only trims them at the next step.

    Window 4, B = 2, prompt 10, output 2, one chunk: step 0 allocates cdiv(10, 2) = 5 blocks
    (nothing skipped at 0 computed); step 1 (decode, 10 computed) frees blocks 0..2
    ((10 - 4 + 1) // 2 = 3) and opens block 5: 6 - 3 = 3 held.
    """
    r = run(workload([0], [10], [2]), kv=SLIDING, b=2, blocks=100)
    assert r.steps.used_blocks.tolist() == [5, 3]


def test_sliding_window_prefill_peak_decides_rejection_and_chunks_fit():
    """Alone in a pool of 4 usable blocks (num_gpu_blocks 5), the one-chunk prefill above
    needs 5 (and a recompute of 11 tokens after a preemption 6): vLLM could never allocate
    it, so it is rejected. With a 4-token budget the chunks hold cdiv(4,2) = 2, then
    cdiv(8,2) - (4-3)//2 = 4, then cdiv(10,2) - (8-3)//2 = 3 blocks, and decode holds 3
    (a recompute's last chunk cdiv(11,2) - 2 = 4): it fits."""
    r = run(workload([0], [10], [2]), kv=SLIDING, b=2, blocks=5)
    assert "needs 6 KV blocks" in r.rejected[0]
    r = run(workload([0], [10], [2]), kv=SLIDING, b=2, blocks=5, budget=4)
    assert r.finished.tolist() == [True]
    assert r.steps.new_tokens.tolist() == [4, 4, 2, 1]
    assert r.steps.used_blocks.tolist() == [2, 4, 3, 3]
