"""Hunt 17 (cfg17): config.json families read the way vLLM 0.11's model files read them
(ERNIE-4.5 and Hunyuan MoE names), and mutated configs refused in one line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kvplan.costs.memory.params import param_counts
from kvplan.specs.hf_config import parse_config
from kvplan.specs.kv import kv_spec
from tests.conftest import assert_one_line_error, run_cli


def _write(tmp_path: Path, name: str, cfg: dict[str, Any]) -> str:
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(cfg))
    return str(path)


def _ernie_21b() -> dict[str, Any]:
    """baidu/ERNIE-4.5-21B-A3B-PT config.json (as quoted in MindIE's ErniemoeConfig tests and
    vLLM's own ernie45_moe dry-run test): 64 routed experts (``moe_num_experts``), top-6
    (``moe_k``), 2 shared experts, layer 0 dense (``moe_layer_start_index: 1``)."""
    return {
        "architectures": ["Ernie4_5_MoeForCausalLM"], "model_type": "ernie4_5_moe",
        "hidden_act": "silu", "hidden_size": 2560, "intermediate_size": 12288,
        "max_position_embeddings": 131072, "num_attention_heads": 20,
        "num_key_value_heads": 4, "num_hidden_layers": 28, "rms_norm_eps": 1e-05,
        "vocab_size": 103424, "rope_theta": 500000, "tie_word_embeddings": True,
        "use_bias": False, "moe_num_experts": 64, "moe_num_shared_experts": 2,
        "moe_layer_start_index": 1, "moe_layer_end_index": 27, "moe_intermediate_size": 1536,
        "moe_capacity": [64, 64, 64], "moe_gate": "topk", "moe_k": 6, "moe_layer_interval": 1,
        "moe_use_aux_free": True, "num_nextn_predict_layers": 1, "torch_dtype": "bfloat16"}


def _hunyuan_a13b() -> dict[str, Any]:
    """tencent/Hunyuan-A13B-Instruct config.json (fields kvplan reads): ``num_experts`` 64,
    per-layer lists ``moe_topk`` [8]*32, ``moe_intermediate_size`` [3072]*32 and
    ``num_shared_expert`` [1]*32, ``use_mixed_mlp_moe`` true."""
    return {
        "architectures": ["HunYuanMoEV1ForCausalLM"], "model_type": "hunyuan_v1_moe",
        "attention_bias": False, "attention_head_dim": 128, "cla_share_factor": 2,
        "head_dim": 128, "hidden_act": "silu", "hidden_size": 4096, "intermediate_size": 3072,
        "max_position_embeddings": 32768, "mlp_bias": False,
        "moe_intermediate_size": [3072] * 32, "moe_layer_num_skipped": 0,
        "moe_topk": [8] * 32, "num_attention_heads": 32, "num_experts": 64,
        "num_hidden_layers": 32, "num_key_value_heads": 8, "num_shared_expert": [1] * 32,
        "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "tie_word_embeddings": True,
        "torch_dtype": "bfloat16", "use_cla": False, "use_mixed_mlp_moe": True,
        "use_qk_norm": True, "vocab_size": 128167}


def test_ernie45_moe_experts_are_read_from_its_own_keys() -> None:
    # kvplan read no expert count from moe_num_experts and priced ERNIE-4.5-21B-A3B as a
    # dense 3.3B model (capacity "weights 6.27 GiB"). vLLM ernie45_moe.py: layers
    # moe_layer_start_index..moe_layer_end_index hold Ernie4_5_MoeMoE: a gate 64 x 2560 and
    # e_score_correction_bias (64), FusedMoE(64 experts, top_k=moe_k, 1536 wide), shared
    # experts 1536 x moe_num_shared_experts wide; layer 0 a dense MLP 12288 wide.
    m = parse_config(_ernie_21b(), name="ernie", file="ernie.json")
    assert m.moe is not None
    assert (m.moe.num_experts, m.moe.experts_per_token) == (64, 6)
    assert (m.moe.shared_expert_intermediate_size, m.moe.first_dense_layers) == (3072, 1)
    c = param_counts(m)
    assert c.experts == 27 * 64 * 3 * 2560 * 1536 == 20_384_317_440
    assert c.shared_experts == 27 * 3 * 2560 * 3072 == 637_009_920
    assert c.router == 27 * (64 * 2560 + 64) == 4_425_408
    assert c.dense_mlp == 3 * 2560 * 12288 == 94_371_840
    # 21.8B parameters in all ("ERNIE-4.5-21B-A3B": 21B total, 3B active)
    assert c.total == 21_825_437_888


def test_ernie45_moe_layer_range_vllm_cannot_be_priced_is_refused(tmp_path: Path) -> None:
    # An interval of 2 puts experts on every 2nd layer from the start index on (vLLM:
    # (i + 1) % interval == 0): layers 1, 3, ..., 27 MoE, the 14 others dense.
    c = param_counts(parse_config({**_ernie_21b(), "moe_layer_interval": 2}, name="e",
                                  file="e.json"))
    assert c.experts == 14 * 64 * 3 * 2560 * 1536 and c.dense_mlp == 14 * 3 * 2560 * 12288
    # experts on layer 0 only (end index 0): refused as a range, not "must be positive"
    cfg = {**_ernie_21b(), "moe_layer_start_index": 0, "moe_layer_end_index": 0}
    result = run_cli("kv", _write(tmp_path, "e0", cfg))
    assert_one_line_error(result)
    assert "moe_layer_end_index" in result.err and "before the last layer" in result.err


def test_hunyuan_per_layer_lists_are_read() -> None:
    # kvplan refused Hunyuan-A13B: "field 'moe_topk' ... must be a whole number, got [8, 8,
    # ...]". vLLM hunyuan_v1.py reads moe_topk, moe_intermediate_size and num_shared_expert
    # per layer from a list; shared MLP = intermediate_size x num_shared_expert wide.
    m = parse_config(_hunyuan_a13b(), name="hy", file="hy.json")
    assert m.moe is not None
    assert (m.moe.num_experts, m.moe.experts_per_token) == (64, 8)
    assert m.moe.moe_intermediate_size == 3072
    assert m.moe.shared_expert_intermediate_size == 3072
    c = param_counts(m)
    assert c.experts == 32 * 64 * 3 * 4096 * 3072 == 77_309_411_328
    assert c.shared_experts == 32 * 3 * 4096 * 3072 == 1_207_959_552
    assert c.router == 32 * 64 * 4096
    # KV: 32 layers x 8 KV heads x 128 x 2 (K, V) x 2 bytes = 131,072 bytes/token
    assert kv_spec(m).bytes_per_token == 131_072


def test_hunyuan_uneven_per_layer_lists_are_refused(tmp_path: Path) -> None:
    cfg = {**_hunyuan_a13b(), "moe_topk": [8] * 31 + [4]}
    result = run_cli("kv", _write(tmp_path, "h", cfg))
    assert_one_line_error(result)
    assert "moe_topk" in result.err and "per layer" in result.err


def test_per_layer_lists_are_hunyuan_only(tmp_path: Path) -> None:
    # Only vLLM hunyuan_v1.py indexes a per-layer list; qwen3_moe.py passes
    # num_experts_per_tok to FusedMoE as an int, so a list there is refused, naming it.
    cfg = {"model_type": "qwen3_moe", "hidden_size": 2048, "num_hidden_layers": 4,
           "num_attention_heads": 32, "num_key_value_heads": 4, "head_dim": 128,
           "num_experts": 128, "num_experts_per_tok": [8, 8, 8, 8],
           "moe_intermediate_size": 768, "vocab_size": 151936, "intermediate_size": 6144}
    result = run_cli("kv", _write(tmp_path, "q", cfg))
    assert_one_line_error(result)
    assert "'num_experts_per_tok'" in result.err


def _arctic() -> dict[str, Any]:
    """Snowflake/snowflake-arctic-instruct config.json (fields kvplan reads): 128 experts,
    top-2, every layer MoE (``moe_layer_frequency: 1``) with a residual dense MLP."""
    return {
        "architectures": ["ArcticForCausalLM"], "model_type": "arctic", "hidden_act": "silu",
        "hidden_size": 7168, "intermediate_size": 4864, "max_position_embeddings": 4096,
        "moe_layer_frequency": 1, "num_attention_heads": 56, "num_experts_per_tok": 2,
        "num_hidden_layers": 35, "num_key_value_heads": 8, "num_local_experts": 128,
        "parallel_attn_mlp_res": True, "rms_norm_eps": 1e-05, "rope_theta": 10000,
        "sliding_window": None, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
        "use_residual": True, "vocab_size": 32000}


def test_arctic_residual_mlp_is_priced() -> None:
    # kvplan left out Arctic's residual MLP: 473.19B parameters. vLLM arctic.py builds, on
    # every MoE layer with use_residual, ``residual_mlp = ArcticMLP(is_residual_mlp=True)``
    # whose ffn_dim is hidden_size: w13 2 x 7168 x 7168 + w2 7168 x 7168 per layer
    # (5.39B in 35 layers; "Arctic: 480B parameters").
    m = parse_config(_arctic(), name="arctic", file="arctic.json")
    c = param_counts(m)
    assert c.shared_experts == 35 * 3 * 7168 * 7168 == 5_394_923_520
    assert c.experts == 35 * 128 * 3 * 7168 * 4864
    assert 478e9 < c.total < 479e9
    # KV: 35 layers x 8 KV heads x 128 (7168 / 56) x 2 x 2 bytes
    assert kv_spec(m).bytes_per_token == 143_360


def _chatglm3() -> dict[str, Any]:
    """THUDM/chatglm3-6b config.json (fields kvplan reads)."""
    return {
        "architectures": ["ChatGLMModel"], "model_type": "chatglm", "add_bias_linear": False,
        "add_qkv_bias": True, "ffn_hidden_size": 13696, "hidden_size": 4096,
        "kv_channels": 128, "multi_query_attention": True, "multi_query_group_num": 2,
        "num_attention_heads": 32, "num_layers": 28, "padded_vocab_size": 65024,
        "rmsnorm": True, "seq_length": 8192, "torch_dtype": "float16",
        "tie_word_embeddings": False}


def test_chatglm_group_num_read_only_with_multi_query_attention(tmp_path: Path) -> None:
    # vLLM chatglm.py GLMAttention: total_num_kv_heads = multi_query_group_num if
    # config.multi_query_attention else num_attention_heads. kvplan read the group number
    # either way: 28,672 bytes/token for an MHA config that caches 458,752.
    gqa = run_cli("kv", _write(tmp_path, "glm", _chatglm3()), "--json").json()
    assert gqa["bytes_per_token"] == 2 * 28 * 2 * 128 * 2 == 28_672
    mha = {**_chatglm3(), "multi_query_attention": False}
    out = run_cli("kv", _write(tmp_path, "glm-mha", mha), "--json").json()
    assert out["bytes_per_token"] == 2 * 28 * 32 * 128 * 2 == 458_752


def test_hunyuan_cross_layer_attention_is_refused(tmp_path: Path) -> None:
    # use_cla: vLLM hunyuan_v1.py builds every layer with layer_id % cla_share_factor != 0 as
    # HunYuanCrossAttention (AttentionType.ENCODER_DECODER) reading the previous layer's K/V;
    # kvplan priced each of those layers as its own full-attention cache (131,072 B/token).
    result = run_cli("kv", _write(tmp_path, "hy", {**_hunyuan_a13b(), "use_cla": True}))
    assert_one_line_error(result)
    assert "'use_cla'" in result.err



def _llama4(experts: int, step: int) -> dict[str, Any]:
    """meta-llama/Llama-4-Scout-17B-16E (16 experts, ``interleave_moe_layer_step`` 1) and
    Llama-4-Maverick-17B-128E (128 experts, step 2) config.json text_config (fields kvplan
    reads): experts and the shared expert ``intermediate_size`` 8192 wide, dense layers
    ``intermediate_size_mlp`` 16384 wide."""
    text = {"attention_chunk_size": 8192, "head_dim": 128, "hidden_act": "silu",
            "hidden_size": 5120, "interleave_moe_layer_step": step, "intermediate_size": 8192,
            "intermediate_size_mlp": 16384, "max_position_embeddings": 1048576,
            "model_type": "llama4_text", "num_attention_heads": 40, "num_experts_per_tok": 1,
            "num_hidden_layers": 48, "num_key_value_heads": 8, "num_local_experts": experts,
            "rms_norm_eps": 1e-05, "rope_theta": 500000.0, "vocab_size": 202048}
    return {"architectures": ["Llama4ForConditionalGeneration"], "model_type": "llama4",
            "text_config": text, "tie_word_embeddings": False, "torch_dtype": "bfloat16"}


def test_llama4_shared_expert_and_interleaved_moe_layers() -> None:
    # vLLM llama4.py: Llama4DecoderLayer is MoE where interleave_moe_layer_step > 0 and
    # (i + 1) % step == 0, else LlamaMLP(intermediate_size_mlp); Llama4MoE holds FusedMoE
    # (intermediate_size) and a shared_expert LlamaMLP(intermediate_size). kvplan read every
    # layer as MoE without the shared expert: Maverick 778.2B (is "400B"), Scout 101.7B
    # (is "109B" with its vision tower, "17B active").
    h, moe, dense = 5120, 3 * 5120 * 8192, 3 * 5120 * 16384
    attn = 2 * h * 5120 + 2 * h * 1024
    embed = 2 * 202048 * h  # embedding + untied lm_head (202048 is a multiple of 64)
    scout = param_counts(parse_config(_llama4(16, 1), name="scout", file="s.json"))
    assert scout.shared_experts == 48 * moe
    assert scout.experts == 48 * 16 * moe and scout.dense_mlp == 0
    assert scout.total == embed + 48 * (attn + 17 * moe + 16 * h + 2 * h) + h
    assert 17.1e9 < scout.active < 17.3e9
    maverick = param_counts(parse_config(_llama4(128, 2), name="mav", file="m.json"))
    assert maverick.experts == 24 * 128 * moe and maverick.shared_experts == 24 * moe
    assert maverick.dense_mlp == 24 * dense
    assert 400e9 < maverick.total < 401e9


def test_llama4_step_absent_means_every_layer_moe_and_zero_means_dense() -> None:
    # Llama4TextConfig's default interleave_moe_layer_step is 1; vLLM llama4.py: step 0 = no
    # MoE layer (every layer LlamaMLP(intermediate_size_mlp)).
    cfg = _llama4(16, 1)
    del cfg["text_config"]["interleave_moe_layer_step"]
    m = parse_config(cfg, name="scout", file="s.json")
    assert m.moe is not None and m.moe.interleave == 1 and m.intermediate_size == 8192
    cfg["text_config"]["interleave_moe_layer_step"] = 0
    dense = parse_config(cfg, name="dense", file="d.json")
    assert dense.moe is None and dense.intermediate_size == 16384


def test_bailing_num_shared_experts_are_priced() -> None:
    # inclusionAI/Ling-lite config.json (fields kvplan reads). vLLM bailing_moe.py: shared
    # experts BailingMLP(moe_intermediate_size x num_shared_experts); kvplan read no shared
    # expert from num_shared_experts (0 params).
    cfg = {"architectures": ["BailingMoeForCausalLM"], "model_type": "bailing_moe",
           "hidden_size": 2048, "intermediate_size": 5632, "moe_intermediate_size": 1408,
           "num_experts": 64, "num_shared_experts": 2, "num_experts_per_tok": 6,
           "num_hidden_layers": 28, "num_attention_heads": 16, "num_key_value_heads": 4,
           "vocab_size": 126464, "max_position_embeddings": 16384, "torch_dtype": "bfloat16",
           "tie_word_embeddings": False}
    m = parse_config(cfg, name="ling", file="ling.json")
    assert m.moe is not None and m.moe.shared_expert_intermediate_size == 2 * 1408
    assert param_counts(m).shared_experts == 28 * 3 * 2048 * 2816 == 484_442_112


def _dbrx() -> dict[str, Any]:
    """databricks/dbrx-instruct config.json: DbrxConfig keeps the KV heads in attn_config and
    the experts in ffn_config, the layers in n_layers."""
    return {"architectures": ["DbrxForCausalLM"], "model_type": "dbrx",
            "attn_config": {"clip_qkv": 8, "kv_n_heads": 8, "rope_theta": 500000},
            "d_model": 6144, "ffn_config": {"ffn_hidden_size": 10752, "moe_jitter_eps": 0.01,
                                            "moe_num_experts": 16, "moe_top_k": 4},
            "max_seq_len": 32768, "n_heads": 48, "n_layers": 40,
            "tie_word_embeddings": False, "torch_dtype": "bfloat16", "vocab_size": 100352}


def test_dbrx_nested_attn_and_ffn_config_are_read(tmp_path: Path) -> None:
    # kvplan refused DBRX: "field 'num_hidden_layers' ... is missing". vLLM dbrx.py:
    # n_layers blocks; DbrxAttention total_num_kv_heads = attn_config.kv_n_heads, head_dim =
    # d_model // n_heads; DbrxExperts FusedMoE(ffn_config.moe_num_experts,
    # top_k=moe_top_k, intermediate_size=ffn_hidden_size). KV: 40 x 8 x 128 x 2 x 2 bytes.
    out = run_cli("kv", _write(tmp_path, "dbrx", _dbrx()), "--json").json()
    assert out["bytes_per_token"] == 40 * 8 * 128 * 2 * 2 == 163_840
    m = parse_config(_dbrx(), name="dbrx", file="dbrx.json")
    assert m.moe is not None and (m.moe.num_experts, m.moe.experts_per_token) == (16, 4)
    c = param_counts(m)
    assert c.experts == 40 * 16 * 3 * 6144 * 10752
    assert 131e9 < c.total < 132e9 and 36e9 < c.active < 37e9  # "132B total, 36B active"
    bad = {**_dbrx(), "attn_config": {"kv_n_heads": 7}}
    result = run_cli("kv", _write(tmp_path, "bad", bad))
    assert_one_line_error(result)
    assert "'attn_config.kv_n_heads'" in result.err


def test_mpt_is_read_from_its_own_names(tmp_path: Path) -> None:
    # mosaicml/mpt-7b config.json (fields kvplan reads): d_model, n_heads, n_layers,
    # expansion_ratio 4, max_seq_len; vLLM mpt.py: MHA unless attn_config.kv_n_heads, a
    # plain (up, down) GELU MLP, lm_head = wte. kvplan refused it ("num_hidden_layers is
    # missing"). KV: 32 layers x 32 heads x 128 x 2 x 2 bytes; 6.65B parameters ("MPT-7B").
    cfg = {"architectures": ["MPTForCausalLM"], "model_type": "mpt", "d_model": 4096,
           "n_heads": 32, "n_layers": 32, "expansion_ratio": 4, "max_seq_len": 2048,
           "no_bias": True, "attn_config": {"alibi": True, "clip_qkv": None},
           "vocab_size": 50432, "torch_dtype": "bfloat16"}
    assert run_cli("kv", _write(tmp_path, "mpt", cfg), "--json").json()[
        "bytes_per_token"] == 32 * 32 * 128 * 2 * 2 == 524_288
    c = param_counts(parse_config(cfg, name="mpt", file="mpt.json"))
    assert c.total == 50432 * 4096 + 32 * (4 * 4096**2 + 2 * 4096 * 16384 + 2 * 4096) + 4096
    gqa = {**cfg, "attn_config": {"kv_n_heads": 8}}
    assert run_cli("kv", _write(tmp_path, "mpt8", gqa), "--json").json()[
        "bytes_per_token"] == 32 * 8 * 128 * 2 * 2


def test_qwen_v1_mlp_is_half_its_intermediate_size() -> None:
    # Qwen/Qwen-7B config.json (fields kvplan reads). vLLM qwen.py: QWenBlock's mlp is
    # QWenMLP(hidden_size, config.intermediate_size // 2) and c_attn (fused q/k/v) has a
    # bias, c_proj none. kvplan priced a 22016-wide MLP: 11.98B parameters (is "7.7B").
    cfg = {"architectures": ["QWenLMHeadModel"], "model_type": "qwen", "hidden_size": 4096,
           "intermediate_size": 22016, "kv_channels": 128, "max_position_embeddings": 8192,
           "no_bias": True, "num_attention_heads": 32, "num_hidden_layers": 32,
           "seq_length": 8192, "tie_word_embeddings": False, "vocab_size": 151936}
    m = parse_config(cfg, name="qwen", file="qwen.json")
    assert m.intermediate_size == 11008
    c = param_counts(m)
    per_layer = 4 * 4096**2 + 3 * 4096 + 3 * 4096 * 11008 + 2 * 4096
    assert c.total == 2 * 151936 * 4096 + 32 * per_layer + 4096 == 7_721_324_544


def test_starcoder2_without_tie_key_ties_its_lm_head() -> None:
    # bigcode/starcoder2-7b config.json has no tie_word_embeddings; Starcoder2Config does not
    # set one, so PretrainedConfig's True holds and vLLM starcoder2.py makes lm_head the
    # embedding table. kvplan priced a separate lm_head: 7.40B (is 7.17B, "StarCoder2-7B").
    cfg = {"architectures": ["Starcoder2ForCausalLM"], "model_type": "starcoder2",
           "hidden_size": 4608, "intermediate_size": 18432, "num_attention_heads": 36,
           "num_key_value_heads": 4, "num_hidden_layers": 32, "vocab_size": 49152,
           "max_position_embeddings": 16384, "hidden_act": "gelu_pytorch_tanh",
           "sliding_window": 4096, "torch_dtype": "bfloat16", "use_bias": True}
    m = parse_config(cfg, name="sc2", file="sc2.json")
    assert m.tie_word_embeddings
    c = param_counts(m)
    assert c.lm_head == 0 and 7.17e9 < c.total < 7.18e9


def test_moe_every_nth_layer_is_read_per_family(tmp_path: Path) -> None:
    # vLLM builds experts where (i + 1) % step == 0, the other layers a dense MLP
    # intermediate_size wide: arctic.py moe_layer_frequency (kvplan refused 2), qwen3_moe.py
    # decoder_sparse_step (kvplan priced every layer MoE). Arctic at 2: layers 1, 3, ..., 33
    # (17) MoE with the residual MLP, 18 dense.
    arctic = param_counts(parse_config({**_arctic(), "moe_layer_frequency": 2}, name="a",
                                       file="a.json"))
    assert arctic.experts == 17 * 128 * 3 * 7168 * 4864
    assert arctic.shared_experts == 17 * 3 * 7168 * 7168
    assert arctic.dense_mlp == 18 * 3 * 7168 * 4864
    qwen = {"model_type": "qwen3_moe", "hidden_size": 2048, "num_hidden_layers": 4,
            "num_attention_heads": 32, "num_key_value_heads": 4, "head_dim": 128,
            "num_experts": 128, "num_experts_per_tok": 8, "moe_intermediate_size": 768,
            "vocab_size": 151936, "intermediate_size": 6144, "decoder_sparse_step": 2}
    c = param_counts(parse_config(qwen, name="q", file="q.json"))
    assert c.experts == 2 * 128 * 3 * 2048 * 768 and c.dense_mlp == 2 * 3 * 2048 * 6144
    result = run_cli("kv", _write(tmp_path, "q", {**qwen, "mlp_only_layers": [0]}))
    assert_one_line_error(result)
    assert "'mlp_only_layers'" in result.err


def _omni() -> dict[str, Any]:
    """Qwen/Qwen2.5-Omni-7B config.json (fields kvplan reads): the language model under
    thinker_config.text_config, audio and vision encoders beside it."""
    text = {"model_type": "qwen2_5_omni_text", "hidden_size": 3584, "intermediate_size": 18944,
            "num_hidden_layers": 28, "num_attention_heads": 28, "num_key_value_heads": 4,
            "max_position_embeddings": 32768, "sliding_window": 32768,
            "use_sliding_window": False, "vocab_size": 152064}
    thinker = {"model_type": "qwen2_5_omni_thinker", "text_config": text,
               "audio_config": {"d_model": 1280}, "vision_config": {"depth": 32},
               "torch_dtype": "bfloat16"}
    return {"architectures": ["Qwen2_5OmniModel"], "model_type": "qwen2_5_omni",
            "thinker_config": thinker, "talker_config": {"hidden_size": 896}}


def test_qwen_omni_thinker_text_config_is_read(tmp_path: Path) -> None:
    # vLLM get_hf_text_config: a config with thinker_config serves
    # thinker_config.text_config. kvplan refused ("hidden_size is missing"). KV: 28 layers x
    # 4 KV heads x 128 x 2 x 2 bytes; capacity still refuses its unpriced encoders.
    path = _write(tmp_path, "omni", _omni())
    assert run_cli("kv", path, "--json").json()["bytes_per_token"] == 57_344
    result = run_cli("capacity", path)
    assert_one_line_error(result)
    assert "thinker_config" in result.err


def test_compact_text_config_takes_its_class_defaults(tmp_path: Path) -> None:
    # llava-hf/llava-1.5-7b-hf and llava-v1.6-mistral-7b-hf config.json keep only what
    # differs from LlamaConfig / MistralConfig in text_config (no hidden_size, layers or
    # heads); transformers builds the text config from the class defaults (Llama: 4096
    # hidden, 32 layers, 32 heads, MHA; Mistral: 8 KV heads) and vLLM sizes the KV cache
    # from it. kvplan refused: "hidden_size is missing". KV: 32 x 32 x 128 x 2 x 2 bytes
    # (Llama), 32 x 8 x 128 x 2 x 2 (Mistral).
    llava = {"architectures": ["LlavaForConditionalGeneration"], "model_type": "llava",
             "text_config": {"architectures": ["LlamaForCausalLM"], "model_type": "llama",
                             "max_position_embeddings": 4096, "rms_norm_eps": 1e-05,
                             "torch_dtype": "float16", "vocab_size": 32064},
             "vision_config": {"hidden_size": 1024, "model_type": "clip_vision_model"}}
    out = run_cli("kv", _write(tmp_path, "llava", llava), "--json").json()
    assert out["bytes_per_token"] == 32 * 32 * 128 * 2 * 2 == 524_288
    next_mistral = {**llava, "model_type": "llava_next", "text_config": {
        "architectures": ["MistralForCausalLM"], "intermediate_size": 14336,
        "max_position_embeddings": 32768, "model_type": "mistral", "num_key_value_heads": 8,
        "rope_theta": 1000000.0, "sliding_window": None, "torch_dtype": "bfloat16",
        "vocab_size": 32064}}
    out = run_cli("kv", _write(tmp_path, "next", next_mistral), "--json").json()
    assert out["bytes_per_token"] == 32 * 8 * 128 * 2 * 2 == 131_072
    del next_mistral["text_config"]["num_key_value_heads"]  # MistralConfig's default: 8
    out = run_cli("kv", _write(tmp_path, "next8", next_mistral), "--json").json()
    assert out["bytes_per_token"] == 131_072
    # a root config (no wrapper) missing its sizes is still refused, naming the field
    result = run_cli("kv", _write(tmp_path, "root", {**llava["text_config"]}))
    assert_one_line_error(result)
    assert "'hidden_size'" in result.err


def test_chatglm_multi_query_without_group_num_has_one_kv_head(tmp_path: Path) -> None:
    # ChatGLMConfig's multi_query_group_num defaults to 1; vLLM chatglm.py reads it when
    # multi_query_attention is set. kvplan fell back to MHA (32 KV heads, 458,752 B/token).
    cfg = {**_chatglm3()}
    del cfg["multi_query_group_num"]
    out = run_cli("kv", _write(tmp_path, "glm1", cfg), "--json").json()
    assert out["bytes_per_token"] == 2 * 28 * 1 * 128 * 2 == 14_336
