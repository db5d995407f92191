"""Hunt 15, KV bytes per token and page sizes (kvplan kv / request against vLLM 0.11's
kv_cache_interface.py arithmetic): regressions."""

from __future__ import annotations

import json
from pathlib import Path

from kvplan.analysis.kv_view import kv_report
from kvplan.analysis.timeline import request_timeline
from kvplan.specs.catalog import load_model
from kvplan.specs.kv import kv_spec
from tests.conftest import run_cli

_CATALOG = Path(__file__).parents[1] / "src/kvplan/specs/catalog/models"


def _v32_config(tmp_path: Path) -> str:
    """deepseek-ai/DeepSeek-V3.2-Exp's config.json: DeepSeek-V3's fields plus its indexer."""
    cfg = json.loads((_CATALOG / "deepseek-ai--DeepSeek-V3.json").read_text())
    cfg.update({"architectures": ["DeepseekV32ForCausalLM"], "model_type": "deepseek_v32",
                "index_head_dim": 128, "index_n_heads": 64, "index_topk": 2048})
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    return str(path)


def test_kv_pages_deepseek_v32_in_the_blocks_of_64_vllm_forces_on_every_gpu(
        tmp_path: Path) -> None:
    # vLLM 0.11 platforms/cuda.py: sparse MLA (index_topk) -> "Forcing kv cache block size
    # to 64 for FlashMLASparse backend." whatever --block-size and GPU (capacity does so).
    # One layer's page: 64 tokens x (656 B fp8_ds_mla latent + 128 + 128 // 128 x 4 = 132 B
    # indexer key) = 64 x 788 = 50,432 B. kvplan kv paged it in blocks of 16: 12,608 B.
    report = kv_report(_v32_config(tmp_path))
    assert report.block_size == 64
    assert report.to_json()["groups"][0]["page_size_bytes"] == 64 * (656 + 132) == 50_432
    result = run_cli("kv", _v32_config(tmp_path), "--json")
    assert result.code == 0, result.err
    assert json.loads(result.out)["block_size"] == 64
    assert "blocks of 64" in result.err


def test_request_claims_deepseek_v32_blocks_of_64(tmp_path: Path) -> None:
    # 100-token prompt, no output: cdiv(100, 64) = 2 blocks per layer, 2 x 50,432 B x 61
    # layers = 6,152,704 B allocated (in blocks of 16: 7 x 12,608 x 61 = 5,383,616 B).
    kv = kv_spec(load_model(_v32_config(tmp_path)))
    tl = request_timeline(kv, 100, 0)
    assert tl.block_size == 64
    assert tl.steps[0].allocated_blocks == 2
    assert tl.steps[0].allocated_bytes == 2 * 64 * 788 * 61 == 6_152_704


def test_kv_says_mla_pages_are_forced_to_64_or_128_where_no_block_size_is_given() -> None:
    # kvplan kv DeepSeek-V3 prints pages of 16 tokens x 1,152 B = 18,432 B per layer; vLLM
    # 0.11 runs 64 x 1,152 = 73,728 B on an H100 (FlashMLA) and 128 x 1,152 = 147,456 B on a
    # B200 (CUTLASS MLA). request said so; kv printed the 16-token page silently.
    result = run_cli("kv", "deepseek-ai/DeepSeek-V3")
    assert result.code == 0, result.err
    assert "forces 64 on Hopper" in result.err and "128 on Blackwell" in result.err
    given = run_cli("kv", "deepseek-ai/DeepSeek-V3", "--block-size", "64")
    assert given.code == 0 and "forces" not in given.err
