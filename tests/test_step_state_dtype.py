"""The step model reads and writes a hybrid model's state cache at its own dtype
(--mamba-ssm-cache-dtype / --mamba-cache-dtype), as the memory plan sizes it."""

from __future__ import annotations

from kvplan.costs.step.constants import step_constants
from kvplan.costs.step.latency import RequestShape, request_latency
from kvplan.specs.catalog import load_model
from kvplan.specs.hardware import load_gpu
from kvplan.specs.serving import EngineConfig

MODEL = "nvidia/Nemotron-H-56B-Base-8K"


def test_state_bytes_follow_the_ssm_cache_dtype_by_hand() -> None:
    """54 Mamba2 layers at TP2: conv 30,720 elements x 2 B + SSM 2,097,152 elements x 2 B
    (auto, bf16) = 4,255,744 B per layer, 229,810,176 B per request; with float32 SSM state
    30,720 x 2 + 2,097,152 x 4 = 8,450,048 B per layer, 456,302,592 B per request. Asked in
    either order (the planner's memo must tell the two apart)."""
    model = load_model(MODEL)
    auto = EngineConfig(tensor_parallel_size=2)
    f32 = EngineConfig(tensor_parallel_size=2, mamba_ssm_cache_dtype="float32")
    for engine, want in ((auto, 229_810_176), (f32, 456_302_592), (auto, 229_810_176)):
        assert step_constants(model, engine).state_bytes_per_request == want


def test_a_wider_state_cache_is_never_faster() -> None:
    model, gpu = load_model(MODEL), load_gpu("H200")
    shape = RequestShape(batch=8, prompt_tokens=2048, output_tokens=64)
    auto = request_latency(model, gpu, EngineConfig(tensor_parallel_size=2), shape)
    f32 = request_latency(model, gpu, EngineConfig(tensor_parallel_size=2,
                                                    mamba_ssm_cache_dtype="float32"), shape)
    assert f32.tpot_s > auto.tpot_s
