"""Hunt 16 (capacity): vLLM 0.11 memory arithmetic for dense and MoE text models under unusual
but valid settings."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvplan.analysis.plan.space import valid_tp_degrees
from kvplan.errors import InputError
from kvplan.specs.catalog import load_model
from kvplan.specs.kv import check_tensor_parallel
from tests.conftest import assert_one_line_error, run_cli


@pytest.mark.parametrize(
    ("model", "tp", "words"),
    [
        # Llama-2-13B: 40 heads divide by 5, but the MLP's 13,824 rows do not (2,764.8):
        # MergedColumnParallelLinear asserts output_size % tp_size == 0
        ("meta-llama/Llama-2-13b-hf", "5", "intermediate_size 13,824"),
        # Qwen2.5-7B: 28 heads, 4 KV heads replicated 7x at TP 28, but the 64-padded
        # vocabulary 152,064 = 2^9 x 3^3 x 11 has no factor 7: VocabParallelEmbedding's
        # divide(num_embeddings_padded, tp_size) asserts
        ("Qwen/Qwen2.5-7B", "28", "152,064 embedding rows"),
        # Falcon-7B: 71 heads (MQA) and 18,176 = 71 x 256 MLP rows split, 65,024 vocab rows do not
        ("tiiuae/falcon-7b", "71", "65,024 embedding rows"),
    ],
)
def test_tp_that_cannot_split_the_dense_shards_is_refused(model: str, tp: str,
                                                          words: str) -> None:
    r = run_cli("capacity", model, "-tp", tp)
    assert_one_line_error(r)
    assert f"--tensor-parallel-size {tp} must divide" in r.err and words in r.err


def test_tp_that_splits_every_shard_still_plans() -> None:
    # Llama-2-13B at TP 8: 40 heads -> 5, 13,824 -> 1,728, 32,000 -> 4,000 rows a GPU
    assert run_cli("capacity", "meta-llama/Llama-2-13b-hf", "-tp", "8", "--json").code == 0
    # the planner's candidates (check_tensor_parallel) skip the degrees vLLM cannot start
    llama = load_model("meta-llama/Llama-2-13b-hf")
    assert valid_tp_degrees(llama, 8) == (1, 2, 4, 8)
    with pytest.raises(InputError, match="intermediate_size 13,824"):
        check_tensor_parallel(llama, 10)


_GPT2 = {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "n_embd": 768, "n_head": 12,
         "n_layer": 12, "n_positions": 1024, "vocab_size": 50257, "torch_dtype": "float16",
         "activation_function": "gelu_new"}
_OPT = {"architectures": ["OPTForCausalLM"], "model_type": "opt", "hidden_size": 768,
        "num_attention_heads": 12, "num_hidden_layers": 12, "ffn_dim": 3072,
        "max_position_embeddings": 2048, "vocab_size": 50272, "torch_dtype": "float16",
        "activation_function": "relu", "word_embed_proj_dim": 768}


def _weights(tmp_path: Path, name: str, cfg: dict[str, object]) -> int:
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(cfg))
    r = run_cli("capacity", str(path), "--max-model-len", "1024", "--json")
    assert r.code == 0, r.err
    return int(r.json()["weights_bytes"])


@pytest.mark.parametrize("cfg", [_GPT2, {**_GPT2, "model_type": "gpt_bigcode"}, _OPT],
                         ids=["gpt2", "gpt_bigcode", "opt"])
def test_configs_omitting_tie_word_embeddings_tie_as_transformers_does(
        tmp_path: Path, cfg: dict[str, object]) -> None:
    # GPT2Config / GPTBigCodeConfig / OPTConfig leave tie_word_embeddings to PretrainedConfig's
    # True and the hub configs (openai-community/gpt2, bigcode/starcoder, facebook/opt-125m)
    # omit the key, so vLLM ties lm_head to the token table: one 50,304 x 768 fp16 table
    # (50,257 or 50,272 padded to 64), not two; untied costs 50,304 x 768 x 2 = 77,266,944 B more
    omitted = _weights(tmp_path, "omitted", cfg)
    tied = _weights(tmp_path, "tied", {**cfg, "tie_word_embeddings": True})
    untied = _weights(tmp_path, "untied", {**cfg, "tie_word_embeddings": False})
    assert omitted == tied == untied - 77_266_944


@pytest.mark.parametrize("cfg", [_GPT2, {**_GPT2, "model_type": "gpt_bigcode"}, _OPT],
                         ids=["gpt2", "gpt_bigcode", "opt"])
def test_learned_position_table_is_priced_and_no_rope_cache(tmp_path: Path,
                                                            cfg: dict[str, object]) -> None:
    # GPT-2 / BigCode wpe = nn.Embedding(max_position_embeddings, hidden) and OPT's
    # embed_positions (max_position_embeddings + 2 rows) are weights vLLM loads, and these
    # families have no rotary cache: 1,024 more positions add 1,024 x 768 x 2 B = 1,572,864 B
    # (kvplan priced a 1,024 x 64 x 2 = 131,072 B cos/sin cache instead)
    key = "n_positions" if "n_positions" in cfg else "max_position_embeddings"
    short = _weights(tmp_path, "short", {**cfg, key: 1024})
    long = _weights(tmp_path, "long", {**cfg, key: 2048})
    assert long - short == 1_572_864


_QWEN2_MOE = {"architectures": ["Qwen2MoeForCausalLM"], "model_type": "qwen2_moe",
              "hidden_size": 2048, "intermediate_size": 5632, "moe_intermediate_size": 1408,
              "shared_expert_intermediate_size": 5632, "num_experts": 60,
              "num_experts_per_tok": 4, "num_attention_heads": 16, "num_key_value_heads": 16,
              "num_hidden_layers": 24, "vocab_size": 151936, "max_position_embeddings": 8192,
              "tie_word_embeddings": False, "torch_dtype": "bfloat16"}


_GEMMA = {"architectures": ["GemmaForCausalLM"], "model_type": "gemma", "hidden_size": 3072,
          "num_attention_heads": 16, "num_key_value_heads": 16, "head_dim": 256,
          "intermediate_size": 24576, "num_hidden_layers": 28, "vocab_size": 256000,
          "max_position_embeddings": 8192, "hidden_act": "gelu", "torch_dtype": "bfloat16"}


@pytest.mark.parametrize(
    ("cfg", "extra"),
    [
        # vLLM's Qwen2MoeModel builds embed_tokens and norm, Qwen2MoeForCausalLM its lm_head,
        # with no PPMissingLayer: at PP 2 both stages hold both 151,936 x 2,048 bf16 tables
        # (622,329,856 B each) and the 2,048 x 2 B norm
        (_QWEN2_MOE, 2 * 622_329_856 + 4_096),
        # GPT-2 builds wte, wpe and ln_f on every stage (lm_head tied to wte): 50,304 x 768 +
        # 1,024 x 768 fp16 tables and a 2 x 768 x 2 B LayerNorm, 78,842,880 B
        (_GPT2, 78_842_880),
        # Gemma (1) builds embed_tokens (also its logits table) and norm on every stage:
        # 256,000 x 3,072 x 2 B = 1,572,864,000 B and 3,072 x 2 B
        (_GEMMA, 1_572_864_000 + 6_144),
    ],
    ids=["qwen2_moe", "gpt2", "gemma"],
)
def test_families_building_the_vocab_on_every_stage(tmp_path: Path, cfg: dict[str, object],
                                                    extra: int) -> None:
    # the two stages of PP 2 together hold the whole model plus the second stage's copies
    from kvplan.costs.memory.params import stage_weight_bytes, weight_bytes

    path = tmp_path / "cfg.json"
    path.write_text(json.dumps(cfg))
    m = load_model(str(path))
    stages = sum(stage_weight_bytes(m, pp=2, stage=s) for s in range(2))
    assert stages == weight_bytes(m) + extra


def test_pp_layer_partition_in_a_pasted_line_warns_it_changes_memory() -> None:
    # VLLM_PP_LAYER_PARTITION=20,12 puts 20 of Llama-3.1-8B's 32 layers on stage 0 (vLLM's
    # get_pp_indices reads it); kvplan keeps the default 16 / 16 split, which changes each
    # stage's weights and blocks, so it warns (it was listed among harmless ignored names)
    r = run_cli("capacity", "--", "VLLM_PP_LAYER_PARTITION=20,12", "vllm", "serve",
                "meta-llama/Llama-3.1-8B", "-pp", "2", "--max-model-len", "8192")
    assert r.code == 0, r.err
    assert "warning: VLLM_PP_LAYER_PARTITION ignored: it moves layers between pipeline" in r.err
    assert "note: ignored vLLM flags" not in r.out  # warned once, not also listed as harmless


_PHI2 = {"architectures": ["PhiForCausalLM"], "model_type": "phi", "hidden_size": 2560,
         "intermediate_size": 10240, "num_attention_heads": 32, "num_key_value_heads": 32,
         "num_hidden_layers": 32, "vocab_size": 51200, "max_position_embeddings": 2048,
         "partial_rotary_factor": 0.4, "hidden_act": "gelu_new", "tie_word_embeddings": False,
         "torch_dtype": "float16"}


@pytest.mark.parametrize(
    ("cfg", "params"),
    [
        # microsoft/phi-2 (2,779,683,840 parameters): vLLM's PhiMLP is fc1 -> gelu -> fc2,
        # not gated, every linear has a bias, one LayerNorm (weight + bias) per layer and a
        # biased lm_head. Per layer: qkv 3 x 2560^2 + 7,680, dense 2560^2 + 2,560,
        # fc1 / fc2 2560 x 10240 + 10,240 / + 2,560, norm 5,120 = 78,671,360; x 32 =
        # 2,517,483,520; + embed 131,072,000 + final norm 5,120 + lm_head 131,072,000 + 51,200.
        # kvplan priced a gated MLP (3 matrices): 838,236,160 more
        (_PHI2, 2_779_683_840),
        # openai-community/gpt2 (124,439,808): wte 38,597,376 + wpe 786,432 + 12 x (c_attn
        # 768 x 2304 + 2304, c_proj 768^2 + 768, c_fc 768 x 3072 + 3072, c_proj 3072 x 768 +
        # 768, 2 LayerNorms 3,072) = 12 x 7,087,872 + ln_f 1,536
        (_GPT2, 124_439_808),
        # facebook/opt-125m (125,239,296): 50,272 x 768 + (2,048 + 2) x 768 positions + 12 x
        # 7,087,872 (q, k, v, out, fc1, fc2 with biases, 2 LayerNorms) + final LayerNorm 1,536
        (_OPT, 125_239_296),
    ],
    ids=["phi-2", "gpt2", "opt-125m"],
)
def test_biased_plain_mlp_families_count_their_published_parameters(
        tmp_path: Path, cfg: dict[str, object], params: int) -> None:
    from kvplan.costs.memory.params import param_counts

    path = tmp_path / "cfg.json"
    path.write_text(json.dumps(cfg))
    assert param_counts(load_model(str(path))).total == params


_COMMAND_R = {"architectures": ["CohereForCausalLM"], "model_type": "cohere", "hidden_size": 8192,
              "intermediate_size": 22528, "num_attention_heads": 64, "num_key_value_heads": 64,
              "num_hidden_layers": 40, "vocab_size": 256000, "max_position_embeddings": 8192,
              "torch_dtype": "float16", "hidden_act": "silu", "logit_scale": 0.0625}


def test_command_r_ties_its_logits_to_the_embedding_and_has_one_norm_a_layer(
        tmp_path: Path) -> None:
    # CohereForAI/c4ai-command-r-v01 (34,980,831,232 parameters): CohereConfig's
    # tie_word_embeddings is True and its config.json omits it (vLLM's CohereForCausalLM has
    # no lm_head: logits come from embed_tokens), and CohereDecoderLayer runs attention and
    # MLP in parallel after one LayerNorm (no bias). 256,000 x 8,192 embedding 2,097,152,000
    # + 40 x (4 x 8192^2 attention + 3 x 8192 x 22528 MLP + 8,192 norm) + final norm 8,192.
    # kvplan counted a second 2,097,152,000 table and 40 more norms (4.19 GB in fp16)
    from kvplan.costs.memory.params import param_counts

    path = tmp_path / "command-r.json"
    path.write_text(json.dumps(_COMMAND_R))
    assert param_counts(load_model(str(path))).total == 34_980_831_232


_STARCODER2 = {"architectures": ["Starcoder2ForCausalLM"], "model_type": "starcoder2",
               "hidden_size": 6144, "intermediate_size": 24576, "num_attention_heads": 48,
               "num_key_value_heads": 4, "num_hidden_layers": 40, "vocab_size": 49152,
               "max_position_embeddings": 16384, "hidden_act": "gelu_pytorch_tanh",
               "sliding_window": 4096, "torch_dtype": "bfloat16", "use_bias": True,
               "tie_word_embeddings": False}


def test_starcoder2_mlp_is_plain_with_biases(tmp_path: Path) -> None:
    # bigcode/starcoder2-15b (15,957,889,024 parameters): vLLM's Starcoder2MLP is c_fc ->
    # gelu -> c_proj (2 matrices, not gated), every linear has a bias (use_bias) and the norms
    # are LayerNorms with bias. Per layer: q / o 6144^2 + 6,144 each, k / v 6144 x 512 + 512
    # each, c_fc 6144 x 24576 + 24,576, c_proj 24576 x 6144 + 6,144, 2 norms 24,576 =
    # 383,847,424; x 40 + 2 x 49,152 x 6,144 tables + final norm 12,288. kvplan priced a gated
    # MLP: 21,995,427,840 (12 GB too much in bf16)
    from kvplan.costs.memory.params import param_counts

    path = tmp_path / "starcoder2.json"
    path.write_text(json.dumps(_STARCODER2))
    assert param_counts(load_model(str(path))).total == 15_957_889_024
    no_bias = {**_STARCODER2, "use_bias": False}  # 40 x (13,312 + 30,720) biases fewer
    path.write_text(json.dumps(no_bias))
    assert param_counts(load_model(str(path))).total == 15_957_889_024 - 40 * 44_032


_PYTHIA = {"architectures": ["GPTNeoXForCausalLM"], "model_type": "gpt_neox", "hidden_size": 4096,
           "intermediate_size": 16384, "num_attention_heads": 32, "num_hidden_layers": 32,
           "vocab_size": 50432, "max_position_embeddings": 2048, "rotary_pct": 0.25,
           "hidden_act": "gelu", "tie_word_embeddings": False, "torch_dtype": "float16"}


def test_gpt_neox_mlp_is_plain_with_biases(tmp_path: Path) -> None:
    # EleutherAI/pythia-6.9b (6,857,302,016 parameters): vLLM's GPTNeoXMLP is dense_h_to_4h
    # -> gelu -> dense_4h_to_h (not gated), with biases on every linear and LayerNorm.
    # Per layer: qkv 3 x 4096^2 + 12,288, dense 4096^2 + 4,096, MLP 2 x 4096 x 16384 + 20,480,
    # 2 LayerNorms 16,384 = 201,379,840; x 32 + 2 x 50,432 x 4,096 + final norm 8,192.
    # kvplan priced a gated MLP without biases: 9,003,339,776
    from kvplan.costs.memory.params import param_counts

    path = tmp_path / "pythia.json"
    path.write_text(json.dumps(_PYTHIA))
    assert param_counts(load_model(str(path))).total == 6_857_302_016


_BLOOM = {"architectures": ["BloomForCausalLM"], "model_type": "bloom", "hidden_size": 4096,
          "n_head": 32, "n_layer": 30, "vocab_size": 250880, "torch_dtype": "bfloat16"}
_MINITRON = {"architectures": ["NemotronForCausalLM"], "model_type": "nemotron",
             "hidden_size": 4096, "intermediate_size": 16384, "num_attention_heads": 48,
             "num_key_value_heads": 8, "head_dim": 128, "num_hidden_layers": 32,
             "vocab_size": 256000, "max_position_embeddings": 4096, "hidden_act": "relu2",
             "partial_rotary_factor": 0.5, "tie_word_embeddings": False,
             "torch_dtype": "bfloat16"}
_GPTJ = {"architectures": ["GPTJForCausalLM"], "model_type": "gptj", "n_embd": 4096, "n_head": 16,
         "n_layer": 28, "n_positions": 2048, "rotary_dim": 64, "vocab_size": 50400,
         "activation_function": "gelu_new", "tie_word_embeddings": False,
         "torch_dtype": "float16"}


@pytest.mark.parametrize(
    ("cfg", "params"),
    [
        # bigscience/bloom-7b1 (7,069,016,064 parameters): plain MLP (dense_h_to_4h -> gelu ->
        # dense_4h_to_h), biases everywhere, LayerNorms with bias, a LayerNorm after the
        # embedding, lm_head tied (BloomConfig keeps PretrainedConfig's True). Per layer:
        # qkv 3 x 4096^2 + 12,288, dense 4096^2 + 4,096, MLP 2 x 4096 x 16384 + 20,480,
        # 2 LayerNorms 16,384 = 201,379,840; x 30 + 250,880 x 4,096 + 2 x 8,192
        (_BLOOM, 7_069_016_064),
        # Nemotron (Minitron-8B's shape): NemotronMLP is up_proj -> relu2 -> down_proj (not
        # gated) and LayerNorm1P has a bias. Per layer: q 4096 x 6144, k / v 4096 x 1024,
        # o 6144 x 4096 = 58,720,256, MLP 2 x 4096 x 16384 = 134,217,728, 2 norms 16,384;
        # x 32 = 6,174,539,776 + 2 x 256,000 x 4,096 + final norm 8,192
        (_MINITRON, 8_271_699_968),
        # GPT-J-6B's shape: attention and MLP in parallel after one LayerNorm (ln_1), fc_in /
        # fc_out (plain, biased), attention without biases, a biased lm_head. Per layer:
        # 4 x 4096^2 + 2 x 4096 x 16384 + 16,384 + 4,096 + 8,192 = 201,355,264; x 28 =
        # 5,637,947,392 + 50,400 x 4,096 x 2 + 50,400 + ln_f 8,192
        (_GPTJ, 6_050_882_784),
    ],
    ids=["bloom-7b1", "nemotron", "gpt-j"],
)
def test_plain_mlp_families_count_their_parameters(tmp_path: Path, cfg: dict[str, object],
                                                   params: int) -> None:
    from kvplan.costs.memory.params import param_counts

    path = tmp_path / "cfg.json"
    path.write_text(json.dumps(cfg))
    assert param_counts(load_model(str(path))).total == params


_OLMO2 = {"architectures": ["Olmo2ForCausalLM"], "model_type": "olmo2", "hidden_size": 4096,
          "intermediate_size": 11008, "num_attention_heads": 32, "num_key_value_heads": 32,
          "num_hidden_layers": 32, "vocab_size": 100352, "max_position_embeddings": 4096,
          "tie_word_embeddings": False, "torch_dtype": "bfloat16"}
_OLMOE = {"architectures": ["OlmoeForCausalLM"], "model_type": "olmoe", "hidden_size": 2048,
          "intermediate_size": 1024, "num_experts": 64, "num_experts_per_tok": 8,
          "num_hidden_layers": 16, "num_attention_heads": 16, "num_key_value_heads": 16,
          "vocab_size": 50304, "max_position_embeddings": 4096, "tie_word_embeddings": False,
          "torch_dtype": "bfloat16"}


@pytest.mark.parametrize(("cfg", "params"), [(_OLMO2, 7_298_617_344), (_OLMOE, 6_919_161_856)],
                         ids=["OLMo-2-1124-7B", "OLMoE-1B-7B"])
def test_olmo_qk_norms_span_every_head(tmp_path: Path, cfg: dict[str, object],
                                       params: int) -> None:
    # vLLM's Olmo2Attention / OlmoeAttention normalise the whole q (heads x head_dim) and k
    # (kv heads x head_dim), not one head: 2 x 4,096 (OLMo 2) / 2 x 2,048 (OLMoE) per layer.
    # kvplan counted 2 x 128 for OLMo 2 (32 x 7,936 = 253,952 too few) and none for OLMoE
    # (16 x 4,096 = 65,536 too few). Published totals: 7,298,617,344 and 6,919,161,856
    from kvplan.costs.memory.params import param_counts

    path = tmp_path / "cfg.json"
    path.write_text(json.dumps(cfg))
    assert param_counts(load_model(str(path))).total == params


_STABLELM2 = {"architectures": ["StableLmForCausalLM"], "model_type": "stablelm",
              "hidden_size": 2048, "num_attention_heads": 32, "num_key_value_heads": 32,
              "intermediate_size": 5632, "num_hidden_layers": 24, "vocab_size": 100352,
              "max_position_embeddings": 4096, "partial_rotary_factor": 0.25,
              "use_qkv_bias": True, "tie_word_embeddings": False, "torch_dtype": "bfloat16"}


def test_stablelm_qkv_and_layernorm_biases(tmp_path: Path) -> None:
    # stabilityai/stablelm-2-1_6b (1,644,515,328 parameters): use_qkv_bias gives q, k, v
    # (not o_proj) a bias, 24 x 3 x 2,048 = 147,456, and its LayerNorms have biases,
    # (2 x 24 + 1) x 2,048 = 100,352; kvplan counted neither (1,644,267,520)
    from kvplan.costs.memory.params import param_counts

    path = tmp_path / "stablelm.json"
    path.write_text(json.dumps(_STABLELM2))
    assert param_counts(load_model(str(path))).total == 1_644_515_328
