"""Hunt 15 (latops2): step-cost ops `kvplan latency --explain` prices against vLLM 0.11's
arithmetic and physics. Hand-checked."""

from __future__ import annotations

import json

import numpy as np

from kvplan.costs import kernels as kn
from kvplan.costs.step.constants import step_constants
from kvplan.costs.step.ops import stage_ops
from kvplan.specs.catalog import load_model
from kvplan.specs.serving import EngineConfig
from tests.conftest import run_cli

LLAMA70 = "meta-llama/Llama-3.1-70B"
NEMOTRON = "nvidia/Nemotron-H-56B-Base-8K"
L40S_TP8 = ("latency", LLAMA70, "--gpu", "L40S", "-tp", "8", "--prompt", "1000",
            "--output", "100", "--batch", "8", "--json")


def _decode_rows() -> dict[str, dict[str, object]]:
    r = run_cli(*L40S_TP8)
    assert r.code == 0, r.err
    step = next(s for s in json.loads(r.out)["step_ops"] if s["phase"] == "decode")
    return {o["op"]: o for o in step["ops"]}


def test_tp_step_all_reduces_the_embedding_output_too() -> None:
    # vLLM's VocabParallelEmbedding all-reduces its output under TP (each rank holds
    # vocab / tp rows and zeroes the tokens it does not own): 2 x 80 + 1 = 161 all-reduces
    # for Llama-3.1-70B at TP8 (was 160), 1 x 118 + 1 = 119 for Nemotron-H at TP2 (one per
    # block + the embedding), none at TP1.
    llama, nemotron = load_model(LLAMA70), load_model(NEMOTRON)
    tp8, tp2 = EngineConfig(tensor_parallel_size=8), EngineConfig(tensor_parallel_size=2)
    assert stage_ops(llama, tp8).allreduces == step_constants(llama, tp8).allreduces == 161
    assert stage_ops(nemotron, tp2).allreduces == step_constants(nemotron, tp2).allreduces == 119
    assert stage_ops(llama, EngineConfig()).allreduces == 0
    # PP3 at TP2: the first stage (layers 0-26, the fullest) holds the embedding: 2 x 27 + 1
    assert stage_ops(llama, EngineConfig(tensor_parallel_size=2,
                                         pipeline_parallel_size=3)).allreduces == 55
    # the decode step's row: 161 x one measured all-reduce of 8 tokens x 8,192 x 2 B
    row = _decode_rows()["all_reduce"]
    assert row["layers"] == 161 and row["shape"] == "131072 B x 8 GPUs"
    one = float(kn.all_reduce_s("L40S", 131_072, 8))
    assert np.isclose(float(row["seconds"]), 161 * one, rtol=1e-9)  # type: ignore[arg-type]


def test_tp_lm_head_gathers_the_sampled_rows_logits() -> None:
    # LogitsProcessor._gather_logits all-gathers each rank's [8, 128,256 / 8 = 16,032] bf16
    # logits (one sampled row per request) into [8, 128,256]: 8 x 16,032 x 8 x 2 =
    # 2,052,096 B over 8 GPUs, 1.44 ms on L40S's measured NCCL all-gather (its PCIe
    # collectives move ~1.4 GB/s); not priced before (no row, nor in the step).
    row = _decode_rows()["logits_gather"]
    assert row["shape"] == "2052096 B x 8 GPUs" and row["layers"] == 1
    assert round(float(row["seconds"]) * 1e3, 2) == 1.44  # type: ignore[arg-type]
    # the step carries it: its lm_head term at one row is the GEMM + the one-row gather
    from kvplan.costs.step.tables import _lm_head

    fixed, _ = _lm_head("L40S", 16_032, 8192, "bfloat16", 8)
    alone, _ = _lm_head("L40S", 16_032, 8192, "bfloat16", 1)
    gather_one = float(kn.all_gather("L40S", 16_032 * 8 * 2, 8).seconds)
    assert np.isclose(fixed - alone, gather_one, rtol=1e-9) and gather_one > 3e-4


def test_mla_with_a_q_lora_runs_q_a_and_kv_a_as_one_replicated_gemm() -> None:
    # vLLM 0.11 deepseek_v2.py: with q_lora_rank set, q_a_proj and kv_a_proj_with_mqa load
    # into one MergedColumnParallelLinear(hidden, [q_lora_rank, kv_lora_rank + rope],
    # disable_tp=True): DeepSeek-V3 runs one 7,168 -> 1,536 + 512 + 64 = 2,112 GEMM on every
    # GPU, not two (1,536 and 576). Block-fp8 bytes: 2,112 x 7,168 + 17 x 56 scales x 4 B
    # = 15,142,624 B. DeepSeek-V2-Lite (no q LoRA) keeps q_proj and kv_a_proj_with_mqa apart.
    v3 = stage_ops(load_model("deepseek-ai/DeepSeek-V3"), EngineConfig(tensor_parallel_size=8))
    names = {g.name: g for g in v3.gemms}
    assert "mla_q_a_proj" not in names and "mla_kv_a_proj" not in names
    fused = names["mla_fused_qkv_a_proj"]
    assert (fused.n, fused.k, fused.count, fused.weight_bytes) == (2112, 7168, 61, 15_142_624)
    lite = {g.name: (g.n, g.k) for g in stage_ops(load_model("deepseek-ai/DeepSeek-V2-Lite"),
                                                  EngineConfig()).gemms}
    assert (lite["mla_q_proj"], lite["mla_kv_a_proj"]) == ((16 * 192, 2048), (576, 2048))
    # the decode step's row: one fp8-block GEMM at m = 64 per layer, 2.117 ms on H200 over
    # 61 layers (the two GEMMs were 2.081 + 1.996 = 4.077 ms); 0.774 ms since block fp8 is
    # never above the bf16 GEMM of its shape (hunt 18: 12.7 us bf16 a layer, 34.7 us block)
    from kvplan.costs.kernels.quantized import quantized_gemm_s

    one = float(quantized_gemm_s("H200-SXM-141GB", np.array([64]), 2112, 7168, "fp8_block",
                                 15_142_624)[0])
    assert round(61 * one * 1e3, 3) == 0.774
