"""Session 15 fuzz hunt (fuzz15): CLI output paths and inputs found by a throwaway driver."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from tests.fuzz2_support import L1B, MCSV, assert_error, run_case

CATALOG = Path(__file__).resolve().parents[1] / "src/kvplan/specs/catalog/models"

# ------------------------------------------------- a read-only output file

READ_ONLY_CASES = [
    ["report", L1B, "--gpu", "H100", "-o", "out.html"],
    ["capacity", L1B, "--gpu", "H100", "--plot", "out.svg"],
    ["simulate", L1B, "--num-prompts", "3", "--save-result", "out.json"],
    ["calibrate", "m.csv", "--force", "--out", "out.json"],
]


@pytest.mark.parametrize("argv", READ_ONLY_CASES, ids=lambda a: a[0])
def test_a_read_only_output_is_refused_not_replaced(argv: list[str], tmp_path: Path) -> None:
    """Was: 'wrote out.html (replaced)', exit 0: the temporary-file-then-rename write replaced
    a file the user had made read-only (chmod 444), which `>` or vllm bench serve's
    open(path, 'w') refuse for its owner. Now one error line naming the mode, exit 2, before
    any work; the file keeps its bytes and its mode."""
    out = tmp_path / argv[-1]
    out.write_text("keep me\n")
    out.chmod(0o444)
    result = run_case(tmp_path, argv, {"m.csv": MCSV})
    assert_error(result, f"{argv[-2]} {argv[-1]} is read-only (mode 0444)")
    assert out.read_text() == "keep me\n"
    assert stat.S_IMODE(out.stat().st_mode) == 0o444


# ------------------------------------------------- a MoE config routing to more experts than it has


@pytest.mark.parametrize("experts", [1, 2, 3])
def test_more_experts_per_token_than_experts_is_refused(experts: int, tmp_path: Path) -> None:
    """gpt-oss-20b routes each token to its top 4 of 32 experts. With num_local_experts cut to
    1, 2 or 3, the miss chance 1 - k/E is -3, -1 or -1/3: latency priced a 'share of experts
    touched' of 1 - (-3)^T (numpy's 'overflow encountered in power' on stderr, exit 0) or of
    0 / 2 / 4/3 at E = 2, 3. vLLM cannot start such a model (the router's torch.topk(k=4) over
    fewer than 4 logits fails). Now one error line naming the field, exit 2."""
    cfg = json.loads((CATALOG / "openai--gpt-oss-20b.json").read_text())
    assert (cfg["num_local_experts"], cfg["num_experts_per_tok"]) == (32, 4)
    cfg["num_local_experts"] = experts
    files = {"config.json": json.dumps(cfg)}
    result = run_case(tmp_path, ["latency", "config.json", "--gpu", "H100", "--prompt", "64",
                                 "--output", "4", "--json"], files)
    assert_error(result, "field 'num_experts_per_tok'",
                 f"4 experts per token exceed the {experts} routed experts")


def test_top_k_equal_to_the_experts_still_runs(tmp_path: Path) -> None:
    """The bound is k <= E: every expert routed (k = E = 4) is a valid, if odd, config."""
    cfg = json.loads((CATALOG / "openai--gpt-oss-20b.json").read_text())
    cfg["num_local_experts"] = 4
    result = run_case(tmp_path, ["kv", "config.json", "--json"], {"config.json": json.dumps(cfg)})
    assert result.code == 0, result


# ------------------------------------------------- an output path ending in '/'


@pytest.mark.parametrize("argv", [
    ["report", L1B, "--gpu", "H100", "-o", "r.html/"],
    ["capacity", L1B, "--gpu", "H100", "--plot", "c.svg/"],
    ["calibrate", "m.csv", "--force", "--out", "p.json/"],
], ids=lambda a: a[0])
def test_an_output_path_ending_in_a_slash_is_refused(argv: list[str], tmp_path: Path) -> None:
    """Was: 'wrote r.html', exit 0: pathlib drops the trailing '/', so a path that POSIX reads
    as a folder (open('r.html/', 'w') fails with EISDIR, as the shell's '> r.html/' does)
    became a file. Now one error line, exit 2, and nothing is written."""
    result = run_case(tmp_path, argv, {"m.csv": MCSV})
    assert_error(result, f"{argv[-1]} ends in '/', which names a folder")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.csv"]


# ------------------------------------------------- which dtype a config.json declares


def _kv_dtype(tmp_path: Path, cfg: dict[str, object]) -> object:
    result = run_case(tmp_path, ["kv", "config.json", "--json"], {"config.json": json.dumps(cfg)})
    assert result.code == 0, result
    return json.loads(result.out)["kv_cache_dtype"]


def test_dtype_key_wins_over_torch_dtype(tmp_path: Path) -> None:
    """transformers (>= 4.56, which vLLM 0.11 needs) keeps ``dtype`` when a config holds both
    (PretrainedConfig: 'If both are provided, keep `dtype`'). A 1B config with dtype float16
    and torch_dtype float32 is served (dtype=auto) in float16, so the KV cache is float16.
    Was: bfloat16, with the note 'torch_dtype float32: served as bfloat16'."""
    cfg = json.loads((CATALOG / "meta-llama--Llama-3.2-1B.json").read_text())
    cfg.update(dtype="float16", torch_dtype="float32")
    assert _kv_dtype(tmp_path, cfg) == "float16"


def test_root_dtype_wins_over_the_text_config(tmp_path: Path) -> None:
    """vLLM's _find_dtype reads the root config's dtype first and the text config's only when
    the root has none. gemma-3-27b-it with root bfloat16 and text_config float16 is served in
    bfloat16. Was: float16 (the text config's value won)."""
    cfg = json.loads((CATALOG / "google--gemma-3-27b-it.json").read_text())
    assert cfg["torch_dtype"] == "bfloat16"
    cfg["text_config"]["torch_dtype"] = "float16"
    assert _kv_dtype(tmp_path, cfg) == "bfloat16"


# ------------------------------------------------- rope_scaling naming two RoPE types


def test_conflicting_rope_type_and_legacy_type_are_refused(tmp_path: Path) -> None:
    """vLLM's patch_rope_scaling_dict raises "Found conflicts between 'rope_type=yarn' (modern
    field) and 'type=linear' (legacy field)". Was: exit 0, the yarn reading
    (original_max_position_embeddings 20000 x factor 2 = 40,000 tokens, 'Maximum concurrency
    for 40,000 tokens'). Now one error line naming rope_scaling.type, exit 2."""
    cfg = json.loads((CATALOG / "Qwen--Qwen3-8B.json").read_text())
    cfg["rope_scaling"] = {"rope_type": "yarn", "type": "linear", "factor": 2.0,
                           "original_max_position_embeddings": 20000}
    result = run_case(tmp_path, ["capacity", "config.json", "--gpu", "H200"],
                      {"config.json": json.dumps(cfg)})
    assert_error(result, "field 'rope_scaling.type'", "rope_type 'yarn' conflicts with the "
                 "legacy type 'linear'")


@pytest.mark.parametrize(("legacy", "modern"), [("mrope", "default"), ("su", "longrope"),
                                                 ("yarn", "yarn")])
def test_rope_type_pairs_vllm_reads_as_one_still_run(legacy: str, modern: str,
                                                     tmp_path: Path) -> None:
    """Qwen2.5-VL files saved by newer transformers hold type mrope with rope_type default;
    vLLM renames su to longrope; equal names are no conflict. Qwen3-8B's 40,960 positions
    stay the max_model_len (factor absent: 1; longrope, as llama3, is not scaled)."""
    cfg = json.loads((CATALOG / "Qwen--Qwen3-8B.json").read_text())
    cfg["rope_scaling"] = {"rope_type": modern, "type": legacy}
    if modern == "yarn":
        cfg["rope_scaling"].update(factor=1.0, original_max_position_embeddings=40960)
    result = run_case(tmp_path, ["capacity", "config.json", "--gpu", "H200"],
                      {"config.json": json.dumps(cfg)})
    assert result.code == 0, result
    assert "Maximum concurrency for 40,960 tokens per request" in result.out


# ------------------------------------------------- compressed-tensors' older compression_config key

FP8_CHANNEL = {"quant_method": "compressed-tensors", "format": "float-quantized",
               "config_groups": {"group_0": {
                   "targets": ["Linear"],
                   "weights": {"num_bits": 8, "type": "float", "strategy": "channel"},
                   "input_activations": {"num_bits": 8, "type": "float", "dynamic": True,
                                         "strategy": "token"}}},
               "ignore": ["lm_head"]}


def test_compression_config_is_read_as_the_quantization_config(tmp_path: Path) -> None:
    """Older llm-compressor exports keep the scheme under "compression_config"; vLLM's
    _parse_quant_hf_config falls back to that key. Was: ignored, Llama-3.1-8B priced in
    bf16, weights 16,094,076,928 B. Now the fp8 channel scheme, as under quantization_config:
    linear weights 6,979,321,856 x 1 B + a float32 scale per output row (6144 + 4096 + 28672
    + 4096 = 43,008 rows x 4 B x 32 layers = 5,505,024) + bf16 embedding and lm_head
    (2 x 128,256 x 4096 x 2 = 2,101,346,304) + norms (65 x 4096 x 2 = 532,480) + the rope
    cos/sin cache (131,072 x 128 x 2 = 33,554,432) = 9,120,260,096 B."""
    cfg = json.loads((CATALOG / "meta-llama--Llama-3.1-8B.json").read_text())
    cfg["compression_config"] = FP8_CHANNEL
    result = run_case(tmp_path, ["capacity", "config.json", "--gpu", "H100", "--json"],
                      {"config.json": json.dumps(cfg)})
    assert result.code == 0, result
    assert json.loads(result.out)["weights_bytes"] == 9_120_260_096


def test_a_float16_gemma_config_is_served_in_bfloat16_under_auto(tmp_path: Path) -> None:
    """vLLM 0.11's _resolve_auto_dtype drops float16 from the dtypes a gemma2 / gemma3 model
    may take (_is_valid_dtype) and falls back to the platform's first, bfloat16; only an
    explicit --dtype float16 is refused. Was: a gemma-2-9b-it config saved in float16 was
    served (and its KV cache stored) as float16."""
    cfg = json.loads((CATALOG / "google--gemma-2-9b-it.json").read_text())
    cfg["torch_dtype"] = "float16"
    assert _kv_dtype(tmp_path, cfg) == "bfloat16"


# ------------------------------------------------- the name a model folder is shown by


@pytest.mark.parametrize("given", ["Llama-3.2-1B-local", "Llama-3.2-1B-local/config.json"])
def test_a_model_folder_is_named_by_the_folder_not_config(given: str, tmp_path: Path) -> None:
    """Was: '"model": "config"' (and 'config — GQA' as the title) for any model given as its
    folder or its folder's config.json: the file's stem. vLLM names a local model by its path;
    kvplan now shows the folder's name. A config file of another name keeps its stem."""
    folder = tmp_path / "Llama-3.2-1B-local"
    folder.mkdir()
    (folder / "config.json").write_text((CATALOG / "meta-llama--Llama-3.2-1B.json").read_text())
    result = run_case(tmp_path, ["kv", given, "--json"])
    assert result.code == 0, result
    assert json.loads(result.out)["model"] == "Llama-3.2-1B-local"
