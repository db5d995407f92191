"""Gated DeltaNet layers (Qwen3-Next) priced from aiconfigurator's measured vLLM 0.24 GDN
kernels (``gdn_perf.parquet``, both kernels of a phase summed), with goldens read off the
wheel by hand, and the physics the step keeps."""

from __future__ import annotations

import numpy as np
import pytest

from kvplan.costs import kernels as kn
from kvplan.costs.kernels.gdn import gdn_decode, gdn_prefill
from kvplan.costs.kernels.tables import table
from kvplan.costs.step.explain import kernel_basis
from kvplan.costs.step.latency import RequestShape, request_latency
from kvplan.costs.step.roofline import StepCostModel
from kvplan.specs.catalog import load_model
from kvplan.specs.hardware import load_gpu
from kvplan.specs.serving import EngineConfig

NEXT = "Qwen/Qwen3-Next-80B-A3B-Thinking"
TP2 = {"key_heads": 8, "value_heads": 16, "key_dim": 128, "value_dim": 128}
"""Qwen3-Next's GDN heads on one GPU at TP2 (16 key / 32 value heads of 128)."""


def test_the_bundle_keeps_the_gdn_tables_with_their_provenance() -> None:
    fams = kn.manifest()["families"]
    assert fams["gdn_ctx"]["axes"] == ["batch", "seq_len"]
    assert fams["gdn_gen"]["axes"] == ["batch"]
    h100 = kn.manifest()["gpus"]["H100-SXM-80GB"]["tables"]["gdn_ctx"]
    assert (h100["engine"], h100["version"]) == ("vllm", "0.24.0")
    assert h100["file"].endswith("linear_attention/vllm/0.24.0/gdn_perf.parquet")
    assert h100["kernels"] == ["causal_conv1d_fn", "chunk_gated_delta_rule_flashinfer"]
    a100 = kn.manifest()["gpus"]["A100-80GB-SXM"]["tables"]["gdn_gen"]
    assert (a100["engine"], a100["fallback_engine"]) == ("sglang", True)


def test_decode_is_the_measured_pair_of_kernels() -> None:
    """H100, 64 requests, 8 key / 16 value heads: three Qwen3.5 models share that per-GPU
    shape; the fastest case is Qwen3.5-4B's, causal_conv1d_update 2.945 us +
    fused_recurrent_gated_delta_rule_packed_decode 50.262 us = 53.207 us."""
    t = gdn_decode("H100-SXM-80GB", 64, **TP2)
    assert t is not None
    assert float(t.seconds) == pytest.approx(53.207e-6, rel=1e-5)
    assert int(t.status) == kn.Status.MEASURED


def test_prefill_is_the_measured_pair_of_kernels() -> None:
    """H100, 32 prompts of 256 tokens: Qwen3.5-9B's case, causal_conv1d_fn 64.189 us +
    chunk_gated_delta_rule_flashinfer 94.902 us = 159.091 us; one prompt of 8,192 tokens
    (the same tokens) takes about three times that: the chain along one sequence."""
    many = gdn_prefill("H100-SXM-80GB", 32, 256, **TP2)
    one = gdn_prefill("H100-SXM-80GB", 1, 8192, **TP2)
    assert many is not None and one is not None
    assert float(many.seconds) == pytest.approx(159.091e-6, rel=1e-5)
    assert float(one.seconds) > 2.5 * float(many.seconds)


def test_a_shape_the_tables_lack_is_not_guessed() -> None:
    """A100's GDN rows (SGLang 0.5.10) hold only 16 key heads: TP2's 8 is not there."""
    assert gdn_decode("A100-80GB-SXM", 8, **TP2) is None
    assert gdn_prefill("A100-80GB-SXM", 1, 512, **TP2) is None


def _timer(gpu: str, **engine: object) -> StepCostModel:
    return StepCostModel(load_model(NEXT), load_gpu(gpu),
                         EngineConfig(tensor_parallel_size=2, **engine))  # type: ignore[arg-type]


