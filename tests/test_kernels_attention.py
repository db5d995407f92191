"""Attention lookups against aiconfigurator-core 0.12.0's vLLM 0.24.0 tables on H100
(systems/data/h100_sxm/attention/vllm/0.24.0/{context,generation}_attention_perf.parquet,
kernel vllm_flash_attn_fa3, latency in ms)."""

from __future__ import annotations

import numpy as np
import pytest

from kvplan.costs import kernels as K
from kvplan.costs.kernels import Status
from kvplan.costs.kernels.attention import equivalent_isl
from kvplan.costs.kernels.work import causal_pairs

LLAMA8B = {"num_heads": 32, "num_kv_heads": 8, "head_dim": 128}


def test_prefill_row_llama8b_shape() -> None:
    """context row batch 1, isl 4096, 32/8 heads, head_dim 128, bf16 KV: 0.264315 ms;
    fp8 KV: 0.309611 ms."""
    answer = K.context_attention("H100", 1, 4096, **LLAMA8B)
    assert float(answer.seconds) * 1e3 == pytest.approx(0.264315, rel=1e-5)
    assert answer.worst is Status.MEASURED and answer.notes == ()
    assert answer.source.kernels == ("vllm_flash_attn_fa3", "vllm_flash_attn_fa4")
    fp8 = K.context_attention_s("H100", 1, 4096, kv_dtype="fp8", **LLAMA8B)
    assert float(fp8) * 1e3 == pytest.approx(0.309611, rel=1e-5)


def test_decode_row_llama8b_shape() -> None:
    """generation row batch 64, step 8191 (kv_len 8192), 32/8 heads: bf16 0.688160 ms, fp8
    0.387957 ms — fp8 KV halves the bytes read."""
    bf16 = K.decode_attention("H100", 64, 8192, **LLAMA8B)
    assert float(bf16.seconds) * 1e3 == pytest.approx(0.688160, rel=1e-5)
    assert bf16.worst is Status.MEASURED
    fp8 = K.decode_attention_s("H100", 64, 8192, kv_dtype="fp8", **LLAMA8B)
    assert float(fp8) * 1e3 == pytest.approx(0.387957, rel=1e-5)


@pytest.mark.parametrize("gpu", ["A100", "H100", "H200", "B200", "GB200", "L40S"])
def test_more_work_never_faster(gpu: str) -> None:
    batch = np.arange(1, 600)[:, None]
    lengths = np.unique(np.geomspace(1, 200_000, 300).astype(int))[None, :]
    for fn in (K.context_attention_s, K.decode_attention_s):
        seconds = fn(gpu, batch, lengths, **LLAMA8B)
        assert np.all(np.diff(seconds, axis=0) >= 0) and np.all(np.diff(seconds, axis=1) >= 0)


def test_beyond_the_measured_batch_is_flagged_and_linear() -> None:
    """batch 128 x kv 8192 was not measured (the table stops at batch x kv ~ 1M tokens)."""
    measured = K.decode_attention("H100", 64, 8192, **LLAMA8B)
    beyond = K.decode_attention("H100", 128, 8192, **LLAMA8B)
    assert beyond.worst is Status.EXTRAPOLATED
    assert float(beyond.seconds) == pytest.approx(2 * float(measured.seconds), rel=1e-6)


def test_long_prompt_extrapolates_quadratically() -> None:
    edge = float(K.context_attention_s("H100", 1, 16384, **LLAMA8B))
    beyond = K.context_attention("H100", 1, 32768, **LLAMA8B)
    assert beyond.worst is Status.EXTRAPOLATED
    assert float(beyond.seconds) == pytest.approx(4 * edge, rel=1e-6)


def test_unmeasured_heads_scale_through_batch_and_say_so() -> None:
    """28/4 heads (Qwen2.5-7B) were not measured: the same group size 7 is not in the table
    either, so the nearest (32/4, group 8) prices it with batch x 28/32."""
    answer = K.context_attention("H100", 4, 2048, num_heads=28, num_kv_heads=4, head_dim=128)
    assert answer.notes and "priced as measured 32/4" in answer.notes[0]
    same = K.context_attention_s("H100", 4 * 28 / 32, 2048, num_heads=32, num_kv_heads=4,
                                 head_dim=128)
    assert float(answer.seconds) == pytest.approx(float(same), rel=1e-12)


def test_unmeasured_head_size_pads_to_the_next_measured() -> None:
    answer = K.decode_attention("H100", 8, 4096, num_heads=32, num_kv_heads=8, head_dim=96)
    assert any("padded to measured 128" in n for n in answer.notes)
    assert float(answer.seconds) == float(K.decode_attention_s("H100", 8, 4096, **LLAMA8B))


def test_prefix_is_priced_at_equal_causal_work() -> None:
    """A 4096-token chunk over a 4096-token prefix scores 4096·4096 + 4096·4097/2 pairs, as
    many as a fresh prompt of 7094.3 tokens."""
    pairs = causal_pairs(8192) - causal_pairs(4096)
    isl = float(equivalent_isl(pairs, 0))
    assert isl == pytest.approx(7094.3, abs=0.1)
    answer = K.context_attention("H100", 1, 4096, prefix=4096, **LLAMA8B)
    assert float(answer.seconds) == pytest.approx(
        float(K.context_attention_s("H100", 1, isl, **LLAMA8B)), rel=1e-12)
    assert any("prefix" in n for n in answer.notes)
    fresh = float(K.context_attention_s("H100", 1, 4096, **LLAMA8B))
    assert fresh < float(answer.seconds) < float(K.context_attention_s("H100", 1, 8192, **LLAMA8B))


def test_measured_window_and_unmeasured_window() -> None:
    """window 8192 is measured for head_dim 128 (gpt-oss style rows); 4096 is not: decode
    reads min(kv, 4096) tokens on the full-attention table."""
    measured = K.decode_attention("H100", 8, 65536, window=8192, num_heads=64, num_kv_heads=8,
                                  head_dim=128)
    assert not any("window" in n for n in measured.notes)
    other = K.decode_attention("H100", 8, 65536, window=4096, **LLAMA8B)
    assert any("window 4096 not measured" in n for n in other.notes)
    assert float(other.seconds) == float(K.decode_attention_s("H100", 8, 4096, **LLAMA8B))


def test_equivalent_isl_inverts_causal_pairs() -> None:
    isl = np.array([1.0, 17.0, 1000.0, 5000.0, 100_000.0])
    for window in (0, 128, 4096):
        back = equivalent_isl(causal_pairs(isl, window), window)
        assert np.allclose(back, isl, rtol=1e-9)
