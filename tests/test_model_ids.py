"""Model ids as people type them: catalog, local Hugging Face cache, Instruct variants, hints."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from kvplan.errors import UnknownNameError
from kvplan.specs.catalog import catalog, find_variant, load_model, variant_key
from tests.conftest import assert_one_line_error, run_cli

LLAMA = catalog()["meta-llama/llama-3.1-8b"].path


def _fake_cache(root: Path, repo_id: str, config: dict[str, object], *, ref: bool) -> Path:
    """The standard hub layout: models--ORG--NAME/{refs/main, snapshots/REV/config.json}."""
    repo = root / ("models--" + repo_id.replace("/", "--"))
    snap = repo / "snapshots" / "0123abcd"
    snap.mkdir(parents=True)
    (snap / "config.json").write_text(json.dumps(config))
    if ref:
        (repo / "refs").mkdir()
        (repo / "refs" / "main").write_text("0123abcd")
    return snap / "config.json"


@pytest.mark.parametrize(
    ("typed", "base"),
    [
        ("meta-llama/Llama-3.1-8B-Instruct", "meta-llama/Llama-3.1-8B"),
        ("mistralai/Mistral-7B-Instruct-v0.1", "mistralai/Mistral-7B-v0.1"),
        ("mistralai/Mixtral-8x7B-Instruct-v0.1", "mistralai/Mixtral-8x7B-v0.1"),
        ("meta-llama/Llama-2-7b-chat-hf", "meta-llama/Llama-2-7b-hf"),
        ("meta-llama/Meta-Llama-3.1-70B-Instruct", "meta-llama/Llama-3.1-70B"),
        ("google/gemma-2-9b", "google/gemma-2-9b-it"),
        ("Qwen/Qwen3-Next-80B-A3B-Instruct", "Qwen/Qwen3-Next-80B-A3B-Thinking"),
        ("Llama-3.1-8B-Instruct", "meta-llama/Llama-3.1-8B"),
    ],
)
def test_variants_share_the_base_config(typed: str, base: str) -> None:
    entry = find_variant(typed)
    assert entry is not None and entry.hf_id == base
    assert load_model(typed).name == base


@pytest.mark.parametrize(
    "typed",
    ["mistralai/Mistral-7B-Instruct-v0.2", "meta-llama/Llama-3.1-8B-Instruct-FP8",
     "someone/Llama-3.1-8B-Instruct", "Qwen/Qwen2.5-7B-Instruct-1M"],
)
def test_other_versions_orgs_and_quantized_weights_are_not_variants(typed: str) -> None:
    assert find_variant(typed) is None


def test_variant_key_drops_only_variant_words() -> None:
    assert variant_key("meta-llama/Meta-Llama-3.1-8B-Instruct") == "meta-llama/llama-3.1-8b"
    assert variant_key("mistralai/Mistral-7B-Instruct-v0.1") == "mistralai/mistral-7b-v0.1"


def test_cli_says_which_config_was_used() -> None:
    r = run_cli("kv", "meta-llama/Llama-3.1-8B-Instruct", "--json")
    assert r.code == 0, r.err
    assert r.json()["model"] == "meta-llama/Llama-3.1-8B"
    assert r.err.strip() == (
        "note: using the config of meta-llama/Llama-3.1-8B for meta-llama/Llama-3.1-8B-Instruct "
        "(Instruct/chat variants share the base model's architecture)"
    )


def test_unknown_model_names_the_nearest_ids() -> None:
    r = run_cli("kv", "meta-llama/Llama-3.1-9B")
    assert_one_line_error(r)
    assert "Nearest catalog ids: meta-llama/Llama-3.1-8B" in r.err


@pytest.mark.parametrize("ref", [True, False])
def test_local_hf_cache_is_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                caplog: pytest.LogCaptureFixture, ref: bool) -> None:
    config = json.loads(LLAMA.read_text())
    config["num_hidden_layers"] = 7  # a model the catalog does not have
    path = _fake_cache(tmp_path / "hub", "acme/Tiny-Llama-7L", config, ref=ref)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    with caplog.at_level(logging.INFO, logger="kvplan"):
        spec = load_model("acme/tiny-llama-7l")  # case-insensitive, like the catalog
    assert spec.name == "acme/Tiny-Llama-7L" and spec.num_layers == 7
    assert f"from the local Hugging Face cache ({path})" in caplog.text


def test_hf_home_and_the_cache_beats_the_variant_rule(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    config = json.loads(LLAMA.read_text())
    config["max_position_embeddings"] = 4096  # the downloaded Instruct config differs
    _fake_cache(tmp_path / "home" / "hub", "meta-llama/Llama-3.1-8B-Instruct", config, ref=True)
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "home"))
    spec = load_model("meta-llama/Llama-3.1-8B-Instruct")
    assert spec.name == "meta-llama/Llama-3.1-8B-Instruct"
    assert spec.max_position_embeddings == 4096


def test_missing_or_empty_cache_falls_through(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "nowhere"))
    assert load_model("meta-llama/Llama-3.1-8B-Instruct").name == "meta-llama/Llama-3.1-8B"
    (tmp_path / "hub" / "models--acme--Empty" / "snapshots").mkdir(parents=True)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    with pytest.raises(UnknownNameError, match="not in the local Hugging Face cache"):
        load_model("acme/Empty")


# ---------------------------------------------------------------- published derivatives


@pytest.mark.parametrize(
    ("typed", "published", "base"),
    [
        ("Qwen/Qwen3-8B-FP8", "Qwen/Qwen3-8B-FP8", "Qwen/Qwen3-8B"),
        ("qwen/qwen3-30b-a3b-fp8", "Qwen/Qwen3-30B-A3B-FP8", "Qwen/Qwen3-30B-A3B"),
        ("Qwen3-235B-A22B-FP8", "Qwen/Qwen3-235B-A22B-FP8", "Qwen/Qwen3-235B-A22B"),
        ("deepseek-ai/DeepSeek-R1", "deepseek-ai/DeepSeek-R1", "deepseek-ai/DeepSeek-V3"),
        ("deepseek-ai--DeepSeek-R1-0528", "deepseek-ai/DeepSeek-R1-0528",
         "deepseek-ai/DeepSeek-V3"),
        ("deepseek-ai/DeepSeek-V3.1", "deepseek-ai/DeepSeek-V3.1", "deepseek-ai/DeepSeek-V3"),
    ],
)
def test_published_derivatives_take_the_catalog_architecture(typed: str, published: str,
                                                             base: str) -> None:
    spec, arch = load_model(typed), load_model(base)
    assert spec.name == published
    assert spec.quantization == "fp8" and spec.weight_block_size == (128, 128)
    assert (spec.num_layers, spec.hidden_size, spec.max_position_embeddings) == (
        arch.num_layers, arch.hidden_size, arch.max_position_embeddings)


def test_a_qwen_fp8_release_stores_fp8_weights() -> None:
    """Qwen3-8B, 36 layers: q and o 4,096 x 4,096, k and v 1,024 x 4,096, gate, up and down
    12,288 x 4,096: 192,937,984 linear weights a layer, 6,945,767,424 in all, one byte each
    in fp8 instead of two, plus a float32 scale per 128 x 128 block (32x32 + 2 x 8x32 + 32x32
    + 3 x 96x32 = 11,776 blocks a layer: 1,695,744 bytes). Embeddings, lm_head and norms stay
    bf16. Saved: 6,945,767,424 - 1,695,744 = 6,944,071,680 bytes."""
    bf16 = run_cli("capacity", "Qwen/Qwen3-8B", "--gpu", "H100-SXM-80GB", "--json")
    fp8 = run_cli("capacity", "Qwen/Qwen3-8B-FP8", "--gpu", "H100-SXM-80GB", "--json")
    assert bf16.code == 0 and fp8.code == 0, fp8.err
    saved = bf16.json()["weights_bytes"] - fp8.json()["weights_bytes"]
    assert saved == 6_944_071_680
    assert fp8.err.strip() == (
        "note: using the config of Qwen/Qwen3-8B for Qwen/Qwen3-8B-FP8: Qwen's FP8 release of "
        "that model, its weights in block-scaled fp8 (128 x 128 blocks)")


@pytest.mark.parametrize(
    "typed",
    ["Qwen/Qwen3-30B-A3B-Instruct-2507-FP8",  # 2507: 262,144-token context, not the base's
     "deepseek-ai/DeepSeek-V3.2-Exp",  # sparse attention: another architecture
     "someone/Qwen3-8B-FP8", "meta-llama/Llama-3.1-8B-Instruct-FP8"],
)
def test_unlisted_derivatives_are_unknown(typed: str) -> None:
    r = run_cli("kv", typed)
    assert_one_line_error(r)
    assert "unknown model" in r.err


def test_the_base_config_file_is_not_changed_by_a_derivative() -> None:
    path = catalog()["qwen/qwen3-8b"].path
    before = path.read_bytes()
    assert load_model("Qwen/Qwen3-8B-FP8").quantization == "fp8"
    assert load_model("Qwen/Qwen3-8B").quantization is None
    assert path.read_bytes() == before


def test_models_lists_the_derivatives_in_text_and_json() -> None:
    data = run_cli("models", "--json").json()
    assert data["derived"]["Qwen/Qwen3-8B-FP8"] == "Qwen/Qwen3-8B"
    assert data["derived"]["deepseek-ai/DeepSeek-R1"] == "deepseek-ai/DeepSeek-V3"
    ids = {m["id"] for m in data["models"]}
    assert set(data["derived"].values()) <= ids and not set(data["derived"]) & ids
    text = run_cli("models")
    assert text.code == 0 and "Also accepted" in text.out and "DeepSeek-R1-0528" in text.out


def test_llama_3_3_70b_is_the_3_1_network_in_bf16() -> None:
    spec, arch = load_model("meta-llama/Llama-3.3-70B-Instruct"), load_model(
        "meta-llama/Llama-3.1-70B")
    assert spec.name == "meta-llama/Llama-3.3-70B-Instruct" and spec.quantization is None
    assert (spec.num_layers, spec.hidden_size, spec.max_position_embeddings) == (80, 8192,
                                                                                 131072)
    assert (arch.num_layers, arch.hidden_size, arch.max_position_embeddings) == (80, 8192,
                                                                                 131072)
