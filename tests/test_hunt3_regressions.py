"""Third hunt round (kv, capacity, latency --explain): each defect pinned by a hand-checkable
golden value."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import assert_one_line_error, run_cli

# -------------------- D1: under pipeline parallelism the KV cache groups are the whole model's
# vLLM 0.11 (kv_cache_utils.get_kv_cache_configs, vllm#23974) merges every stage's layer specs,
# forms the groups from the whole model (layers[i::n] per spec), then gives each stage its own
# layers of every group; a group may be empty on a stage and still takes one block per block
# of tokens. kvplan grouped each stage's layers on their own, so a stage whose sliding/full
# (or state/attention) ratio differs from the model's got other groups than vLLM's.
#
# gemma-3-27b-it (10 full layers 5, 11, ..., 59; 52 sliding, window 1024), PP 3 -> stages of
# 21 / 21 / 20 layers; whole model: g = 10, so 6 sliding groups (sliding[i::6]) + 1 full = 7
# groups. Stage 1 (layers 21-41) holds 4 full layers and 3/3/3/3/3/2 sliding ones: 4 layers
# per group, the most of any stage (stages 0 and 2 hold 3). Page = 16 tokens x 16 KV heads x
# 128 x 2 (K, V) x 2 B = 131,072 B; 20 GiB // 131,072 // 4 = 40,960 blocks;
# tokens = 40,960 // 7 x 16 = 93,616; pages per request = cdiv(4096, 16) = 256 (full) +
# 6 x (cdiv(min(1023 + 8192, 4096), 16) + 1 = 257) = 1,798; 40,960 / 1,798 = 22.78x.
# kvplan printed 6 groups, 109,216 tokens and 26.58x.
#
# Nemotron-H-56B (10 attention + 54 Mamba2 layers; block 2,080 = 16 x cdiv(8,511,488 state
# bytes, 16 x 4,096), page 2,080 x 4,096 = 8,519,680 B), PP 4: whole model g = 10, so 1
# attention group + 6 state groups (mamba[i::6]); every stage holds 3 layers of some group.
# 40 GiB // 8,519,680 // 3 = 1,680 blocks; tokens = 1,680 // 7 x min(2,080, 8,192) = 499,200;
# pages per request = cdiv(8192, 2080) = 4 + 6 x 1 = 10; 168.00x (kvplan: 582,400, 186.67x).


@pytest.mark.parametrize(("model", "pp", "max_len", "groups", "blocks", "tokens", "conc"), [
    ("google/gemma-3-27b-it", "3", "4096", 7, 40_960, 93_616, 40_960 / 1_798),
    ("nvidia/Nemotron-H-56B-Base-8K", "4", "8192", 7, 1_680, 499_200, 168.0),
])
def test_pipeline_stages_share_the_whole_models_groups(
        model: str, pp: str, max_len: str, groups: int, blocks: int, tokens: int,
        conc: float) -> None:
    res = run_cli("capacity", model, "--gpu", "H100", "-pp", pp, "--max-model-len", max_len,
                  "--kv-cache-memory", "20GiB" if "gemma" in model else "40GiB", "--json")
    assert res.code == 0, res.err
    doc = res.json()
    assert len(doc["groups"]) == groups
    assert doc["num_blocks"] == blocks
    assert doc["kv_cache_tokens"] == tokens
    assert doc["max_concurrency"] == pytest.approx(conc)


def test_a_stage_without_attention_keeps_the_padded_state_page() -> None:
    # Nemotron-H PP 10: stage 9 (layers 107-117) holds Mamba layers only. vLLM pads the state
    # page model-wide (HybridAttentionMambaModelConfig) and that stage keeps all 7 groups (the
    # attention one empty); stage 8 (95-106) holds 2 attention layers: 40 GiB // 8,519,680 // 2
    # = 2,520 blocks, 2,520 // 7 x 2,080 = 748,800 tokens, 2,520 / 10 = 252x. kvplan priced
    # stage 9 alone with an unpadded 8,511,488 B page and one group: 1,009 blocks, 1009x.
    res = run_cli("capacity", "nvidia/Nemotron-H-56B-Base-8K", "--gpu", "H100", "-pp", "10",
                  "--kv-cache-memory", "40GiB", "--json")
    assert res.code == 0, res.err
    doc = res.json()
    assert (doc["num_blocks"], doc["kv_cache_tokens"]) == (2_520, 748_800)
    assert doc["max_concurrency"] == pytest.approx(252.0)


# ------------------- D2: rope_scaling raises the max_model_len vLLM derives from a config
# vLLM 0.11 (config._get_and_verify_max_len) multiplies max_position_embeddings by
# rope_scaling's factor (yarn: original_max_position_embeddings x factor); llama3, longrope/su
# and Gemma 3 keep the field. Qwen's model cards tell users to add {"type": "yarn", "factor":
# 4.0, "original_max_position_embeddings": 32768} to Qwen2.5-7B-Instruct's config (32,768
# positions) and serve --max-model-len 131072: vLLM derives 32,768 x 4 = 131,072. kvplan
# defaulted to 32,768 and refused 131,072 ("exceeds the model's max_position_embeddings").
# Qwen2.5-7B: 28 layers x 4 KV heads x 128 x 2 (K, V) x 2 B = 57,344 B/token; a block of 16
# is 917,504 B; 20 GiB // 917,504 = 23,405 blocks (374,480 tokens); one 131,072-token
# request needs 131,072 / 16 = 8,192 blocks: 23,405 / 8,192 = 2.86x.
# lmsys/vicuna-7b-v1.5-16k (Llama-2-7B, 4,096 positions, linear x4): 4,096 x 4 = 16,384.

CATALOG = Path(__file__).resolve().parents[1] / "src/kvplan/specs/catalog/models"


def _config(tmp_path: Path, base: str, **fields: object) -> str:
    cfg = json.loads((CATALOG / f"{base}.json").read_text(encoding="utf-8"))
    cfg.update(fields)
    (tmp_path / "config.json").write_text(json.dumps(cfg), encoding="utf-8")
    return str(tmp_path)


@pytest.mark.parametrize("max_len", [None, "131072", "128K"])
def test_yarn_rope_scaling_raises_the_derived_max_model_len(tmp_path: Path,
                                                            max_len: str | None) -> None:
    model = _config(tmp_path, "Qwen--Qwen2.5-7B", max_position_embeddings=32768,
                    rope_scaling={"type": "yarn", "factor": 4.0,
                                  "original_max_position_embeddings": 32768})
    extra = [] if max_len is None else ["--max-model-len", max_len]
    res = run_cli("capacity", model, "--gpu", "H100", "--kv-cache-memory", "20GiB", "--json",
                  *extra)
    assert res.code == 0, res.err
    doc = res.json()
    assert doc["max_model_len"] == 131_072
    assert (doc["num_blocks"], doc["kv_cache_tokens"]) == (23_405, 374_480)
    assert doc["max_concurrency"] == pytest.approx(23_405 / 8_192)


def test_linear_rope_scaling_and_one_token_more_is_refused(tmp_path: Path) -> None:
    model = _config(tmp_path, "meta-llama--Llama-2-7b-hf",
                    rope_scaling={"type": "linear", "factor": 4.0})
    res = run_cli("capacity", model, "--gpu", "H100", "--json")
    assert res.code == 0, res.err
    assert res.json()["max_model_len"] == 16_384
    res = run_cli("capacity", model, "--gpu", "H100", "--max-model-len", "16385")
    assert_one_line_error(res)
    assert "16384" in res.err


# ------------------------ D3: --dtype float32 runs the activations and rope cache in fp32
# vLLM builds the model in the --dtype: hidden states, the MLP intermediates and the rotary
# cos/sin cache (get_rope's dtype is the default dtype) are fp32, and the lm_head's logits
# are already the sampler's fp32 logits (logits.to(float32) is no copy). kvplan priced them
# at 2 bytes whatever --dtype said (only the weights and the KV cache followed it).
# Llama-3.1-8B on an H100 (8,192 batched tokens, 1,024 sequences):
#   activation = 2 x 8,192 x 4,096 x 4 (hidden + residual) = 268,435,456
#              + 1,024 x 128,256 x 36 (sampler; no extra fp32 copy) = 4,728,029,184
#              = 4,996,464,640                     (was 134,217,728 + 1,024 x 128,256 x 38)
#   weights    = 2 x 16,060,522,496 (the bf16 bytes) + rope 131,072 x 128 x 4 = 67,108,864
#              = 32,188,153,856                    (was 32,154,599,424: a 2-byte rope cache)


def test_dtype_float32_activations_and_rope_cache() -> None:
    res = run_cli("capacity", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--dtype",
                  "float32", "--json")
    assert res.code == 0, res.err
    doc = res.json()
    assert doc["activation_bytes"] == 268_435_456 + 1_024 * 128_256 * 36
    assert doc["weights_bytes"] == 2 * 16_060_522_496 + 131_072 * 128 * 4
    bf16 = run_cli("capacity", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--json").json()
    assert bf16["weights_bytes"] == 16_060_522_496 + 131_072 * 128 * 2
    assert bf16["activation_bytes"] == 134_217_728 + 1_024 * 128_256 * 38


# ---------------- D4: a plain integer is read as vLLM's human_readable_int falls back to int()
# vLLM 0.11's human_readable_int matches NUMBER+SUFFIX and otherwise returns int(value), so
# `--max-model-len +8192` and `--max-model-len 8_192` serve 8,192 tokens; kvplan refused both
# ("not a whole number"). Other spellings stay refused as vLLM refuses them.


@pytest.mark.parametrize("value", ["+8192", "8_192"])
@pytest.mark.parametrize("flag", ["--max-model-len", "--max-num-batched-tokens"])
def test_plain_integers_parse_as_python_int(flag: str, value: str) -> None:
    res = run_cli("capacity", "meta-llama/Llama-3.1-8B", "--gpu", "H100", flag, value, "--json")
    assert res.code == 0, res.err
    assert res.json()[flag[2:].replace("-", "_")] == 8_192


@pytest.mark.parametrize("value", ["0x10", "_8192", "1_0k", "8192.0"])
def test_other_spellings_stay_refused(value: str) -> None:
    assert_one_line_error(run_cli("capacity", "meta-llama/Llama-3.1-8B", "--max-model-len",
                                  value))
