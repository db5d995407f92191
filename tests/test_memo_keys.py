"""The step model's memos key on every engine flag their values read: each flag changed
alone gives the memo's answer equal to a fresh computation (a flag missing from a key would
hand back the answer of the engine before it: a stale number)."""

from __future__ import annotations

import dataclasses

import pytest

from kvplan.costs.step import constants as const_mod
from kvplan.costs.step import ops as ops_mod
from kvplan.errors import KvplanError
from kvplan.specs.catalog import load_model
from kvplan.specs.serving import EngineConfig

ALTERNATES = {
    "tensor_parallel_size": 2, "pipeline_parallel_size": 2, "block_size": 32,
    "gpu_memory_utilization": 0.8, "max_model_len": 4096, "max_num_seqs": 64,
    "max_num_batched_tokens": 1024, "enable_chunked_prefill": False,
    "enable_prefix_caching": False, "kv_cache_dtype": "fp8", "dtype": "float16",
    "quantization": "fp8", "kv_cache_memory_bytes": 8 * 1024**3,
    "mamba_cache_dtype": "float32", "mamba_ssm_cache_dtype": "float32",
    "long_prefill_token_threshold": 256, "max_num_partial_prefills": 2,
    "async_scheduling": True, "data_parallel_size": 2, "enable_expert_parallel": True,
    "all2all_backend": "deepep_low_latency", "expert_imbalance": 1.5, "enable_dbo": True,
    "dbo_decode_token_threshold": 8, "dbo_prefill_token_threshold": 64,
    "mxfp4_moe_backend": "marlin", "enforce_eager": True,
    "num_gpu_blocks_override": 1000,
}
MODELS = ["meta-llama/Llama-3.1-8B", "openai/gpt-oss-20b", "Qwen/Qwen3-Next-80B-A3B-Thinking",
          "deepseek-ai/DeepSeek-V2-Lite"]


def test_every_engine_field_has_an_alternate() -> None:
    """A new EngineConfig field must be added here, so the memo test below covers it."""
    fields = {f.name for f in dataclasses.fields(EngineConfig)}
    assert fields == set(ALTERNATES), fields ^ set(ALTERNATES)


@pytest.mark.parametrize("name", MODELS)
def test_memoised_step_values_equal_fresh_ones_for_each_flag(name: str) -> None:
    model = load_model(name)
    base = EngineConfig()
    const_mod.step_constants(model, base)
    ops_mod.stage_ops(model, base)
    checked = 0
    for field, value in ALTERNATES.items():
        try:
            engine = dataclasses.replace(base, **{field: value})
            fresh_c = const_mod._step_constants(model, engine)
            fresh_o = ops_mod._stage_ops(model, engine)
        except KvplanError:  # not a valid deployment of this model
            continue
        assert const_mod.step_constants(model, engine) == fresh_c, field
        assert ops_mod.stage_ops(model, engine) == fresh_o, field
        checked += 1
    assert checked >= 15
