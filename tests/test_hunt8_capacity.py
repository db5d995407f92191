"""hunt8-capacity: capacity / memory arithmetic checked against vLLM 0.11.0's source
(the vllm-0.11.0 sdist from PyPI)."""

from __future__ import annotations

from pathlib import Path

from kvplan.costs.memory.plan import plan_memory
from kvplan.specs.catalog import load_model
from kvplan.specs.hardware import load_gpu
from kvplan.specs.serving import EngineConfig
from kvplan.units import GiB
from tests.fuzz2_support import assert_error, run_case

# ------------------------------------------- MLA: FlashMLA forces 64 whatever --block-size


def test_mla_block_128_on_hopper_runs_flashmla_blocks_of_64() -> None:
    """vLLM 0.11.0 platforms/cuda.py: `if use_flashmla and is_flashmla_supported()[0] and
    cache_config.block_size != 64: cache_config.block_size = 64`. kvplan kept 128 (a multiple
    of 64): 10,271 blocks of 128 instead of vLLM's 20,542 of 64, and no "Forcing" line.
    DeepSeek-V2-Lite, 1 GiB of KV memory: a block of 64 = 64 x 576 x 2 B x 27 layers =
    1,990,656 B; 1 GiB // 1,990,656 = 539 blocks, 539 x 64 = 34,496 tokens."""
    p = plan_memory(load_model("deepseek-ai/DeepSeek-V2-Lite"), load_gpu("H100"),
                    EngineConfig(block_size=128, max_model_len=4096, kv_cache_memory_bytes=GiB))
    assert (p.block_size, p.num_blocks, p.kv_cache_tokens) == (64, 539, 34_496)
    assert p.settings.block_size_log == "Forcing kv cache block size to 64 for FlashMLA backend."


def test_disagg_hopper_and_blackwell_mla_pools_have_no_common_block(tmp_path: Path) -> None:
    """FlashMLA (H100) forces 64 and CUTLASS MLA (B200) 128 whatever is given: the advice
    was 'give --block-size 128, which both pools keep', which vLLM's H100 pool turns to 64."""
    argv = ["simulate", "deepseek-ai/DeepSeek-V2-Lite", "--disagg", "1P1D", "--prefill-gpu",
            "B200", "--num-prompts", "2", "--block-size", "128", "--json"]
    assert_error(run_case(tmp_path, argv), "no --block-size makes them page alike")