def test_the_step_prices_its_gdn_layers_from_the_tables() -> None:
    """36 GDN layers at TP2 on H100, steps of 8,192 tokens: prefill read at 32 prompts of 256
    tokens, 36 x 159.091 us / 8,192 tokens per token. The decode slope is measured at
    Qwen3.5's state (bf16 conv 3 x 4,096 x 2 B + fp32 recurrent 16 x 128 x 128 x 4 B =
    1,073,152 B per layer) and scaled to Qwen3-Next's bf16 state (548,864 B per layer)."""
    t = _timer("H100-SXM-80GB")
    ms = t.measured
    assert ms is not None and ms.gdn is not None
    assert ms.gdn.per_token_s == pytest.approx(36 * 159.091e-6 / 8192, rel=1e-5)
    assert ms.gdn.measured_state_bytes == 36 * 1_073_152
    assert t.constants.state_bytes_per_request == 36 * 548_864
    assert t._co.state_flops_s == ms.gdn.per_token_s
    ratio = 548_864 / 1_073_152
    want = ms.gdn.per_request_s * ratio + ms.full.per_request_s  # type: ignore[union-attr]
    assert t._co.state_bytes_s == pytest.approx(want, rel=1e-12)
    assert "GDN layers from the measured GDN kernels" in kernel_basis(t)


def test_a100_keeps_the_roofline_and_says_so() -> None:
    t = _timer("A100-80GB-SXM")
    assert t.measured is not None and t.measured.gdn is None
    assert "no GDN table at 8 key / 16 value heads" in kernel_basis(t)


def test_more_requests_or_tokens_never_make_a_gdn_step_faster() -> None:
    t = _timer("H100-SXM-80GB")
    one = np.ones(1, dtype=np.int64)
    decode = [t.step_time_s(np.ones(r, dtype=np.int64), np.full(r, 500)) for r in
              (1, 8, 64, 256, 1024)]
    assert decode == sorted(decode)
    prefill = [t.step_time_s(one * n, one * 0) for n in (128, 1024, 4096, 8192)]
    assert prefill == sorted(prefill)


def test_an_fp32_state_cache_is_never_faster_than_bf16() -> None:
    """vLLM 0.11 keeps both GDN states in --mamba-cache-dtype (kvplan.specs.kv_state)."""
    shape = RequestShape(batch=64, prompt_tokens=512, output_tokens=64)
    model, gpu = load_model(NEXT), load_gpu("H100")
    auto = request_latency(model, gpu, EngineConfig(tensor_parallel_size=2,
                                                    quantization="fp8"), shape)
    f32 = request_latency(model, gpu, EngineConfig(tensor_parallel_size=2, quantization="fp8",
                                                   mamba_cache_dtype="float32"), shape)
    assert f32.tpot_s is not None and auto.tpot_s is not None
    assert f32.tpot_s > auto.tpot_s


def test_h200_gdn_cells_are_never_slower_than_h100s() -> None:
    """The same die with more bandwidth (the derive step caps H200 at H100 per cell)."""
    for fam in ("gdn_ctx", "gdn_gen"):
        h100, h200 = table("H100-SXM-80GB", fam), table("H200-SXM-141GB", fam)
        assert h100 is not None and h200 is not None
        rows = {tuple(r): i for i, r in enumerate(h100.keys.tolist())}
        for j, r in enumerate(h200.keys.tolist()):
            if tuple(r) in rows:
                assert np.all(h200.logt[j] <= h100.logt[rows[tuple(r)]])


def test_explain_lists_the_gdn_layers_on_the_side_that_binds() -> None:
    """One prefill step of 64 prompts of 128 tokens binds on scoring: the GDN row is its
    floor + per-token rate x 8,192 tokens; the decode step of 64 on the state reads."""
    from kvplan.costs.step.explain import explain_steps

    t = _timer("H100-SXM-80GB", quantization="fp8")
    gdn = t.measured.gdn  # type: ignore[union-attr]
    assert gdn is not None
    pre, dec = explain_steps(t, 64, 128, 8192)
    row = {o.op: o for o in pre.ops}["gdn"]
    assert row.count == 36
    assert row.seconds == pytest.approx(gdn.per_step_s + gdn.per_token_s * 8192, rel=1e-12)
    ratio = 548_864 / 1_073_152
    drow = {o.op: o for o in dec.ops}["gdn"]
    assert drow.seconds == pytest.approx(gdn.per_step_s + gdn.per_request_s * ratio * 64,
                                         rel=1e-12)


def _tpot(*extra: str) -> float:
    import json
    import subprocess
    import sys

    cmd = [sys.executable, "-m", "kvplan", "latency", NEXT, "--gpu", "H100", "-tp", "2",
           "-q", "fp8", "--prompt", "512", "--output", "64", "--batch", "64", "--json", *extra]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return float(json.loads(out.stdout)["tpot_s"])


