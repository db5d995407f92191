"""`kvplan latency`'s fit check holds a sliding window's blocks at their prefill peak: a
prefill step holds every block it writes (vLLM's allocate_slots frees a window's old blocks
only at the next step). It counted the end of the request only, so gpt-oss-20b on L40S "fit"
32 requests of 32,768 + 128 tokens prefilled in one step, which hold twice the KV.

gpt-oss-20b: 12 full + 12 sliding (window 128) layers, one group of 12 each, blocks of 16.
vLLM's request ends at 32,768 + 128 - 1 = 32,895 tokens (the last output token is never
cached), its last step from 32,894 computed: cdiv(32,895, 16) = 2,056 full blocks + 2,056 -
(32,894 - 128 + 1) // 16 = 9 sliding blocks = 2,065 (hunt 13: 2,064 counted 32,896 tokens).
A one-step prefill holds cdiv(32,768, 16) = 2,048 sliding blocks (2,039 more); a last
8,192-token chunk (24,576 -> 32,768) holds 2,048 - 24,449 // 16 = 520 (511 more), and a step
of 8,192 tokens touches at most 2 requests' prompts. The pool is vLLM's num_blocks less its
null block (43 fewer since hunt 14: gpt-oss's rope cache is 16 MiB more, float32; 276 fewer
since hunt 19: the L40S's CUDA total is vLLM's logged 44.42 GiB, not a derived 44.53, so
0.9 x 0.112 GiB = 108.4 MB less, / 393,216 B a block)."""

from __future__ import annotations

import kvplan
from kvplan.costs.step.latency import KvFit, kv_fit
from kvplan.specs.hardware import load_gpu


def _fit(batch: int, chunk: int | None) -> KvFit:
    return kv_fit(kvplan.load_model("openai/gpt-oss-20b"), load_gpu("L40S"),
                  kvplan.EngineConfig(max_num_batched_tokens=chunk),
                  kvplan.RequestShape(batch=batch, prompt_tokens=32768, output_tokens=128))


def test_one_step_prefill_holds_every_sliding_block() -> None:
    f = _fit(17, None)
    assert f.blocks_per_request == 2065 and f.prefill_extra[1] == 2039
    assert f.num_blocks == 66360 and f.max_batch == (66360 - 1) // (2065 + 2039) == 16
    assert not f.fits and _fit(16, None).fits  # the end-state count said 32 fit
    assert _fit(4, None).max_batch == 16


def test_chunked_prefill_peak_is_one_chunk_for_two_requests() -> None:
    f = _fit(32, 8192)
    assert f.prefill_extra == (2, 511) and f.num_blocks == 66180
    assert f.max_batch == (66180 - 1 - 2 * 511) // 2065 == 31
    assert not f.fits and _fit(31, 8192).fits


def test_full_attention_models_are_unchanged() -> None:
    f = kv_fit(kvplan.load_model("meta-llama/Llama-3.1-8B"), load_gpu("H100"),
               kvplan.EngineConfig(), kvplan.RequestShape(batch=4, prompt_tokens=4096,
                                                          output_tokens=128))
    assert f.prefill_extra[1] == 0 and f.blocks_per_request == -(-4223 // 16)
