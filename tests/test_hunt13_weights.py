"""hunt13: weight bytes and parameter counts, hand-checked against vLLM 0.11's arithmetic."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kvplan.costs.memory.activation import rope_cache_bytes
from kvplan.costs.memory.mla_absorb import mla_absorbed_bytes
from kvplan.costs.memory.params import (
    layer_parts,
    stage_weight_bytes,
    weight_bytes,
    weight_bytes_per_gpu,
)
from kvplan.specs.catalog import catalog, load_model
from tests.conftest import assert_one_line_error, run_cli

LLAMA8B_LINEAR = 32 * (4096 * 4096 * 2 + 2 * 1024 * 4096 + 3 * 14336 * 4096)  # 6,979,321,856
LLAMA8B_OTHER = 2 * 128256 * 4096 + 32 * 2 * 4096 + 4096  # embedding, lm_head, norms


def _config(tmp_path: Path, hf_id: str, **extra: Any) -> str:
    raw = json.loads(catalog()[hf_id.lower()].path.read_text())
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**raw, **extra}))
    return str(path)


MODELOPT_NVFP4 = {
    "quant_method": "modelopt",
    "quant_algo": "NVFP4",
    "producer": {"name": "modelopt"},
    "ignore": ["lm_head"],
    "config_groups": {
        "group_0": {
            "targets": ["Linear"],
            "weights": {"num_bits": 4, "type": "float", "group_size": 16},
        }
    },
}


def test_modelopt_nvfp4_checkpoint_is_priced_as_nvfp4_not_fp8(tmp_path: Path) -> None:
    # nvidia's FP4 checkpoints say quant_method "modelopt" + quant_algo "NVFP4"; vLLM 0.11
    # resolves them to modelopt_fp4 (ModelOptNvFp4Config.override_quantization_method).
    # Linear weights: 4 bits + an fp8 scale per 16 = 9/16 B each; the rest stays bf16:
    # 6,979,321,856 x 9 / 16 + 2 x 1,050,939,392 = 6,027,747,328 B (kvplan said fp8: 9.08e9).
    path = _config(tmp_path, "meta-llama/Llama-3.1-8B", quantization_config=MODELOPT_NVFP4)
    golden = LLAMA8B_LINEAR * 9 // 16 + 2 * LLAMA8B_OTHER
    assert golden == 6_027_747_328
    assert weight_bytes(load_model(path)) == golden
    r = run_cli("capacity", path, "--json")
    assert r.code == 0, r.err
    assert r.json()["weights_bytes"] == golden + 131072 * 128 * 2  # + the rope cache


def test_modelopt_flag_on_an_nvfp4_checkpoint_is_its_own_method(tmp_path: Path) -> None:
    # vLLM's override sets --quantization modelopt to modelopt_fp4: not a mismatch
    path = _config(tmp_path, "meta-llama/Llama-3.1-8B", quantization_config=MODELOPT_NVFP4)
    r = run_cli("capacity", path, "-q", "modelopt", "--json")
    assert r.code == 0, r.err
    assert r.json()["weights_bytes"] == 6_027_747_328 + 131072 * 128 * 2


def test_modelopt_fp8_checkpoint_stays_fp8(tmp_path: Path) -> None:
    q = {"quant_method": "modelopt", "quant_algo": "FP8", "producer": {"name": "modelopt"}}
    path = _config(tmp_path, "meta-llama/Llama-3.1-8B", quantization_config=q)
    # 1 B a linear weight (+ a few fp32 per-tensor scales), the rest bf16
    got = weight_bytes(load_model(path)) - (LLAMA8B_LINEAR + 2 * LLAMA8B_OTHER)
    assert 0 <= got < 1024


def test_rope_cache_keeps_only_the_partial_rotary_share() -> None:
    # Qwen3-Next: partial_rotary_factor 0.25 of head_dim 256 -> get_rope caches 64 dims:
    # 262,144 x 64 x 2 B = 32 MiB (kvplan cached the whole head, 128 MiB). Nemotron-H's
    # attention layers have no rotary embedding at all (nemotron_h.py): 0, was 2 MiB.
    assert rope_cache_bytes(load_model("Qwen/Qwen3-Next-80B-A3B-Thinking")) == 262144 * 64 * 2
    assert rope_cache_bytes(load_model("nvidia/Nemotron-H-56B-Base-8K")) == 0
    assert rope_cache_bytes(load_model("meta-llama/Llama-3.1-8B")) == 131072 * 128 * 2


def test_qwen3_next_tp2_model_loading_matches_the_vllm_log() -> None:
    # vLLM 0.10.2, Qwen3-Next-80B-A3B TP2 on H200 (the log tests/test_memory_hybrid.py cites):
    # "Model loading took 74.2812 GiB"; kvplan said 74.3747 (the 96 MiB of rope), now 74.2810
    r = run_cli(
        "capacity", "Qwen/Qwen3-Next-80B-A3B-Thinking", "--gpu", "H200", "-tp", "2", "--json"
    )
    assert r.code == 0, r.err
    assert abs(r.json()["weights_bytes"] / 2**30 - 74.2812) < 0.001


def test_partial_rotary_factor_out_of_range_is_one_error_line(tmp_path: Path) -> None:
    path = _config(tmp_path, "meta-llama/Llama-3.1-8B", partial_rotary_factor=1.5)
    r = run_cli("capacity", path)
    assert_one_line_error(r)
    assert "partial_rotary_factor" in r.err


def test_pp_stages_of_qwen3_moe_each_hold_the_vocab_tables() -> None:
    # vLLM 0.11's qwen3_moe.py builds embed_tokens, norm and lm_head on every pipeline rank
    # (no PPMissingLayer), so each of PP 2's stages loads 24 layers + both 151,936 x 2,048
    # tables + the final norm: (61,064,245,248 - 1,244,659,712 - 4,096) / 2 + 1,244,659,712
    # + 4,096 = 31,154,454,528 B (kvplan gave stage 0 the embedding only: 30,532,120,576).
    m = load_model("Qwen/Qwen3-30B-A3B")
    tables = 2 * 151936 * 2048 * 2
    golden = (weight_bytes(m) - tables - 2048 * 2) // 2 + tables + 2048 * 2
    assert golden == 31_154_454_528
    assert [stage_weight_bytes(m, pp=2, stage=s) for s in (0, 1)] == [golden, golden]


def test_pp_middle_stage_of_gemma3_holds_the_tied_table() -> None:
    # gemma3.py: embed_tokens on every rank (lm_head tied to it): stage 1 of PP 3 (21 layers)
    # carries 262,208 x 5,376 x 2 B = 2,819,260,416 B more than its layers and its norm
    m = load_model("google/gemma-3-27b-it")
    layers = sum(p.params for i in range(21, 42) for p in layer_parts(m, i)) * 2
    table = 262208 * 5376 * 2
    assert stage_weight_bytes(m, pp=3, stage=1) == layers + table + 5376 * 2


def test_pp_llama_keeps_embedding_first_and_head_last() -> None:
    # llama.py guards both with PPMissingLayer: stage 0 = embedding + 16 layers
    m = load_model("meta-llama/Llama-3.1-8B")
    layers = sum(p.params for i in range(16) for p in layer_parts(m, i)) * 2
    assert stage_weight_bytes(m, pp=2, stage=0) == layers + 128256 * 4096 * 2


def test_fp8_mla_keeps_a_bf16_copy_of_kv_b_proj() -> None:
    # MLACommonImpl.process_weights_after_loading dequantizes an fp8 kv_b_proj into bf16
    # W_UK_T / W_UV ("we just store fp16/bf16 copies"): DeepSeek-R1-0528 TP 8 holds
    # 61 x 512 x 16 heads x (128 + 128) x 2 B = 255,852,544 B more. vLLM 0.11.2 logs "Model
    # loading took 79.7390 GiB" on an H200; kvplan said 79.3124, now 79.5507.
    golden = 61 * 512 * 16 * 256 * 2
    m = load_model("deepseek-ai/DeepSeek-V3")
    assert mla_absorbed_bytes(m, dtype="auto", quantization=None, tp=8, pp=1) == golden
    r = run_cli(
        "capacity",
        "deepseek-ai/DeepSeek-R1-0528",
        "--gpu",
        "H200",
        "-tp",
        "8",
        "--max-model-len",
        "8192",
        "--json",
    )
    assert r.code == 0, r.err
    want = stage_weight_bytes(m, tp=8) + rope_cache_bytes(m) + golden
    assert r.json()["weights_bytes"] == want
    assert abs(want / 2**30 - 79.5507) < 0.0001


def test_mla_copy_only_for_a_quantized_kv_b_proj() -> None:
    lite = load_model("deepseek-ai/DeepSeek-V2-Lite")  # bf16: W_UK / W_UV are views
    assert mla_absorbed_bytes(lite, dtype="auto", quantization=None, tp=1, pp=1) == 0
    # -q fp8 on it: 27 layers x 512 x 16 x 256 x 2 B; DP attention (tp 1) on V3: 128 heads
    assert mla_absorbed_bytes(lite, dtype="auto", quantization="fp8", tp=1, pp=1) == (
        27 * 512 * 16 * 256 * 2
    )
    v3 = load_model("deepseek-ai/DeepSeek-V3")
    assert mla_absorbed_bytes(v3, dtype="auto", quantization=None, tp=1, pp=2, stage=1) == (
        30 * 512 * 128 * 256 * 2
    )


FP8_CHANNEL = {
    "quant_method": "compressed-tensors",
    "format": "float-quantized",
    "ignore": ["lm_head"],
    "config_groups": {
        "group_0": {
            "targets": ["Linear"],
            "weights": {"num_bits": 8, "type": "float", "strategy": "channel"},
            "input_activations": {"num_bits": 8, "type": "float", "dynamic": True},
        }
    },
}


def test_compressed_tensors_fp8_channel_scales_per_output_row(tmp_path: Path) -> None:
    # CompressedTensorsW8A8Fp8 (strategy channel): one fp32 scale per output row of every
    # linear layer, not one per matrix. Llama-3.3-70B-Instruct-FP8-dynamic TP 4 on an H200:
    # per GPU and layer (8192 + 2 x 1024) / 4 + 8192 (o) + 57344 / 4 + 8192 (down) = 33,280
    # rows x 4 B x 80 layers = 10,649,600 B; vLLM 0.11.2 logs "Model loading took 16.9619
    # GiB", kvplan said 16.9497, now 16.9596.
    path = _config(tmp_path, "meta-llama/Llama-3.1-70B", quantization_config=FP8_CHANNEL)
    m = load_model(path)
    fp8 = sum(p.params for i in range(80) for p in layer_parts(m, i) if p.linear) // 4
    bf16 = stage_weight_bytes(m, tp=4, fmt=None)  # every weight 2 B: linear ones 2 x fp8
    assert stage_weight_bytes(m, tp=4) == bf16 - fp8 + 80 * 33280 * 4
    r = run_cli("capacity", path, "--gpu", "H200", "-tp", "4", "--max-model-len", "8192", "--json")
    assert r.code == 0, r.err
    assert abs(r.json()["weights_bytes"] / 2**30 - 16.9596) < 0.0001


def test_pp_step_reads_skip_the_tables_a_stage_never_uses() -> None:
    # The vocab tables every Qwen3-MoE stage allocates are read by the first (lookup rows) and
    # last (lm_head) stage only: a step's weight reads on the fullest GPU stay the last
    # stage's 24 layers + lm_head + norm = 29,909,790,720 + 622,329,856 + 4,096 B.
    m = load_model("Qwen/Qwen3-30B-A3B")
    assert weight_bytes_per_gpu(m, pp=2, reads=True) == 30_532_124_672
    assert weight_bytes_per_gpu(m, pp=2) == 31_154_454_528  # memory: both tables