def test_latency_reads_the_state_cache_dtype_from_the_command_line() -> None:
    """`kvplan latency --mamba-cache-dtype float32` doubles Qwen3-Next's GDN state (vLLM 0.11
    keeps both states in it), so its decode steps stream twice the state: slower."""
    assert _tpot("--mamba-cache-dtype", "float32") > _tpot()


def test_a_bad_state_cache_dtype_is_one_line_and_exit_2() -> None:
    import subprocess
    import sys

    cmd = [sys.executable, "-m", "kvplan", "latency", NEXT, "--gpu", "H100", "-tp", "2",
           "--prompt", "8", "--output", "8", "--mamba-cache-dtype", "fp16x"]
    out = subprocess.run(cmd, capture_output=True, text=True)
    assert out.returncode == 2
    assert out.stderr.strip().splitlines() == [
        "error: --mamba-cache-dtype must be one of auto, float32, got 'fp16x'"]


def test_one_long_prompt_is_priced_at_its_sequence_not_the_per_token_rate() -> None:
    """The chunked scan runs along each sequence: one prompt of 8,192 tokens at TP2 on H100
    takes 36 x 468.964 us = 16.883 ms (the table at batch 1), where 32 prompts of 256 take
    36 x 159.091 us (the per-token rate). The step prices max(per token x T, sequence(L))."""
    from kvplan.costs.step.explain import explain_steps

    t = _timer("H100-SXM-80GB", quantization="fp8")
    ms = t.measured
    assert ms is not None and ms.gdn is not None and ms.gdn_seq_s is not None
    assert ms.gdn_seq_s[8192] == pytest.approx(36 * 468.964e-6, rel=1e-5)
    assert ms.gdn_seq_s[0] == ms.gdn_seq_s[1] == 0.0
    one, _ = explain_steps(t, 1, 8192, 8192)
    row = {o.op: o for o in one.ops}["gdn"]
    assert row.seconds == pytest.approx(ms.gdn.per_step_s + 36 * 468.964e-6, rel=1e-5)
    many, _ = explain_steps(t, 32, 256, 8192)
    row = {o.op: o for o in many.ops}["gdn"]
    assert row.seconds == pytest.approx(ms.gdn.per_step_s + ms.gdn.per_token_s * 8192,
                                        rel=1e-12)


def test_the_sequence_floor_adds_exactly_its_excess_to_a_long_prefill_step() -> None:
    """One 8,192-token prompt: the step is the per-token pricing plus the sequence floor's
    excess over it (the step binds on scoring, so the GDN term adds one for one)."""
    import dataclasses

    t = _timer("H100-SXM-80GB", quantization="fp8")
    ms = t.measured
    assert ms is not None and ms.gdn is not None and ms.gdn_seq_s is not None
    new, ctx = np.array([8192]), np.array([0])
    with_floor = t.step_time_s(new, ctx)
    t._co = dataclasses.replace(t._co, gdn_seq_t=None)
    without = t.step_time_s(new, ctx)
    excess = float(ms.gdn_seq_s[8192]) - ms.gdn.per_token_s * 8192
    assert excess > 10e-3
    assert with_floor - without == pytest.approx(excess, rel=1e-9)


def test_recorded_steps_reprice_with_the_sequence_floor() -> None:
    """times_s (the calibration replay) prices a recorded long-prompt step as step_time_s."""
    from kvplan.costs.step.records import StepAggregates

    t = _timer("H100-SXM-80GB", quantization="fp8")
    batches = [(np.array([8192]), np.array([0])), (np.array([1, 1, 4000]), np.array([9, 99, 0])),
               (np.array([1, 1]), np.array([300, 40]))]
    aggs = [t.aggregates(n, c) for n, c in batches]
    assert [a.prefill_longest for a in aggs] == [8192, 4000, 0]
    stacked = StepAggregates(*(np.array([getattr(a, f) for a in aggs])
                               for f in StepAggregates.__slots__))
    got = t.times_s(stacked)
    want = [t.step_time_s(n, c) for n, c in batches]
    assert got.tolist() == want


def test_the_longest_chunk_counts_only_requests_computing_more_than_one_token() -> None:
    from kvplan.costs.step.sums import longest_chunk

    for new, want in (([], 0), ([1, 1, 1], 0), ([1, 300, 2], 300), ([2], 2), ([1], 0)):
        assert longest_chunk(new) == want
        assert longest_chunk(np.array(new, dtype=np.int64)) == want
