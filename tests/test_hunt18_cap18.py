"""Hunt 18 (cap18): `kvplan capacity` / `kvplan kv` against vLLM 0.11.0's own KV arithmetic
(vllm/v1/core/kv_cache_utils.py, vllm/v1/kv_cache_interface.py, model_executor/models/config.py)
for hybrid, MLA and sliding-window models."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.conftest import run_cli

CATALOG = Path(__file__).parent.parent / "src" / "kvplan" / "specs" / "catalog" / "models"
GEMMA2 = CATALOG / "google--gemma-2-9b-it.json"
LLAMA32_3B = CATALOG / "meta-llama--Llama-3.2-3B.json"


def _write(tmp_path: Path, name: str, cfg: dict[str, Any]) -> str:
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(cfg))
    return str(path)


def _gemma2_9b(tmp_path: Path, layers: int) -> str:
    """google/gemma-2-9b-it's config.json (42 layers, 8 KV heads x 256, window 4096, 8,192
    positions) cut to ``layers`` layers: Gemma2Config makes every odd layer global."""
    cfg = json.loads(GEMMA2.read_text())
    cfg["num_hidden_layers"] = layers
    return _write(tmp_path, f"gemma2-{layers}", cfg)


def test_group_size_is_the_smallest_spec_count_as_in_vllm_0_11(tmp_path: Path) -> None:
    # vLLM 0.11.0 _get_kv_cache_groups_uniform_page_size: group_size = min(layers per spec),
    # nothing else (the "max when max < 1.25 x min" rule is vllm#29303, 0.12). 27 Gemma-2
    # layers: 14 sliding (even) + 13 full (odd) -> group size 13: the 14 sliding layers make
    # cdiv(14, 13) = 2 groups (12 padding), the full ones 1: 3 groups of 13.
    # Page 16 x 2 x 8 x 256 x 2 B = 131,072 B; 20 GiB // 131,072 // 13 = 163,840 // 13 =
    # 12,603 blocks; 12,603 // 3 x 16 = 67,216 tokens. Pages per request at 8,192 tokens:
    # full cdiv(8192, 16) = 512 + 2 sliding groups x (cdiv(min(4095 + 8192, 8192), 16) + 1 =
    # 513) = 1,538; 12,603 / 1,538 = 8.19x. kvplan took the 14 as the group size: 2 groups,
    # 11,702 blocks, 93,616 tokens, 11.42x.
    r = run_cli("capacity", _gemma2_9b(tmp_path, 27), "--kv-cache-memory", "20GiB", "--json")
    assert r.code == 0, r.err
    doc = r.json()
    assert (doc["layers_per_group"], doc["num_padding_layers"]) == (13, 12)
    assert (doc["num_blocks"], doc["kv_cache_tokens"]) == (12_603, 67_216)
    assert round(doc["max_concurrency"], 2) == 8.19


NEXT = "Qwen/Qwen3-Next-80B-A3B-Thinking"
SETTING = "Setting attention block size to"


def test_no_setting_attention_block_line_when_the_asked_block_is_large_enough() -> None:
    # vLLM 0.11 HybridAttentionMambaModelConfig logs "Setting attention block size to N
    # tokens ..." only when it changes the block (block_size None or < attn_block_size).
    # Qwen3-Next TP 16: state (3 x 8192/16 + 2 x 128 x 128) x 2 B = 68,608 B, attention 2 x 1
    # x 256 x 2 = 1,024 B/token -> attn_block 16 x cdiv(68,608, 16,384) = 80; --block-size 128
    # >= 80 is kept, so no "Setting" line; the state page is still padded to 128 x 1,024 =
    # 131,072 B: (131,072 - 68,608) / 68,608 = 91.04%. kvplan printed "Setting attention block
    # size to 128 tokens".
    args = ("capacity", NEXT, "-tp", "16", "--kv-cache-memory", "40GiB")
    kept = run_cli(*args, "--block-size", "128")
    assert kept.code == 0, kept.err
    assert SETTING not in kept.out
    assert "Padding mamba page size by 91.04%" in kept.out
    assert f"{SETTING} 80 tokens" in run_cli(*args).out  # the default block is raised
    # TP 8: attn_block 16 x cdiv(137,216, 16,384) = 144 > 128: raised, logged.
    raised = run_cli("capacity", NEXT, "-tp", "8", "--kv-cache-memory", "40GiB",
                     "--block-size", "128")
    assert f"{SETTING} 144 tokens" in raised.out


def test_a_cache_too_small_for_one_request_does_not_blame_one_block() -> None:
    # gemma-3-27b-it, 10 MiB of KV: one block of 16 tokens in every layer is 62 x 128 KiB =
    # 7.75 MiB and fits; what does not is a 1-token request, for a sliding-window layer
    # takes cdiv(min(1023 + 8192, 1), 16) + 1 = 2 pages from its first token (vLLM
    # SlidingWindowSpec.max_memory_usage_bytes): 52 x 2 + 10 x 1 = 114 pages x 128 KiB =
    # 14.25 MiB. kvplan said "not even one block of 16 tokens fits".
    r = run_cli("capacity", "google/gemma-3-27b-it", "--kv-cache-memory", "10MiB")
    assert r.code == 1
    assert "not even one block" not in r.err
    assert "not even a 1-token request fits: it takes 114 pages of 128.00 KiB = 14.25 MiB" in r.err
    # Nemotron-H-56B, 512 MiB: the attention block is 2,080 tokens, not 16; a 1-token request
    # takes 54 state pages + 10 attention pages of 8,519,680 B = 545,259,520 B = 520.00 MiB.
    n = run_cli("capacity", "nvidia/Nemotron-H-56B-Base-8K", "--kv-cache-memory", "512MiB")
    assert n.code == 1
    assert "not even a 1-token request fits: it takes 64 pages of 8.12 MiB = 520.00 MiB" in n.err


def test_a_block_size_the_default_attention_backend_cannot_page_is_refused(
        tmp_path: Path) -> None:
    # vLLM 0.11 picks FlashAttention for non-MLA attention on SM 8.x / 9.x GPUs (Triton for
    # sinks or fp8 KV on SM 8.x; Triton / ROCm kernels on MI300X), and each of those asserts
    # at KV cache allocation "Block size must be a multiple of 16." (flash_attn.py,
    # triton_attn.py, rocm_attn.py get_kv_cache_shape). kvplan sized Llama-3.1-8B on an H100
    # at --block-size 8: 420,832 tokens, 3.21x.
    for gpu in ("H100", "A100-80GB-SXM", "MI300X"):
        r = run_cli("capacity", "meta-llama/Llama-3.1-8B", "--gpu", gpu, "--block-size", "8")
        assert r.code == 2 and not r.out and r.err.count("\n") == 1, r.err
        assert "--block-size 8" in r.err and "multiple of 16" in r.err
    # Blackwell defaults to FlashInfer (any page size); MLA off Hopper/Blackwell runs Triton
    # MLA (any block); a hybrid's attention block is raised to a multiple of 16 anyway.
    ok = (("meta-llama/Llama-3.1-8B", "B200"), ("deepseek-ai/DeepSeek-V2-Lite", "A100-80GB-SXM"),
          ("nvidia/Nemotron-H-56B-Base-8K", "H200"))
    for model, gpu in ok:
        r = run_cli("capacity", model, "--gpu", gpu, "--block-size", "8", "--json")
        assert r.code == 0, (model, r.err)
    assert run_cli("capacity", "meta-llama/Llama-3.1-8B", "--block-size", "32").code == 0
    # gpt-oss's sinks run Triton on an A100 (refused); a head size FlashAttention lacks (80)
    # falls back to FlexAttention, which pages any block.
    r = run_cli("capacity", "openai/gpt-oss-20b", "--gpu", "A100-80GB-SXM", "--block-size", "8")
    assert r.code == 2 and "(Triton)" in r.err, r.err
    cfg = json.loads(Path(LLAMA32_3B).read_text())
    cfg.update(hidden_size=2560, num_attention_heads=32, num_key_value_heads=8, head_dim=80)
    r = run_cli("capacity", _write(tmp_path, "head80", cfg), "--block-size", "8", "--json")
    assert r.code == 0, r.err


def _deepseek_v32(tmp_path: Path) -> str:
    """DeepSeek-V3's config with V3.2's sparse-attention indexer (index_topk 2048, index_head_dim
    128, index_n_heads 64), as deepseek-ai/DeepSeek-V3.2-Exp ships it."""
    cfg = json.loads((CATALOG / "deepseek-ai--DeepSeek-V3.json").read_text())
    cfg.update(architectures=["DeepseekV32ForCausalLM"], model_type="deepseek_v32",
               index_topk=2048, index_head_dim=128, index_n_heads=64)
    return _write(tmp_path, "deepseek-v32", cfg)


def test_sparse_mla_under_pp_divides_by_the_whole_models_page(tmp_path: Path) -> None:
    # vLLM 0.11: DeepSeek-V3.2's latent (fp8_ds_mla, 656 B) and indexer (132 B) layers make one
    # UniformTypeKVCacheSpecs group built from every stage's layers (get_kv_cache_configs), and
    # get_kv_cache_config_from_groups sizes each worker with num_blocks = available //
    # group.kv_cache_spec.page_size_bytes: the whole model's page, 61 x 64 x 788 = 3,076,352 B,
    # not the stage's 31 layers. 20 GiB // 3,076,352 = 6,980 blocks at PP 2 as at PP 1;
    # 6,980 x 64 = 446,720 tokens; 6,980 / cdiv(163,840, 64) = 2.73x. kvplan divided by the
    # stage's layers: 13,736 blocks, 879,104 tokens, 5.37x.
    path = _deepseek_v32(tmp_path)
    for pp in ("1", "2"):
        r = run_cli("capacity", path, "-tp", "8", "-pp", pp, "--gpu", "H200",
                    "--kv-cache-memory", "20GiB", "--json")
        assert r.code == 0, r.err
        doc = r.json()
        assert (doc["num_blocks"], doc["kv_cache_tokens"]) == (6_980, 446_720), pp
        assert round(doc["max_concurrency"], 2) == 2.73
